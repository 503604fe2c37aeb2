#!/usr/bin/env bash
# Benchmark: a fleet of Proxies made and deleted through the operator (a
# process of its own) on vcsim while a share of its SOAP requests fail,
# one fault class per run, after the same fleet without faults, all in one
# operator process (docs/performance.md). Fails unless every
# Proxy becomes Ready, every one is deleted and the operator's goroutines
# come back to their count after the run without faults.
#   hack/bench-fleet-faults.sh [size] [classes] [rate]
#   # default: 300 transient,quota,hang 0.2
set -euo pipefail
cd "$(dirname "$0")/.."
export KUBEBUILDER_ASSETS=${KUBEBUILDER_ASSETS:-$(hack/control-plane.sh)}
export BENCH_FLEET=${1:-300} BENCH_FAULTS=${2:-transient,quota,hang} BENCH_FAULT_RATE=${3:-0.2}
# The run's output shows on stderr as it comes (a wait says where it stands
# every minute); its result lines are read from it at the end.
out=$(cd operator && go test -run '^$' -bench '^BenchmarkFleetFaults$' -benchtime 1x -timeout 3h ./internal/bench/ 2>&1 | tee /dev/stderr) || exit 1
grep '^BenchmarkFleetFaults' <<<"$out"
awk -v rate="$BENCH_FAULT_RATE" '
  /^BenchmarkFleetFaults\// {
    split($1, name, "/"); c = name[2]; sub(/-[0-9]+$/, "", c)
    for (i = 3; i < NF; i += 2) v[c "|" $(i+1)] = $i
    order[++n] = c
    if (c ~ /faults=none$/) base = c
  }
  END {
    for (k = 1; k <= n; k++) {
      c = order[k]
      printf "%s: create %.1f s, delete %.1f s", c, v[c "|create-ms"] / 1000, v[c "|delete-ms"] / 1000
      if (base != "" && c != base)
        printf " (%.2fx, %.2fx the run without faults)", v[c "|create-ms"] / v[base "|create-ms"], v[c "|delete-ms"] / v[base "|delete-ms"]
      printf "\n  %d faults injected (share %s); failed provider calls: %d transient, %d quota, %d permanent, %d not found\n",
        v[c "|faults"], rate, v[c "|errors-transient"], v[c "|errors-quota"], v[c "|errors-permanent"], v[c "|errors-notfound"]
      if (c == base)
        printf "  all Ready, all deleted; goroutines %d once idle connections closed (%.0f s)\n", v[c "|goroutines"], v[c "|settle-s"]
      else
        printf "  all Ready, all deleted; goroutines %d, %d after the run without faults (settled in %.0f s)\n",
          v[c "|goroutines"], v[base "|goroutines"], v[c "|settle-s"]
    }
  }' <<<"$out"
