# Helpers of node-up.sh and node-down.sh (sourced, not run): where the
# node's state lives and how to run something inside the node.
#
# The node's processes run in the lane's network namespace and in a mount
# namespace of the node's own, entered with nsenter — not ip netns exec,
# which gives each command a new mount namespace and remounts /sys there,
# hiding /sys/fs/cgroup, which the kubelet and runc need. The node's mount
# namespace keeps the host's /sys (cgroups visible) and is where the
# container runtime and the kubelet mount what they mount: overlay root
# file systems, Pod network namespaces, Secret volumes. None of it
# propagates to the root mount namespace (the node's is a slave of it), and
# all of it goes with the namespace. It is kept open by a bind mount of
# its nsfs file, the way ip netns keeps a network namespace.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
. "$here/env.sh"
S=$E2E_NODE_STATE
pki=$S/pki
mntns=$S/ns/mnt

# in_node CMD...: CMD in the node's network and mount namespaces.
in_node() { nsenter --net="/run/netns/$E2E_NETNS" --mount="$mntns" -- "$@"; }
# in_net CMD...: CMD in the lane's network namespace only (clients).
in_net() { nsenter --net="/run/netns/$E2E_NETNS" -- "$@"; }
# kc ARGS...: the lane's kubectl, as the cluster's admin.
# Its discovery cache in the state directory, not in ~/.kube.
kc() { in_net "$KUBECTL" --kubeconfig="$E2E_KUBECONFIG" --cache-dir="$S/kubectl-cache" "$@"; }

netns_exists() { ip netns list | awk -v ns="$E2E_NETNS" '$1 == ns { found = 1 } END { exit !found }'; }

# running <pid>: the process exists and is not a zombie.
running() {
  local state
  state=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1) || return 1
  [ -n "$state" ] && [ "$state" != Z ]
}

# cgroup_dirs: the node's cgroup (E2E_CGROUP_ROOT) in every cgroup v1
# hierarchy and in the cgroup2 one, whether or not it exists.
cgroup_dirs() {
  findmnt -rn -t cgroup,cgroup2 -o TARGET | while read -r m; do
    echo "$m$E2E_CGROUP_ROOT"
  done
}
