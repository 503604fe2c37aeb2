#!/usr/bin/env bash
# Benchmark: the SOAP calls and the time of a vSphere Delete of a running
# VM (three tasks: the deleting mark, the power-off, the destroy) on vcsim,
# with every task taking longer by each of 0 to 4 s, for each way of
# waiting for a task: reads of its info before govmomi's Task.Wait, or
# Task.Wait alone (providers/vsphere/tasks_bench_test.go; figures, not
# assertions; docs/performance.md, "vSphere task waits").
#   hack/bench-vsphere-tasks.sh [iterations]     # default 3
set -euo pipefail
cd "$(dirname "$0")/../providers/vsphere"
out=$(go test -run '^$' -bench '^BenchmarkDeleteTaskWaits$' -benchtime "${1:-3}x" -timeout 30m . 2>&1) || { echo "$out" >&2; exit 1; }
echo "task delay   wait             calls   Delete ms"
awk '
  /^BenchmarkDeleteTaskWaits\// {
    split($1, name, "/"); sub(/^task=/, "", name[2]); way = name[3]; sub(/-[0-9]+$/, "", way)
    for (i = 2; i <= NF; i++) {
      if ($i == "ns/op") ms = $(i-1) / 1e6
      if ($i == "calls/op") calls = $(i-1)
    }
    printf "%-12s %-16s %5.1f %11.0f\n", name[2], way, calls, ms
  }' <<<"$out"
