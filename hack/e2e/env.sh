# Shared settings of the end-to-end lane (sourced, not run). Everything
# the lane makes lives in one network namespace and one state directory.
E2E_NETNS=${E2E_NETNS:-egress-e2e}
E2E_STATE=${E2E_STATE:-/tmp/egress-e2e}
# The NAT network that exists only inside the namespace.
E2E_NET=e2e
E2E_BRIDGE=vmlabbr0
E2E_HOST_IP=192.168.150.1
E2E_SUBNET=192.168.150.0/24
# An address on the bridge outside the Proxy's allowed clients: the
# client the proxy must refuse. The VM answers it through its default
# route, which is the bridge address.
E2E_OUTSIDE_IP=192.168.151.1
E2E_POOL=e2e
# The private daemon's socket: clients in any namespace reach it by path.
E2E_URI="qemu:///system?socket=$E2E_STATE/lv/run/libvirt-sock"
