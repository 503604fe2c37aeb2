#!/usr/bin/env bash
# Benchmark: Proxy created -> Ready through the operator against the bare
# govmomi sequence (clone, power on, wait for the guest's address) on the
# same vcsim, same concurrency, same run, at 1 and 100 Proxies, and at 1
# with vcsim taking a second to answer CloneVM_Task (a fast clone on a real
# vCenter); SOAP calls per create and per steady-state resync
# (docs/architecture.md, Targets: at most 1.10x with a 1 s clone).
#   hack/bench-vsphere.sh [iterations]     # default 3, after one untimed warm-up; the mean is reported
set -euo pipefail
cd "$(dirname "$0")/.."
export KUBEBUILDER_ASSETS=${KUBEBUILDER_ASSETS:-$(hack/control-plane.sh)}
out=$(cd operator && go test -run '^$' -bench '^BenchmarkReady$' -benchtime "${1:-3}x" ./internal/bench/ 2>&1) || { echo "$out" >&2; exit 1; }
grep '^BenchmarkReady' <<<"$out"
awk '
  /^BenchmarkReady\// {
    split($1, name, "/"); n = name[3]; sub(/-[0-9]+$/, "", n)
    for (i = 2; i <= NF; i++) if ($i == "ms") ms[name[2] "|" n] = $(i-1)
  }
  END {
    for (k in ms) if (k ~ /^operator\|/) {
      split(k, p, "|"); n = p[2]
      printf "%s: operator %d ms, bare SDK %d ms, ratio %.2f (target <= 1.15 at proxies=1)\n", n, ms[k], ms["sdk|" n], ms[k] / ms["sdk|" n]
    }
  }' <<<"$out"
