#!/usr/bin/env bash
# Runs CMD against the lane's OpenStack: up.sh, then CMD inside the
# namespace with $OS_STATE/env's variables, then down.sh on every exit
# (the logs in $OS_STATE/logs are kept when CMD or up failed, and with
# OS_KEEP_LOGS=1). Exits with CMD's status.
#   hack/openstack/run.sh go test -tags integration ./providers/openstack/...
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/env.sh"
log() { echo "openstack-run: $*" >&2; }
[ $# -gt 0 ] || { log "usage: $0 CMD..."; exit 2; }
[ "$(id -u)" -eq 0 ] || { log "must run as root (network namespace)"; exit 1; }

status=1
finish() {
  if [ "$status" -ne 0 ]; then
    log "FAILED (status $status); the services' last errors:"
    for f in "$OS_STATE"/logs/*.log; do
      [ -f "$f" ] || continue
      { grep -hE " (ERROR|CRITICAL) " "$f" || true; } | tail -n 5 | sed "s|^|$(basename "$f"): |" | cut -c1-400
    done
    OS_KEEP_LOGS=1 "$here/down.sh"
  else
    "$here/down.sh"
  fi
}
trap finish EXIT
trap 'exit 130' INT TERM # so an interrupted run is torn down too

"$here/up.sh"
set +e
ip netns exec "$OS_NETNS" env $(grep -h '^export ' "$OS_STATE/env" | sed 's/^export //') "$@"
status=$?
set -e
exit "$status"
