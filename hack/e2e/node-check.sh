#!/usr/bin/env bash
# Proves the node hack/e2e/node-up.sh started serves Pods the way the
# operator's Pod needs: a Pod (node/probe, from an image built here)
# resolves kubernetes.default.svc.cluster.local through CoreDNS, reaches
# the apiserver through the kubernetes Service with its service account,
# and reaches a server on the node's address — and, when the lane's VM
# network is up, a host on that network — which sees the Pod's own
# address. Exits non-zero, with the Pod's output, if any of it fails.
#
# The host on the VM network stands in for a proxy VM in this check only
# (the lane's driver uses real VMs): a network namespace with one veth on
# the VM bridge, at an address outside libvirt's DHCP range.
set -euo pipefail
. "$(dirname "$0")/node/ns.sh"
log() { echo "node-check: $*" >&2; }
KUBECTL=$("$here/../control-plane.sh" node)/kubectl
. "$("$here/node/images.sh")/refs"
port=18080
vm_ns=$E2E_NETNS-vm
vm_ip=192.168.150.2
work=$(mktemp -d)
probe_bin=$work/probe
(cd "$here/node/probe" && GOWORK=off CGO_ENABLED=0 go build -trimpath -o "$probe_bin" ./*.go)

pids=()
cleanup() {
  kc delete pod node-probe --ignore-not-found --wait=false > /dev/null 2>&1
  kc delete serviceaccount node-probe --ignore-not-found > /dev/null 2>&1
  [ ${#pids[@]} -gt 0 ] && kill "${pids[@]}" 2>/dev/null
  ip netns list | awk -v ns="$vm_ns" '$1 == ns { found = 1 } END { exit !found }' && ip netns del "$vm_ns"
  rm -rf "$work"
}
trap cleanup EXIT

# nsenter, not in_net: $! must be the server, not a subshell.
nsenter --net="/run/netns/$E2E_NETNS" "$probe_bin" serve "$E2E_NODE_IP:$port" &
pids+=($!)
urls=("http://$E2E_NODE_IP:$port/")
if ip -n "$E2E_NETNS" link show "$E2E_BRIDGE" > /dev/null 2>&1; then
  ip netns add "$vm_ns"
  ip -n "$E2E_NETNS" link add e2e-vm-standin type veth peer name eth0 netns "$vm_ns"
  ip -n "$E2E_NETNS" link set e2e-vm-standin master "$E2E_BRIDGE" up
  ip -n "$vm_ns" addr add "$vm_ip/24" dev eth0
  ip -n "$vm_ns" link set eth0 up
  ip -n "$vm_ns" link set lo up
  ip -n "$vm_ns" route add default via "$E2E_HOST_IP"
  nsenter --net="/run/netns/$vm_ns" "$probe_bin" serve "$vm_ip:$port" &
  pids+=($!)
  urls+=("http://$vm_ip:$port/")
fi

kc create serviceaccount node-probe > /dev/null
kc apply -f - > /dev/null <<EOF
apiVersion: v1
kind: Pod
metadata:
  name: node-probe
spec:
  serviceAccountName: node-probe
  restartPolicy: Never
  containers:
  - name: probe
    image: $PROBE_IMAGE
    imagePullPolicy: Never
    args: [check$(printf ', "%s"' "${urls[@]}")]
    env:
    - {name: API_SERVICE_IP, value: "$E2E_API_SERVICE_IP"}
    - name: POD_IP
      valueFrom: {fieldRef: {fieldPath: status.podIP}}
    securityContext:
      runAsNonRoot: true
      allowPrivilegeEscalation: false
      capabilities: {drop: [ALL]}
EOF
phase=""
for ((i = 0; i < 240; i++)); do
  phase=$(kc get pod node-probe -o jsonpath='{.status.phase}' 2>/dev/null || true)
  case $phase in Succeeded | Failed) break ;; esac
  sleep 0.5
done
kc logs node-probe 2>&1 | sed 's/^/node-check: pod: /' >&2 || true
if [ "$phase" != Succeeded ]; then
  log "the probe Pod ended $phase"
  kc describe pod node-probe >&2 || true
  exit 1
fi
log "ok: DNS, the apiserver through its Service, and ${#urls[@]} routed address(es) from a Pod"
