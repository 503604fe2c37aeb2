#!/usr/bin/env bash
# Benchmark: the vSphere provider's reads over a folder of N VMs on vcsim,
# each carrying the largest cloud-init (64 KiB, 87 KiB of base64): a
# ListByTag sweep and a Get, as the provider reads now (the marks by key,
# the list paged) and as it read before (the whole extraConfig, one
# answer), same vcsim, same run. Prints SOAP calls, bytes of vcsim's
# answers and time per operation, and the largest single answer
# (providers/vsphere/reads_bench_test.go; figures, not assertions).
#   hack/bench-vsphere-reads.sh [vms] [iterations]     # default 1000 VMs, 3 iterations
set -euo pipefail
cd "$(dirname "$0")/../providers/vsphere"
out=$(VSPHERE_BENCH_VMS=${1:-1000} go test -run '^$' -bench '^BenchmarkReads$' -benchtime "${2:-3}x" -timeout 30m . 2>&1) || { echo "$out" >&2; exit 1; }
echo "VMs: ${1:-1000} in one region's folder (a second region empty), cloud-init 64 KiB each"
awk '
  /^BenchmarkReads\// {
    split($1, name, "/"); op = name[3]; sub(/-[0-9]+$/, "", op)
    for (i = 2; i <= NF; i++) {
      if ($i == "ns/op") ms = $(i-1) / 1e6
      if ($i == "calls/op") calls = $(i-1)
      if ($i == "answer-B/op") bytes = $(i-1)
      if ($i == "largest-answer-B") largest = $(i-1)
    }
    printf "%-18s %-9s %6.0f calls %12.0f B answered (%8.1f KiB) largest answer %10.0f B %10.1f ms\n", name[2], op, calls, bytes, bytes / 1024, largest, ms
  }' <<<"$out"
