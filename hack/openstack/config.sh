# Writes every service's configuration under $OS_STATE/etc (sourced by
# up.sh after env.sh). Nothing in /etc is changed: each service is started
# with --config-file (or its wsgi app's config-dir variable) pointing here,
# and only the packages' read-only paste files are used from /etc.
S=$OS_STATE
E=$S/etc
P=$OS_PASSWORD
# db NAME: the connection URL of database NAME; its user is the part
# before any underscore (nova owns nova_api, nova and nova_cell0).
db() { echo "mysql+pymysql://${1%%_*}:$P@$OS_IP/$1?charset=utf8"; }
rabbit="rabbit://openstack:$P@$OS_IP:5672/"

# authtoken NAME: the [keystone_authtoken] section of service NAME's user.
authtoken() {
  cat <<AUTH
[keystone_authtoken]
www_authenticate_uri = http://$OS_IP:5000
auth_url = http://$OS_IP:5000
memcached_servers =
# Nova keeps a validated token for token_cache_time (300 s by default,
# keystonemiddleware/auth_token/_opts.py), so a revoked credential works
# on for up to five minutes. The lane keeps 10 s: the harness's credential
# rules wait for Nova to refuse, and would wait 5 min each.
token_cache_time = 10
auth_type = password
project_domain_name = Default
user_domain_name = Default
project_name = service
username = $1
password = $P
region_name = $OS_REGION
AUTH
}
# service_auth SECTION USER: a keystoneauth password section (Nova's
# clients of Placement and Neutron, Neutron's of Nova).
service_auth() {
  cat <<AUTH
[$1]
auth_type = password
auth_url = http://$OS_IP:5000/v3
project_domain_name = Default
user_domain_name = Default
project_name = service
username = $2
password = $P
region_name = $OS_REGION
valid_interfaces = public
AUTH
}

