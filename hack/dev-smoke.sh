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
# make runs the binary as a child: interrupt the binary itself.
pkill -INT -f 'bin/egress-proxies-dev' || true
wait "$pid" || true
grep "^dev:" "$err" >&2
for want in "the Proxy and its VM are gone" "stopping vcsim" "stopping the control plane"; do
  grep -q "$want" "$err" || { echo "dev-smoke: missing on exit: $want" >&2; exit 1; }
done
echo "dev-smoke: ok"
