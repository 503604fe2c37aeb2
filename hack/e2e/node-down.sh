#!/usr/bin/env bash
# Tears down what hack/e2e/node-up.sh started, also after a failed or
# half-done up, leaving nothing on the machine: the kubelet stopped first
# (it would restart containers), every container process killed through
# the node's cgroup, the control plane and containerd stopped by process
# id, the node's mount namespace released (its overlay, network-namespace
# and volume mounts go with it), the kubelet's cgroups removed, the
# machine directories node-up.sh made removed, the namespace deleted if
# node-up.sh made it, the state directory removed. Idempotent.
# KEEP_STATE=1 keeps $E2E_STATE/node (logs).
set -uo pipefail
. "$(dirname "$0")/node/ns.sh"
log() { echo "node-down: $*" >&2; }

# ours <pid>: the process lives in the lane's network namespace, so a
# stale pid file cannot name someone else's process.
ours() { [ "$(ip netns identify "$1" 2>/dev/null)" = "$E2E_NETNS" ]; }

# stop <pid>...: TERM, then KILL what is still there after 10 s.
stop() {
  [ $# -gt 0 ] || return 0
  kill "$@" 2>/dev/null
  local i p alive
  for ((i = 0; i < 20; i++)); do
    alive=0
    for p in "$@"; do running "$p" && alive=1; done
    [ $alive = 0 ] && return 0
    sleep 0.5
  done
  kill -9 "$@" 2>/dev/null
}

stop_daemon() {
  local pidfile=$S/run/$1.pid pid
  [ -f "$pidfile" ] || return 0
  pid=$(cat "$pidfile")
  if running "$pid" && ours "$pid"; then
    stop "$pid" && log "stopped $1"
  fi
  rm -f "$pidfile"
}

# cgroup_procs: every process in the node's cgroup tree, any hierarchy.
cgroup_procs() {
  local d
  for d in $(cgroup_dirs); do
    [ -d "$d" ] && find "$d" -name cgroup.procs -exec cat {} + 2>/dev/null
  done | sort -u
}

# drop_kube_rules IPTABLES: in the lane's namespace, the rules that jump
# to the chains kube-proxy and the kubelet made (KUBE-*), then the chains.
drop_kube_rules() {
  local ipt=$1 t rule chains
  for t in filter nat mangle; do
    in_net "$ipt" -w -t "$t" -S 2>/dev/null | grep -E '^-A .* -j KUBE-' | sed 's/^-A /-D /' |
      while read -r rule; do eval "in_net $ipt -w -t $t $rule"; done
    chains=$(in_net "$ipt" -w -t "$t" -S 2>/dev/null | awk '$1 == "-N" && $2 ~ /^KUBE-/ { print $2 }')
    for c in $chains; do in_net "$ipt" -w -t "$t" -F "$c"; done
    for c in $chains; do in_net "$ipt" -w -t "$t" -X "$c"; done
  done
}

stop_daemon kubelet
# The containers: no graceful stop is owed to a lane's Pods, and the
# kubelet is gone; their shims (containerd's children) see them exit.
for ((i = 0; i < 20; i++)); do
  mapfile -t procs < <(cgroup_procs)
  [ ${#procs[@]} -eq 0 ] && break
  [ "$i" = 0 ] && log "killing ${#procs[@]} container processes"
  kill -9 "${procs[@]}" 2>/dev/null
  sleep 0.5
done
[ ${#procs[@]} -eq 0 ] || log "container processes still there: ${procs[*]}"
for name in kube-proxy kube-scheduler kube-controller-manager kube-apiserver etcd containerd; do
  stop_daemon "$name"
done

if [ -e "$mntns" ]; then
  # Whatever else entered the node's mount namespace (containerd's shims,
  # a kubectl) was started by the node.
  ino=$(stat -L -c %i "$mntns" 2>/dev/null)
  if [ -n "$ino" ]; then
    mapfile -t left < <(for p in /proc/[0-9]*; do
      [ "$(readlink "$p/ns/mnt" 2>/dev/null)" = "mnt:[$ino]" ] && echo "${p#/proc/}"
    done)
    if [ ${#left[@]} -gt 0 ]; then
      log "stopping what is left in the node's mount namespace: ${left[*]}"
      stop "${left[@]}"
    fi
  fi
  umount "$mntns" 2>/dev/null
fi
mountpoint -q "$S/ns" && umount "$S/ns"

# The kubelet's cgroups (kubepods, its QoS classes, one per Pod), deepest
# first; empty now that nothing runs in them.
for d in $(cgroup_dirs); do
  [ -d "$d" ] && find "$d" -depth -type d -exec rmdir {} + 2>/dev/null
  [ -d "$d" ] && log "cgroup $d is still there"
done

if [ -f "$S/made-dirs" ]; then
  while read -r d; do rmdir "$d" 2>/dev/null; done < "$S/made-dirs"
fi
if netns_exists; then
  if [ -f "$S/own-netns" ]; then
    mapfile -t left < <(ip netns pids "$E2E_NETNS")
    [ ${#left[@]} -gt 0 ] && { log "stopping what is left in $E2E_NETNS: ${left[*]}"; stop "${left[@]}"; }
    ip netns del "$E2E_NETNS" && log "deleted network namespace $E2E_NETNS"
  else
    # The lane's namespace stays for libvirt-down.sh; the node's address,
    # bridge, kube-proxy's rules and the FORWARD rule go.
    ip -n "$E2E_NETNS" addr del "$E2E_NODE_IP/32" dev lo 2>/dev/null
    ip -n "$E2E_NETNS" link del cni0 2>/dev/null
    for ipt in iptables ip6tables; do drop_kube_rules "$ipt"; done
    in_net iptables -w -D FORWARD -s "$E2E_POD_CIDR" -d "$E2E_SUBNET" \
      -m comment --comment "egress-e2e: pods to the VM network" -j ACCEPT 2>/dev/null
  fi
fi
if [ "${KEEP_STATE:-0}" != 1 ]; then
  rm -rf "$S"
  # The lane's state directory, if the node was all it held.
  rmdir "$E2E_STATE" 2>/dev/null
fi
exit 0