write_configs() {
  mkdir -p "$E"/{keystone,glance,placement,neutron,nova,rabbitmq,mysql} \
    "$S"/{run,logs,lock,keystone/fernet-keys,keystone/credential-keys,glance/images,glance/staging,glance/tasks,neutron,nova/instances,rabbitmq}

  # MariaDB: TCP on the namespace address only, its socket in the state dir.
  cat > "$E/mysql/my.cnf" <<CONF
[mysqld]
datadir = $S/mysql
socket = $S/run/mysqld.sock
pid-file = $S/run/mysqld.pid
bind-address = $OS_IP
port = 3306
user = root
skip-name-resolve
skip-log-bin
log-error = $S/logs/mariadb.log
innodb_buffer_pool_size = 64M
innodb_log_file_size = 16M
max_connections = 500
performance_schema = OFF
character-set-server = utf8mb4
collation-server = utf8mb4_general_ci
[client]
socket = $S/run/mysqld.sock
CONF

  # RabbitMQ: the listener on the namespace address; a user of its own
  # (guest may only come from loopback); epmd on the namespace's loopback.
  cat > "$E/rabbitmq/rabbitmq.conf" <<CONF
listeners.tcp.1 = $OS_IP:5672
default_user = openstack
default_pass = $P
loopback_users = none
log.file.level = warning
CONF
  echo "[]." > "$E/rabbitmq/enabled_plugins"

  cat > "$E/keystone/keystone.conf" <<CONF
[DEFAULT]
log_file = $S/logs/keystone.log
[database]
connection = $(db keystone)
[token]
provider = fernet
[fernet_tokens]
key_repository = $S/keystone/fernet-keys
[fernet_receipts]
key_repository = $S/keystone/fernet-keys
[credential]
key_repository = $S/keystone/credential-keys
# Keystone's own cache, in its one process: every request to every
# service has its token validated here (each service's authtoken keeps a
# validation 10 s only, above), and uncached each validation rebuilt the
# token's roles and catalogue from the database. One uwsgi process spent
# 26 of the lane's first 38 minutes of CPU on 2,535 validations of about
# 1.5 s each, and Neutron and Nova calls queued behind them past the
# provider's 30 s call timeout (ConcurrentCallsAreSafe). A user disabled
# or a role removed drops the cached tokens (keystone/token/provider.py,
# _drop_token_cache), and revocation is checked after the cache, so the
# credential rules see what they saw before.
[cache]
enabled = true
backend = dogpile.cache.memory
CONF

  cat > "$E/placement/placement.conf" <<CONF
[DEFAULT]
log_file = $S/logs/placement.log
[placement_database]
connection = $(db placement)
[api]
auth_strategy = keystone
$(authtoken placement)
CONF

  cat > "$E/glance/glance-api.conf" <<CONF
[DEFAULT]
bind_host = $OS_IP
bind_port = 9292
workers = 1
log_file = $S/logs/glance-api.log
enabled_backends = fs:file
[database]
connection = $(db glance)
$(authtoken glance)
[paste_deploy]
flavor = keystone
config_file = /etc/glance/glance-api-paste.ini
[glance_store]
default_backend = fs
[fs]
filesystem_store_datadir = $S/glance/images
[os_glance_staging_store]
filesystem_store_datadir = $S/glance/staging
[os_glance_tasks_store]
filesystem_store_datadir = $S/glance/tasks
[oslo_concurrency]
lock_path = $S/lock
CONF

  # Neutron: ML2 with the Linux bridge mechanism driver and `local`
  # networks (no physical interface, no VXLAN): a port is bound when the
  # agent of its binding host is alive, and Nova's fake driver never plugs
  # a VIF, so no bridge is ever made. No DHCP or metadata agent. The L3
  # router plugin serves routers and floating IPs through the API with no
  # L3 agent (a floating IP is allocated and associated in the database,
  # neutron/db/l3_db.py; only the agent would program NAT): the external
  # network is flat on physnet `external`, which no interface backs.
  cat > "$E/neutron/neutron.conf" <<CONF
[DEFAULT]
bind_host = $OS_IP
bind_port = 9696
core_plugin = ml2
service_plugins = router
auth_strategy = keystone
transport_url = $rabbit
api_workers = 1
rpc_workers = 0
rpc_state_report_workers = 0
state_path = $S/neutron
api_paste_config = /etc/neutron/api-paste.ini
host = $OS_COMPUTE_HOST
notify_nova_on_port_status_changes = false
notify_nova_on_port_data_changes = false
[experimental]
# Zed marks the Linux bridge driver experimental
# (neutron/common/experimental.py, validate_experimental_enabled).
linuxbridge = true
[database]
connection = $(db neutron)
$(authtoken neutron)
[agent]
# Everything runs as root in the namespace: no sudo, no rootwrap.
root_helper =
report_interval = 10
[oslo_concurrency]
lock_path = $S/lock
[oslo_messaging_notifications]
driver = noop
CONF
  cat > "$E/neutron/ml2_conf.ini" <<CONF
[ml2]
type_drivers = local,flat
tenant_network_types = local
mechanism_drivers = linuxbridge
extension_drivers = port_security
[ml2_type_flat]
flat_networks = external
CONF
  cat > "$E/neutron/linuxbridge_agent.ini" <<CONF
[linux_bridge]
physical_interface_mappings =
[vxlan]
enable_vxlan = false
[securitygroup]
enable_security_group = true
firewall_driver = noop
CONF

  # Nova: the fake virt driver; the eventlet API server (no uwsgi needed);
  # one worker per service. vif_plugging_*: no agent ever reports a plugged
  # VIF (the fake driver plugs none, and its virtapi never waits anyway).
  cat > "$E/nova/nova.conf" <<CONF
[DEFAULT]
compute_driver = fake.FakeDriver
host = $OS_COMPUTE_HOST
my_ip = $OS_IP
transport_url = $rabbit
enabled_apis = osapi_compute
osapi_compute_listen = $OS_IP
osapi_compute_listen_port = 8774
osapi_compute_workers = 1
state_path = $S/nova
instances_path = $S/nova/instances
vif_plugging_is_fatal = false
vif_plugging_timeout = 0
[api]
auth_strategy = keystone
[api_database]
connection = $(db nova_api)
[database]
connection = $(db nova)
[wsgi]
api_paste_config = /etc/nova/api-paste.ini
$(authtoken nova)
$(service_auth placement placement)
$(service_auth neutron neutron)
[glance]
valid_interfaces = public
region_name = $OS_REGION
[conductor]
workers = 1
[scheduler]
workers = 1
discover_hosts_in_cells_interval = -1
[vnc]
enabled = false
[oslo_concurrency]
lock_path = $S/lock
[oslo_messaging_notifications]
driver = noop
CONF
}
