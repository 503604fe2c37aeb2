#!/usr/bin/env bash
# Runs the local dev job (make dev) until its sample Proxy is Ready, then
# interrupts it and checks that it deleted the Proxy and stopped what it
# started. Everything it runs listens on loopback.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(mktemp) err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT
make --no-print-directory dev >"$out" 2>"$err" &
pid=$!
for _ in $(seq 180); do
  grep -q " Ready " "$out" && break
  kill -0 "$pid" 2>/dev/null || break
  sleep 1
done
cat "$out"
if ! grep -q " Ready " "$out"; then
  echo "dev-smoke: the sample Proxy did not become Ready" >&2
  cat "$err" >&2
  kill "$pid" 2>/dev/null || true
  exit 1
fi
# The sample Proxy takes its address from the sample AddressPool: the
# address shows while it is still provisioning, before any VM answers.
if ! grep -Eq " Provisioning +[0-9]+(\.[0-9]+){3} " "$out"; then
  echo "dev-smoke: the Proxy's address was not shown before Ready" >&2
  status=1
fi
# make runs the binary as a child: interrupt the binary itself, found
# among make's descendants (another checkout's make dev runs the same
# command line, so no pkill -f).
descendants() { local c; for c in $(pgrep -P "$1"); do echo "$c"; descendants "$c"; done; }
for c in $(descendants "$pid"); do
  [[ "$(cat "/proc/$c/comm" 2>/dev/null)" == egress-proxies* ]] && kill -INT "$c" 2>/dev/null || true
done
wait "$pid" || true
grep "^dev:" "$err" >&2
for want in "the Proxy and its VM are gone" "stopping vcsim" "stopping the control plane"; do
  grep -q "$want" "$err" || { echo "dev-smoke: missing on exit: $want" >&2; exit 1; }
done
[[ ${status:-0} == 0 ]] || exit 1
echo "dev-smoke: ok"
