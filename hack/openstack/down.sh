#!/usr/bin/env bash
# Stops the OpenStack lane (hack/openstack/up.sh): every service it
# started, in reverse order, then whatever else still runs in its
# namespace (only the lane's processes live there), then the namespace.
# The state directory goes too, except the cache and, when OS_KEEP_LOGS=1,
# the logs ($OS_STATE/logs). Safe after a half-done up and when nothing runs.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/env.sh"
. "$here/procs.sh"
log() { echo "openstack-down: $*" >&2; }
[ "$(id -u)" -eq 0 ] || { log "must run as root"; exit 1; }

if [ -d "$OS_STATE/run" ]; then
  # shellcheck disable=SC2046 # the list splits into names
  stop $(echo $OS_SERVICES | tr ' ' '\n' | tac)
fi
if os_netns_exists; then
  # Children a service left behind (uwsgi workers, epmd, beam helpers).
  pids=$(ip netns pids "$OS_NETNS" || true)
  if [ -n "$pids" ]; then
    kill -TERM $pids 2>/dev/null || true
    for _ in $(seq 1 20); do [ -z "$(ip netns pids "$OS_NETNS")" ] && break; sleep 0.5; done
    pids=$(ip netns pids "$OS_NETNS" || true)
    [ -n "$pids" ] && kill -KILL $pids 2>/dev/null || true
  fi
  ip netns delete "$OS_NETNS"
fi
if [ -d "$OS_STATE" ]; then
  keep=(cache)
  [ "${OS_KEEP_LOGS:-0}" = 1 ] && keep+=(logs)
  find "$OS_STATE" -mindepth 1 -maxdepth 1 $(printf -- '-not -name %s ' "${keep[@]}") -exec rm -rf {} +
  [ "${OS_KEEP_LOGS:-0}" = 1 ] && log "logs kept in $OS_STATE/logs"
fi
log "down"
