#!/usr/bin/env bash
# What every CI lane needs of the machine, checked before anything runs,
# so that a lane that cannot start stops the run at once with the reason
# rather than failing or timing out an hour in (docs/testing.md, "CI's budget"):
# root (packages, network namespaces, loop devices), the Go of go.work,
# loop devices (the guest image), network namespaces (e2e, OpenStack,
# downstream), disk space, and no other lane's namespace left running.
set -euo pipefail
cd "$(dirname "$0")/../.."
. hack/e2e/env.sh
. hack/openstack/env.sh
fail=0
no() { echo "preflight: $*" >&2; fail=1; }

[ "$(id -u)" -eq 0 ] || no "must run as root: the lanes install packages, make network namespaces and loop devices"

want=$(awk '$1 == "go" {print $2; exit}' go.work)
if ! have=$(go env GOVERSION 2>/dev/null); then
  no "no go on PATH (expected /usr/local/go/bin)"
elif [ "$(printf '%s\n' "go$want" "$have" | sort -V | head -1)" != "go$want" ]; then
  no "go.work wants go $want; PATH has $have"
fi

# The guest image is built on a loop device.
if ! dev=$(losetup -f 2>&1); then
  no "no free loop device (losetup -f: $dev): the guest image cannot be built"
fi
# Every lane but the unit tests runs in a network namespace of its own.
if ! out=$(unshare --net true 2>&1); then
  no "cannot make a network namespace (unshare --net: $out)"
fi

# A cold run writes the Go caches (about 8 GiB), the control plane and the
# node, the images and OpenStack's packages; 20 GiB leaves room for them.
for dir in / /tmp "${GOCACHE:-$HOME}"; do
  free_k=$(df -Pk "$dir" | awk 'NR == 2 {print $4}')
  [ "$free_k" -ge $((20 * 1024 * 1024)) ] || no "$dir has $((free_k / 1024)) MiB free; CI needs 20 GiB"
done

# A lane's namespace still there means a lane runs, or one was killed
# before its teardown; a second lane in it would fail in confusing ways.
for ns in "$E2E_NETNS" "$OS_NETNS"; do
  ip netns list 2>/dev/null | awk -v ns="$ns" '$1 == ns { found = 1 } END { exit !found }' || continue
  lock=$E2E_STATE.lock
  [ "$ns" = "$OS_NETNS" ] && lock=$OS_STATE.lock
  if [ -e "$lock" ] && ! flock -n "$lock" true; then
    no "network namespace $ns is in use by a running lane ($lock is held)"
  else
    echo "preflight: network namespace $ns left by an interrupted lane; its lane tears it down first" >&2
  fi
done

[ "$fail" -eq 0 ] || exit 1
echo "preflight: ok (root, $have, loop devices, network namespaces, disk space)" >&2
