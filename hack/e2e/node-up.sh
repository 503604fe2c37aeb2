#!/usr/bin/env bash
# Starts a real single-node Kubernetes cluster inside the lane's network
# namespace: etcd, kube-apiserver, kube-controller-manager, kube-scheduler
# and kube-proxy built from source (hack/control-plane.sh node), containerd,
# runc and the CNI plugins from Debian, the kubelet on cgroup v1 with the
# cgroupfs driver, and CoreDNS as a Deployment from an image built here.
# Returns when the node is Ready and CoreDNS answers; hack/e2e/node-check.sh
# proves a Pod can use the cluster.
#
#   hack/e2e/node-up.sh     # E2E_NETNS, E2E_STATE as in hack/e2e/env.sh;
#   hack/e2e/node-down.sh   # the namespace is made here if the lane has
#                           # none yet (and then deleted by node-down.sh)
#
# Run it after libvirt-up.sh when both are wanted: the pods' route to the
# VM network is inserted above the FORWARD rules libvirt adds at start.
# Everything lives in $E2E_STATE/node, the lane's namespaces and the
# cgroup $E2E_CGROUP_ROOT; docs/testing.md lists the settings and why.
set -euo pipefail
. "$(dirname "$0")/node/ns.sh"
log() { echo "node-up: $*" >&2; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1fs", b - a }'; }

[ "$(id -u)" -eq 0 ] || { log "must run as root (namespaces, mounts, cgroups)"; exit 1; }
[ -e "$mntns" ] && { log "$S exists: run hack/e2e/node-down.sh first"; exit 1; }
trap 'log "failed; the components log to $S/log; hack/e2e/node-down.sh undoes what started"' ERR

hack=$(cd "$here/.." && pwd)
"$hack/apt-ensure.sh" @node
t=$(now)
bin=$("$hack/control-plane.sh" node)
images=$("$here/node/images.sh")
log "binaries $bin, images $images ($(since "$t"))"
KUBECTL=$bin/kubectl
start_all=$(now)

mkdir -p "$S"/{log,run,ns}
# The namespace: the lane's, or one of the node's own (node-down.sh
# deletes only that one).
if ! netns_exists; then
  ip netns add "$E2E_NETNS"
  ip -n "$E2E_NETNS" link set lo up
  touch "$S/own-netns"
fi
ip -n "$E2E_NETNS" addr add "$E2E_NODE_IP/32" dev lo
# Routing between Pods and the VM network; bridged Pod traffic passes
# iptables so a Service answer between two Pods on the bridge is un-NATed
# (kube-proxy's requirement). Both are per network namespace.
in_net sysctl -q -w net.ipv4.ip_forward=1 net.bridge.bridge-nf-call-iptables=1

# The node's mount namespace (node/ns.sh says why), held open by a bind
# mount of its nsfs file on a private mount.
mount --bind "$S/ns" "$S/ns"
mount --make-private "$S/ns"
touch "$mntns"
unshare --mount="$mntns" --propagation slave true

# Inside it, the fixed paths the runtime and the kubelet write to are
# directories of the state dir: shim sockets and runc state
# (/run/containerd), the CNI result cache (/var/lib/cni), container logs
# (/var/log/pods, /var/log/containers), the kubelet's device-plugin socket
# (/var/lib/kubelet/device-plugins, whatever its --root-dir). A mount point
# the machine lacks is made and recorded, for node-down.sh to remove.
for d in /run/containerd /var/lib/cni /var/lib/kubelet; do
  [ -d "$d" ] || { mkdir -p "$d"; echo "$d" >> "$S/made-dirs"; }
done
mkdir -p "$S"/{run-containerd,cni-cache,var-log,var-lib-kubelet}
# The kubelet sets six machine-wide kernel settings at start
# (vm.overcommit_memory, kernel.panic, …; it refuses to start instead with
# protectKernelDefaults). Those belong to the machine, not to the lane: the
# node's mount namespace shows the kubelet files with the values it wants,
# so it finds nothing to change.
mkdir -p "$S/sysctl"
kernel_tunables="vm/overcommit_memory=1 vm/panic_on_oom=0 kernel/panic=10 kernel/panic_on_oops=1 kernel/keys/root_maxkeys=1000000 kernel/keys/root_maxbytes=25000000"
for kv in $kernel_tunables; do
  echo "${kv#*=}" > "$S/sysctl/$(echo "${kv%=*}" | tr / .)"
done
in_node sh -euc '
  S=$1; shift
  mount --bind "$S/run-containerd" /run/containerd
  mount --bind "$S/cni-cache" /var/lib/cni
  mount --bind "$S/var-log" /var/log
  mount --bind "$S/var-lib-kubelet" /var/lib/kubelet
  for kv in "$@"; do
    k=${kv%=*}
    mount --bind -o ro "$S/sysctl/$(echo "$k" | tr / .)" "/proc/sys/$k"
  done
' sh "$S" $kernel_tunables

# The node's cgroup, in every hierarchy; cpuset needs its CPUs and memory
# nodes before anything can join it.
for d in $(cgroup_dirs); do mkdir -p "$d"; done
if [ -d /sys/fs/cgroup/cpuset ]; then
  for f in cpuset.cpus cpuset.mems; do
    cat "/sys/fs/cgroup/cpuset/$f" > "/sys/fs/cgroup/cpuset$E2E_CGROUP_ROOT/$f"
  done
fi

"$here/node/certs.sh" "$pki" "$E2E_NODE_NAME" "$E2E_NODE_IP" "$E2E_API_SERVICE_IP"
"$here/node/config.sh" "$images"

# start NAME CMD...: a daemon in the node, its pid in run/NAME.pid, its
# output in log/NAME.log. nsenter and setsid exec, so $! is the daemon
# (in_node would not do: a shell function sent to the background is a
# subshell of its own).
start() {
  local name=$1; shift
  nsenter --net="/run/netns/$E2E_NETNS" --mount="$mntns" -- setsid "$@" > "$S/log/$name.log" 2>&1 < /dev/null &
  echo $! > "$S/run/$name.pid"
}
# wait_for WHAT SECONDS CMD...: polls CMD every half second.
wait_for() {
  local what=$1 secs=$2; shift 2
  local i
  for ((i = 0; i < secs * 2; i++)); do
    "$@" > /dev/null 2>&1 && return 0
    sleep 0.5
  done
  log "$what not ready after ${secs}s"; return 1
}

start etcd "$bin/etcd" --name node --data-dir "$S/etcd" --unsafe-no-fsync \
  --listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
  --listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
  --initial-cluster node=http://127.0.0.1:2380 --listen-metrics-urls ''
start kube-apiserver "$bin/kube-apiserver" \
  --advertise-address "$E2E_NODE_IP" --secure-port 6443 \
  --etcd-servers http://127.0.0.1:2379 \
  --service-cluster-ip-range "$E2E_SERVICE_CIDR" \
  --enable-aggregator-routing \
  --authorization-mode Node,RBAC --enable-admission-plugins NodeRestriction \
  --allow-privileged \
  --client-ca-file "$pki/ca.crt" \
  --tls-cert-file "$pki/apiserver.crt" --tls-private-key-file "$pki/apiserver.key" \
  --kubelet-client-certificate "$pki/apiserver-kubelet-client.crt" \
  --kubelet-client-key "$pki/apiserver-kubelet-client.key" \
  --kubelet-certificate-authority "$pki/ca.crt" --kubelet-preferred-address-types InternalIP \
  --service-account-issuer https://kubernetes.default.svc.cluster.local \
  --service-account-key-file "$pki/sa.pub" --service-account-signing-key-file "$pki/sa.key"
wait_for kube-apiserver 120 kc get --raw /readyz
log "kube-apiserver ready ($(since "$start_all"))"
# The apiserver's client certificate may use the kubelet's API (logs,
# exec, port-forward), as kubeadm grants it.
kc create clusterrolebinding egress-e2e:apiserver-kubelet-client \
  --clusterrole system:kubelet-api-admin --user kube-apiserver-kubelet-client > /dev/null

start kube-controller-manager "$bin/kube-controller-manager" \
  --kubeconfig "$pki/kube-controller-manager.kubeconfig" \
  --authentication-kubeconfig "$pki/kube-controller-manager.kubeconfig" \
  --authorization-kubeconfig "$pki/kube-controller-manager.kubeconfig" \
  --bind-address 127.0.0.1 --leader-elect=false --use-service-account-credentials \
  --service-account-private-key-file "$pki/sa.key" --root-ca-file "$pki/ca.crt" \
  --service-cluster-ip-range "$E2E_SERVICE_CIDR" --flex-volume-plugin-dir "$S/kcm-volume-plugins"
start kube-scheduler "$bin/kube-scheduler" \
  --kubeconfig "$pki/kube-scheduler.kubeconfig" \
  --authentication-kubeconfig "$pki/kube-scheduler.kubeconfig" \
  --authorization-kubeconfig "$pki/kube-scheduler.kubeconfig" \
  --bind-address 127.0.0.1 --leader-elect=false

start containerd containerd --config "$S/containerd/config.toml"
ctrd() { in_node ctr --address "$S/containerd/containerd.sock" "$@"; }
wait_for containerd 30 ctrd version
# The CRI plugin sees images in containerd's k8s.io namespace. No
# registry is reachable: the node's own images, and those the lane built
# (E2E_NODE_IMAGES, image tarballs: the operator's), are imported as a
# user without a registry imports them (docs/install.md).
for image in "$images"/*.tar ${E2E_NODE_IMAGES:-}; do
  ctrd -n k8s.io images import "$image" > /dev/null
done
log "containerd ready, images imported ($(since "$start_all"))"

start kubelet "$bin/kubelet" --config "$S/kubelet/config.yaml" \
  --kubeconfig "$pki/kubelet.kubeconfig" --root-dir "$S/kubelet/root" \
  --hostname-override "$E2E_NODE_NAME" --node-ip "$E2E_NODE_IP" --v 2
start kube-proxy "$bin/kube-proxy" --config "$S/kube-proxy.yaml"

# The pods' route to the proxy VMs, as a datacenter router would have it:
# libvirt's NAT network accepts only replies into its subnet
# (LIBVIRT_FWI), so connections from the pod network are accepted above
# it. Replies come back through libvirt's LIBVIRT_FWO, which lets out
# anything from the subnet; nothing is masqueraded, so a VM sees the
# pod's own address.
in_net iptables -w -I FORWARD 1 -s "$E2E_POD_CIDR" -d "$E2E_SUBNET" \
  -m comment --comment "egress-e2e: pods to the VM network" -j ACCEPT

wait_for "node $E2E_NODE_NAME" 180 kc wait --for=condition=Ready "node/$E2E_NODE_NAME" --timeout=1s
log "node $E2E_NODE_NAME Ready ($(since "$start_all"))"
echo "node_ready=$(since "$start_all")" >> "$S/timings"

kc apply -f "$S/coredns.yaml" > /dev/null
kc -n kube-system rollout status deployment/coredns --timeout=180s > /dev/null
log "CoreDNS ready ($(since "$start_all")); kubeconfig $E2E_KUBECONFIG"
echo "coredns_ready=$(since "$start_all")" >> "$S/timings"
