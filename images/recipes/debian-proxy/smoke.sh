#!/usr/bin/env bash
# Boots the debian-proxy image once under QEMU (TCG; no KVM needed) with a
# NoCloud seed built by images/nocloud, and checks from the guest's serial
# console that cloud-init ran, the proxy answers HTTP on its port and the
# guest agent runs. The VM has no network card at all: it can reach
# nothing, and nothing reaches it.
#
#   images/recipes/debian-proxy/smoke.sh [image.qcow2]   # default: build.sh's image
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
image=${1:-$("$here/build.sh")}
timeout_s=${SMOKE_TIMEOUT:-300}
log() { echo "smoke: $*" >&2; }

"$root/hack/apt-ensure.sh" @image

work=$(mktemp -d)
pid=""
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$work"' EXIT

cat > "$work/user-data" <<'YAML'
#cloud-config
write_files:
  - path: /etc/tinyproxy/tinyproxy.conf
    content: |
      User tinyproxy
      Group tinyproxy
      Port 3128
      Timeout 600
      Allow 127.0.0.1/32
runcmd:
  - [systemctl, restart, tinyproxy]
  - - bash
    - -c
    - |
      # tinyproxy may take more than a moment to answer on a loaded
      # machine under TCG: a fixed 2 s wait once read "proxy=[]", and so,
      # once, did a connection that was accepted and closed without an
      # answer. So the whole exchange is retried until it has one.
      status=""
      for _ in $(seq 60); do
        status=$( (exec 3<>/dev/tcp/127.0.0.1/3128 && printf 'HEAD / HTTP/1.0\r\n\r\n' >&3 && timeout 5 head -n 1 <&3) 2>/dev/null | tr -d '\r')
        [ -n "$status" ] && break
        sleep 1
      done
      echo "EGRESS-SMOKE proxy=[$status] agent=$(systemctl is-active qemu-guest-agent)" > /dev/ttyS0
YAML
(cd "$root/images" && go run ./internal/cmd/seed -user-data "$work/user-data" -hostname smoke -o "$work/seed.iso")
qemu-img create -q -f qcow2 -F qcow2 -b "$image" "$work/disk.qcow2"

log "booting $image (TCG)"
start=$(date +%s)
qemu-system-x86_64 -machine pc,accel=tcg -m 1024 -smp 2 -display none -nic none \
  -drive file="$work/disk.qcow2",if=virtio -drive file="$work/seed.iso",media=cdrom,readonly=on \
  -device virtio-serial -chardev socket,path="$work/qga.sock",server=on,wait=off,id=qga0 \
  -device virtserialport,chardev=qga0,name=org.qemu.guest_agent.0 \
  -serial file:"$work/console.log" >"$work/qemu.log" 2>&1 &
pid=$!
while ! grep -aq "EGRESS-SMOKE" "$work/console.log" 2>/dev/null; do
  if ! kill -0 "$pid" 2>/dev/null; then log "QEMU exited"; cat "$work/qemu.log" >&2; exit 1; fi
  if [ $(($(date +%s) - start)) -gt "$timeout_s" ]; then
    log "no result after ${timeout_s}s; console tail:"; tail -c 3000 "$work/console.log" >&2; exit 1
  fi
  sleep 2
done
result=$(grep -a "EGRESS-SMOKE" "$work/console.log" | head -1)
log "after $(($(date +%s) - start))s: $result"
# The marker comes from the seed's user-data: the seed was read.
case "$result" in
  *"proxy=[HTTP/1."*"agent=active"*) log "ok" ;;
  *) log "the proxy or the guest agent is not running"; exit 1 ;;
esac
