#!/usr/bin/env bash
# Starts the OpenStack lane: a real OpenStack Zed (Debian 12's packages:
# Keystone, Glance, Placement, Neutron ML2 with the Linux bridge agent,
# Nova with the fake virt driver, MariaDB, RabbitMQ) in network namespace
# $OS_NETNS, on an address that exists only there, with its configuration,
# databases, keys, images and logs under $OS_STATE (hack/openstack/env.sh).
# Nothing in /etc or /var/lib is used but the packages' read-only files.
#
#   hack/openstack/up.sh     # as root; idempotent: with the cloud up it
#                            # checks it and changes nothing
#   hack/openstack/down.sh   # stops it all, removes the namespace
#   hack/openstack/run.sh CMD...  # up, CMD in the namespace, down
#
# Then: source $OS_STATE/env; ip netns exec $OS_NETNS openstack --os-cloud
# egress-member server list. Recipe, choices and measurements:
# docs/testing.md, "The OpenStack lane".
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/env.sh"
. "$here/procs.sh"
. "$here/config.sh"
log() { echo "openstack-up: $*" >&2; }
now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1fs", b - a }'; }
t0=$(now)
PY=/usr/bin/python3 # Debian's, with openstacksdk (not a pyenv shim's)

[ "$(id -u)" -eq 0 ] || { log "must run as root (packages, network namespace)"; exit 1; }

# 1. Packages (hack/packages.sh), no service started (apt-ensure.sh's
# policy-rc.d), and no database configured by dbconfig-common at install
# time (its preseed_openstack).
"$here/../apt-ensure.sh" @openstack
mkdir -p "$OS_STATE"

# One up at a time per state directory.
exec 9>"$OS_STATE.lock"
flock -w 900 9 || { log "another up.sh holds $OS_STATE.lock"; exit 1; }

# 2. Already up: every service runs and the member can get a token.
all_running() { local s; for s in $OS_SERVICES; do running "$s" || return 1; done; }
if [ -f "$OS_STATE/env" ] && os_netns_exists && all_running &&
  in_os env OS_CLIENT_CONFIG_FILE="$OS_STATE/clouds.yaml" openstack --os-cloud egress-member token issue -f value -c id >/dev/null 2>&1; then
  log "already up ($(secs "$t0" "$(now)")); source $OS_STATE/env"
  exit 0
fi

# 3. The namespace: its loopback up, the services' address on it.
# A namespace name that outlived its namespace (a machine restarted
# where /run is not a tmpfs) cannot be entered; it goes, and comes back.
if os_netns_exists && ! ip -n "$OS_NETNS" link show lo >/dev/null 2>&1; then
  ip netns delete "$OS_NETNS"
fi
if ! os_netns_exists; then
  ip netns add "$OS_NETNS"
fi
ip -n "$OS_NETNS" link set lo up
# "replace" adds the address or keeps it: a namespace left by a killed run
# has it already. (A test of `addr show | grep -q` cannot stand in for
# this under pipefail: grep quits at the match, ip's next write gets
# SIGPIPE, and the pipeline fails although the address is there.)
ip -n "$OS_NETNS" addr replace "$OS_IP/32" dev lo
# A bridge, never used for traffic: the Linux bridge agent names itself
# after the MAC of the first interface with one (get_agent_id in
# neutron/plugins/ml2/drivers/linuxbridge/agent/linuxbridge_neutron_agent.py)
# and exits when there is none; the namespace's loopback has none.
ip -n "$OS_NETNS" link show "$OS_AGENT_BRIDGE" >/dev/null 2>&1 || ip -n "$OS_NETNS" link add "$OS_AGENT_BRIDGE" type bridge

write_configs
S=$OS_STATE
done_mark() { [ -f "$S/done/$1" ]; }
mark() { mkdir -p "$S/done"; touch "$S/done/$1"; }
step() { log "$* ($(secs "$t0" "$(now)"))"; }
# quiet CMD...: the set-up tools' chatter goes to $S/logs/setup.log,
# shown when one fails.
quiet() { "$@" >>"$S/logs/setup.log" 2>&1 || { tail -n 30 "$S/logs/setup.log" >&2; return 1; }; }

# 4. MariaDB and RabbitMQ.
if [ ! -d "$S/mysql/mysql" ]; then
  quiet mariadb-install-db --defaults-file="$E/mysql/my.cnf" --auth-root-authentication-method=socket
