#!/usr/bin/env bash
# Writes the node's configuration files into its state directory:
# containerd's, the CNI network's, the kubelet's, kube-proxy's and the
# CoreDNS manifests. Every path the components write to is under it; the
# settings that cgroup v1 and this sandbox need are explained where set
# (and in docs/testing.md).
#   hack/e2e/node/config.sh IMAGES_DIR   # the directory node/images.sh printed
set -euo pipefail
images=$1
. "$(dirname "$0")/ns.sh"
. "$images/refs"

mkdir -p "$S"/{containerd,cni/net.d,cni/ipam,kubelet/root,kubelet/volume-plugins}

# containerd 1.6 (Debian 12). Pod network namespaces are kept under its
# state directory, not in /run/netns where `ip netns` would list them.
# Unprivileged ports and ping in Pods are what containerd 2 does by
# default; CoreDNS binds port 53 as a non-root user thanks to it.
# restrict_oom_score_adj: the kubelet gives sandboxes an OOM score
# adjustment of -998, and lowering one needs CAP_SYS_RESOURCE, which this
# sandbox's root lacks (runc: "failed to update /proc/self/oom_score_adj:
# Permission denied"); containerd raises it to its own (0) instead.
cat > "$S/containerd/config.toml" <<EOF
version = 2
root = "$S/containerd/root"
state = "$S/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs", "io.containerd.tracing.processor.v1.otlp"]
[grpc]
  address = "$S/containerd/containerd.sock"
[plugins."io.containerd.internal.v1.opt"]
  path = "$S/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  netns_mounts_under_state_dir = true
  enable_unprivileged_ports = true
  enable_unprivileged_icmp = true
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "$S/containerd/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$S/cni/net.d"
EOF

# One bridge, addresses from host-local, the node as the Pods' gateway.
# No masquerading: Pod addresses are routed, as in a datacenter, so a
# proxy VM sees the Pod's own address.
cat > "$S/cni/net.d/10-egress-e2e.conflist" <<EOF
{
  "cniVersion": "0.4.0",
  "name": "egress-e2e",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "cni0",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "$S/cni/ipam",
        "ranges": [[{ "subnet": "$E2E_POD_CIDR" }]],
        "routes": [{ "dst": "0.0.0.0/0" }]
      }
    }
  ]
}
EOF

cat > "$S/kubelet/config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
containerRuntimeEndpoint: unix://$S/containerd/containerd.sock
# cgroup v1: refused by default since Kubernetes 1.35.
failCgroupV1: false
# No systemd runs here, so the cgroupfs driver (containerd's runc too);
# every Pod under the lane's own cgroup.
cgroupDriver: cgroupfs
cgroupRoot: $E2E_CGROUP_ROOT
# A machine with swap must not stop the node; Pods get none (the only
# behaviour cgroup v1 supports).
failSwapOn: false
memorySwap: {swapBehavior: NoSwap}
address: $E2E_NODE_IP
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
tlsCertFile: $pki/kubelet-serving.crt
tlsPrivateKeyFile: $pki/kubelet-serving.key
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $pki/ca.crt}
authorization: {mode: Webhook}
clusterDomain: cluster.local
clusterDNS: [$E2E_DNS_IP]
# The namespace has no upstream name server: Pods with dnsPolicy Default
# get an empty resolv.conf, the others CoreDNS.
resolvConf: ""
volumePluginDir: $S/kubelet/volume-plugins
# The machine's disk is shared with other jobs: percentages of it say
# nothing about the lane, and an eviction or an image collection (the
# images cannot be pulled again) would break it. Absolute floors, image
# garbage collection off.
# The kubelet's own OOM score adjustment (-999 by default) cannot be set
# without CAP_SYS_RESOURCE either; 0 says so instead of logging a failure.
oomScoreAdj: 0
evictionHard: {memory.available: 100Mi, nodefs.available: 1Gi, imagefs.available: 1Gi}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
EOF

cat > "$S/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: $pki/kube-proxy.kubeconfig}
mode: iptables
hostnameOverride: $E2E_NODE_NAME
clusterCIDR: $E2E_POD_CIDR
bindAddress: $E2E_NODE_IP
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
# The conntrack table's size and timeouts are the machine's (only the
# initial network namespace may set them): zero leaves them as they are.
oomScoreAdj: 0
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
EOF

sed -e "s|@COREDNS_IMAGE@|$COREDNS_IMAGE|" -e "s|@DNS_IP@|$E2E_DNS_IP|" \
  "$(dirname "$0")/coredns.yaml" > "$S/coredns.yaml"
