# Shared settings of the OpenStack lane (sourced, not run): a real
# OpenStack (Debian 12's Zed packages) in a network namespace of its own,
# with everything it writes under one state directory.
OS_NETNS=${OS_NETNS:-egress-os}
OS_STATE=${OS_STATE:-/tmp/egress-os}
# The services' address: on the namespace's loopback device, so it exists
# only inside the namespace (these kernels have no dummy interface driver;
# hack/e2e/env.sh does the same for the node address). Clients run with
# `ip netns exec "$OS_NETNS" …`.
OS_IP=${OS_IP:-10.20.0.1}
OS_REGION=RegionOne
OS_ZONE=nova
# The one compute host: nova-compute's and the Linux bridge agent's
# CONF.host, so the agent's liveness lets ML2 bind the host's ports.
OS_COMPUTE_HOST=egress-os-compute
# The bridge that gives the agent its ID (up.sh says why).
OS_AGENT_BRIDGE=egressosbr0
# What up.sh creates for the tests.
OS_PROJECT=egress
OS_MEMBER_USER=egress-member
OS_FLAVOR=egress-small
OS_IMAGE=egress-tiny
OS_NETWORK=egress-net
OS_SUBNET_CIDR=192.168.77.0/24
# The external network floating IPs come from (TEST-NET-3, RFC 5737:
# never routed; no packet leaves the namespace, no L3 agent runs).
OS_EXTERNAL_NETWORK=egress-external
OS_EXTERNAL_CIDR=203.0.113.0/24
# One password for every account: nothing here is reachable from outside
# the namespace, and the clouds.yaml that carries it is the tests' input.
OS_PASSWORD=${OS_PASSWORD:-egress-os-secret}

os_netns_exists() { ip netns list | awk -v ns="$OS_NETNS" '$1 == ns { found = 1 } END { exit !found }'; }
# in_os CMD...: CMD in the lane's network namespace.
in_os() { ip netns exec "$OS_NETNS" "$@"; }