fi
start mariadb mariadbd --defaults-file="$E/mysql/my.cnf"
wait_for mariadb 60 port_open 3306
sql() { mariadb --defaults-file="$E/mysql/my.cnf" -uroot "$@"; }
if ! done_mark databases; then
  for d in keystone glance placement neutron nova_api nova nova_cell0; do
    u=${d%%_*}
    sql -e "CREATE DATABASE IF NOT EXISTS $d; CREATE USER IF NOT EXISTS '$u'@'%' IDENTIFIED BY '$OS_PASSWORD'; GRANT ALL ON $d.* TO '$u'@'%';"
  done
  mark databases
fi

rabbit_env=(env HOME="$S/rabbitmq" RABBITMQ_NODENAME=rabbit@localhost RABBITMQ_NODE_IP_ADDRESS="$OS_IP"
  RABBITMQ_NODE_PORT=5672 RABBITMQ_DIST_PORT=25672 ERL_EPMD_ADDRESS=127.0.0.1 ERL_EPMD_PORT=4369
  RABBITMQ_CONFIG_FILE="$E/rabbitmq/rabbitmq.conf" RABBITMQ_ENABLED_PLUGINS_FILE="$E/rabbitmq/enabled_plugins"
  RABBITMQ_CONF_ENV_FILE=/dev/null RABBITMQ_MNESIA_BASE="$S/rabbitmq/mnesia" RABBITMQ_LOG_BASE="$S/logs"
  RABBITMQ_PID_FILE="$S/run/rabbitmq-beam.pid" RABBITMQ_LOGS="$S/logs/rabbitmq.log")
start rabbitmq "${rabbit_env[@]}" /usr/lib/rabbitmq/bin/rabbitmq-server
step "MariaDB up; database schemas"

# 5. Schemas, each once (marks in $S/done).
km() { in_os keystone-manage --config-file "$E/keystone/keystone.conf" "$@"; }
done_mark db-keystone || { quiet km db_sync; mark db-keystone; }
if ! done_mark keystone-keys; then
  quiet km fernet_setup --keystone-user root --keystone-group root
  quiet km credential_setup --keystone-user root --keystone-group root
  mark keystone-keys
fi
if ! done_mark keystone-bootstrap; then
  quiet km bootstrap --bootstrap-password "$OS_PASSWORD" \
    --bootstrap-admin-url "http://$OS_IP:5000/v3" --bootstrap-public-url "http://$OS_IP:5000/v3" \
    --bootstrap-internal-url "http://$OS_IP:5000/v3" --bootstrap-region-id "$OS_REGION"
  mark keystone-bootstrap
fi
# The wsgi apps under uwsgi: one process, a few threads, on the namespace
# address. The config dir variables are what their wsgi modules read.
# uwsgi's plain http-socket closes the connection after each answer
# without saying so; a client that reused it (keystoneauth's session does:
# GET /v3, then POST /v3/auth/tokens) read "Connection reset by peer".
# "Connection: close" tells clients not to reuse it.
uwsgi_app() { # NAME PORT WSGI-FILE ENV=VALUE
  start "$1" uwsgi --plugins python3 --master --die-on-term --enable-threads --lazy-apps \
    --processes 1 --threads 4 --buffer-size 65535 --http-socket "$OS_IP:$2" --wsgi-file "$3" --env "$4" \
    --add-header "Connection: close"
}
uwsgi_app keystone 5000 /usr/bin/keystone-wsgi-public OS_KEYSTONE_CONFIG_DIR="$E/keystone"

done_mark db-placement || { quiet in_os placement-manage --config-file "$E/placement/placement.conf" db sync; mark db-placement; }
done_mark db-glance || { quiet in_os glance-manage --config-file "$E/glance/glance-api.conf" db_sync; mark db-glance; }
done_mark db-neutron || { quiet in_os neutron-db-manage --config-file "$E/neutron/neutron.conf" --config-file "$E/neutron/ml2_conf.ini" upgrade heads; mark db-neutron; }
nm() { in_os nova-manage --config-file "$E/nova/nova.conf" "$@"; }
if ! done_mark db-nova; then
  quiet nm api_db sync
  quiet nm cell_v2 map_cell0
  grep -q " cell1 " <<<"$(nm cell_v2 list_cells 2>/dev/null)" || quiet nm cell_v2 create_cell --name cell1
  quiet nm db sync
  mark db-nova
fi
step "schemas done"

