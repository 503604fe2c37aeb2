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
# The private daemon's socket: clients in any namespace reach it by path
# (the lane's virsh calls use it).
E2E_URI="qemu:///system?socket=$E2E_STATE/lv/run/libvirt-sock"
# The same daemon as a remote host's (hack/e2e/ssh-up.sh): an sshd on the
# bridge address, a user of its own in the libvirt group, a client key and
# known_hosts for the operator's qemu+libssh2:// URI.
E2E_SSH_USER=egress
E2E_SSH_UID=64100
E2E_SSH_PORT=22
E2E_SSH_KEY=$E2E_STATE/ssh/client_ed25519
E2E_SSH_KNOWN_HOSTS=$E2E_STATE/ssh/known_hosts

# The single-node Kubernetes cluster (hack/e2e/node-up.sh): its state lives
# in $E2E_NODE_STATE, its addresses exist only inside the namespace. The
# node address sits on the namespace's loopback device: these kernels have
# no dummy interface driver (CONFIG_DUMMY is off).
E2E_NODE_STATE=$E2E_STATE/node
E2E_NODE_NAME=${E2E_NODE_NAME:-egress-e2e-node}
E2E_NODE_IP=10.10.0.1
# Pod addresses are routed, not masqueraded: a proxy VM sees the Pod's own.
E2E_POD_CIDR=10.244.0.0/24
E2E_SERVICE_CIDR=10.96.0.0/16
E2E_API_SERVICE_IP=10.96.0.1
E2E_DNS_IP=10.96.0.10
# The cgroup under which the kubelet puts every Pod (in each hierarchy),
# so two lanes or another kubelet on the machine never share one.
E2E_CGROUP_ROOT=/$E2E_NETNS
E2E_KUBECONFIG=$E2E_NODE_STATE/pki/admin.kubeconfig
