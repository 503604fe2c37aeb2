#!/usr/bin/env bash
# Benchmark: the in-process NoCloud seed (images/nocloud) against
# cloud-localds on the same inputs, same run (docs/architecture.md, Targets: at least 20x
# faster). Prints both per-seed times and the ratio.
#   hack/bench-seed.sh [runs]      # default 50 cloud-localds runs
set -euo pipefail
runs=${1:-50}
cd "$(dirname "$0")/.."
command -v cloud-localds >/dev/null || { echo "bench-seed: cloud-localds is required (Debian package cloud-image-utils)" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

ns_go=$(cd images && go test -run '^$' -bench '^BenchmarkSeed$' -benchtime 2000x ./nocloud/ | awk '/^BenchmarkSeed/ {print $3}')
(cd images && go test -run '^TestWriteBenchInputs$' ./nocloud/ -args -bench-inputs "$work" >/dev/null)
start=$(date +%s%N)
for _ in $(seq "$runs"); do
  cloud-localds -N "$work/network-config" "$work/seed.iso" "$work/user-data" "$work/meta-data"
done
end=$(date +%s%N)
ns_localds=$(( (end - start) / runs ))
printf 'images/nocloud: %d us per seed (go test -bench)\n' $((ns_go / 1000))
printf 'cloud-localds:  %d us per seed (%d runs)\n' $((ns_localds / 1000)) "$runs"
printf 'ratio: %.1fx faster (target >= 20x)\n' "$(echo "$ns_localds / $ns_go" | bc -l)"