# clouds.yaml: the admin and the member-only user.
cat > "$S/clouds.yaml" <<YAML
clouds:
  egress-admin:
    auth:
      auth_url: http://$OS_IP:5000/v3
      username: admin
      password: $OS_PASSWORD
      project_name: admin
      user_domain_name: Default
      project_domain_name: Default
    region_name: $OS_REGION
    interface: public
    identity_api_version: 3
  egress-member:
    auth:
      auth_url: http://$OS_IP:5000/v3
      username: $OS_MEMBER_USER
      password: $OS_PASSWORD
      project_name: $OS_PROJECT
      user_domain_name: Default
      project_domain_name: Default
    region_name: $OS_REGION
    interface: public
    identity_api_version: 3
YAML
export OS_CLIENT_CONFIG_FILE=$S/clouds.yaml OS_IP OS_REGION OS_PASSWORD OS_PROJECT OS_MEMBER_USER \
  OS_FLAVOR OS_IMAGE OS_NETWORK OS_SUBNET_CIDR OS_EXTERNAL_NETWORK OS_EXTERNAL_CIDR
wait_for keystone 120 http_ok "http://$OS_IP:5000/v3"
in_os "$PY" "$here/bootstrap.py" identity
step "Keystone up and bootstrapped"

# 6. The other services.
uwsgi_app placement 8778 /usr/bin/placement-api OS_PLACEMENT_CONFIG_DIR="$E/placement"
start glance-api glance-api --config-file "$E/glance/glance-api.conf"
start neutron-server neutron-server --config-file "$E/neutron/neutron.conf" --config-file "$E/neutron/ml2_conf.ini" \
  --log-file "$S/logs/neutron-server.log"
start neutron-linuxbridge-agent neutron-linuxbridge-agent --config-file "$E/neutron/neutron.conf" \
  --config-file "$E/neutron/linuxbridge_agent.ini" --log-file "$S/logs/neutron-linuxbridge-agent.log"
wait_for rabbitmq 120 port_open 5672
for s in api conductor scheduler compute; do
  start "nova-$s" "nova-$s" --config-file "$E/nova/nova.conf" --log-file "$S/logs/nova-$s.log"
done
wait_for placement 120 http_ok "http://$OS_IP:8778/"
wait_for glance-api 120 http_ok "http://$OS_IP:9292/"
wait_for neutron-server 180 http_ok "http://$OS_IP:9696/"
wait_for nova-api 180 http_ok "http://$OS_IP:8774/"
step "APIs answer"

# 7. The compute host in cell1 (it registers itself in the cell's
# database and in Placement; the API learns it by discovery).
host_mapped() { grep -q " $OS_COMPUTE_HOST " <<<"$(nm cell_v2 list_hosts 2>/dev/null)"; }
if ! host_mapped; then
  wait_for nova-compute 180 in_os sh -c "nova-manage --config-file '$E/nova/nova.conf' cell_v2 discover_hosts --strict >/dev/null 2>&1 || nova-manage --config-file '$E/nova/nova.conf' cell_v2 list_hosts | grep -q ' $OS_COMPUTE_HOST '"
fi
step "compute host mapped"

# 8. Flavor, image, network, quotas.
img=$S/egress-tiny.qcow2
[ -f "$img" ] || qemu-img create -q -f qcow2 "$img" 64M
out=$(in_os env OS_IMAGE_FILE="$img" "$PY" "$here/bootstrap.py" resources)
net_id=$(echo "$out" | sed -n 's/^NETWORK_ID=//p')
[ -n "$net_id" ] || { log "no network ID from bootstrap.py: $out"; exit 1; }
ext_id=$(echo "$out" | sed -n 's/^EXTERNAL_NETWORK_ID=//p')
[ -n "$ext_id" ] || { log "no external network ID from bootstrap.py: $out"; exit 1; }

cat > "$S/env" <<ENV
# Written by hack/openstack/up.sh: the lane's cloud. Clients run inside
# the namespace: ip netns exec $OS_NETNS CMD.
export OS_NETNS=$OS_NETNS
export OS_STATE=$S
export OS_CLIENT_CONFIG_FILE=$S/clouds.yaml
export OPENSTACK_TEST_CLOUDS_FILE=$S/clouds.yaml
export OPENSTACK_TEST_CLOUD=egress-member
export OPENSTACK_ADMIN_CLOUD=egress-admin
export OPENSTACK_TEST_REGION=$OS_REGION
export OPENSTACK_TEST_ZONE=$OS_ZONE
export OPENSTACK_TEST_NETWORK=$net_id
export OPENSTACK_TEST_EXTERNAL_NETWORK=$ext_id
export OPENSTACK_TEST_FLAVOR=$OS_FLAVOR
export OPENSTACK_TEST_IMAGE=$OS_IMAGE
ENV
log "up in $(secs "$t0" "$(now)"); source $S/env"
