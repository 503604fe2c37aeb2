#!/usr/bin/env bash
# Tears down what hack/e2e/libvirt-up.sh started, also after a failed or
# half-done up: every domain destroyed, the network stopped, the daemons
# and anything else left in the lane's network namespace stopped by
# process id, the namespace deleted, the state directory removed.
# Idempotent. KEEP_STATE=1 keeps the state directory (logs, disks).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/env.sh"
log() { echo "libvirt-down: $*" >&2; }
lv=$E2E_STATE/lv

# running <pid>: the process exists and is not a zombie (a zombie has
# exited; its parent, gone with the lane, would have reaped it).
running() {
  local state
  state=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1) || return 1
  [ -n "$state" ] && [ "$state" != Z ]
}

# stop <pid>...: TERM, then KILL what is still there after 10 s.
stop() {
  [ $# -gt 0 ] || return 0
  kill "$@" 2>/dev/null
  for _ in $(seq 20); do
    local alive=0
    for p in "$@"; do running "$p" && alive=1; done
    [ $alive = 0 ] && return 0
    sleep 0.5
  done
  kill -9 "$@" 2>/dev/null
}

if [ -S "$lv/run/libvirt-sock" ] && timeout 10 virsh -q -c "$E2E_URI" version >/dev/null 2>&1; then
  for d in $(virsh -q -c "$E2E_URI" list --name 2>/dev/null); do
    timeout 30 virsh -q -c "$E2E_URI" destroy "$d" >/dev/null 2>&1 && log "destroyed domain $d"
  done
  timeout 30 virsh -q -c "$E2E_URI" net-destroy "$E2E_NET" >/dev/null 2>&1
fi
for pidfile in "$E2E_STATE/ssh/sshd.pid" "$lv/run/libvirtd.pid" "$lv/run/virtlogd.pid"; do
  name=$(basename "$pidfile" .pid)
  [ -f "$pidfile" ] || continue
  pid=$(cat "$pidfile")
  # A stale pid file may name someone else's process by now: only one in
  # the lane's namespace is the lane's.
  if [ "$(ip netns identify "$pid" 2>/dev/null)" = "$E2E_NETNS" ]; then
    stop "$pid" && log "stopped $name"
  fi
done
if ip netns list | awk -v ns="$E2E_NETNS" '$1 == ns { found = 1 } END { exit !found }'; then
  # What is left (a QEMU or dnsmasq of a daemon that died first, a
  # process of the lane's own) was started by the lane.
  mapfile -t left < <(ip netns pids "$E2E_NETNS")
  if [ ${#left[@]} -gt 0 ]; then
    log "stopping what is left in $E2E_NETNS: ${left[*]}"
    stop "${left[@]}"
  fi
  ip netns del "$E2E_NETNS" && log "deleted network namespace $E2E_NETNS"
fi
if [ "${KEEP_STATE:-0}" != 1 ]; then
  rm -rf "$E2E_STATE"
fi
exit 0
