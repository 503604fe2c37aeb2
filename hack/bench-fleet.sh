#!/usr/bin/env bash
# Benchmark: a fleet of Proxies made and deleted at once through the
# operator (a process of its own) against the bare govmomi sequence at the
# same concurrency, on the same vcsim, in the same run (docs/performance.md).
# Prints the benchmark's lines, then per size and task latency the
# operator/bare ratios and the operator's costs. A task latency delays
# vcsim's answer to the clone and to the deletion's power-off and destroy.
#   hack/bench-fleet.sh [sizes] [task latencies]   # default: 100,300,1000  0s,1s
#   BENCH_RESYNC=10s sets the operator's Ready resync period;
#   BENCH_WORKERS its --max-concurrent-reconciles (default: the operator's).
#   BENCH_SHIPPED=1 runs the shipped binary instead of the benchmark's
#   operator mode: built as the image builds it (-tags vsphere, stripped),
#   at its defaults (resync 1 min, poll 5 s), its probe dialling the played
#   guests' addresses (192.0.0.0/16), which a network namespace of the
#   run's own routes to loopback, where the stand-in proxy answers (root).
set -euo pipefail
cd "$(dirname "$0")/.."
export KUBEBUILDER_ASSETS=${KUBEBUILDER_ASSETS:-$(hack/control-plane.sh)}
export BENCH_FLEET=${1:-100,300,1000} BENCH_CLONE=${2:-0s,1s}
run=()
if [ "${BENCH_SHIPPED:-}" = 1 ]; then
  [ "$(id -u)" -eq 0 ] || { echo "BENCH_SHIPPED=1 needs root (a network namespace)" >&2; exit 1; }
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  (cd operator && CGO_ENABLED=0 go build -trimpath -buildvcs=false -tags vsphere -ldflags "-s -w" -o "$tmp/egress-proxies-operator" ./cmd)
  # The test binary too, before the namespace: it has no network.
  (cd operator && go test -c -o "$tmp/bench.test" ./internal/bench/)
  export BENCH_OPERATOR_BINARY=$tmp/egress-proxies-operator
  run=(unshare --net -- sh -c 'ip link set lo up && ip route add local 192.0.0.0/16 dev lo table local && exec "$@"' sh)
fi
if [ ${#run[@]} -gt 0 ]; then
  out=$(cd operator/internal/bench && "${run[@]}" "$tmp/bench.test" -test.run '^$' -test.bench '^BenchmarkFleet$' -test.benchtime 1x -test.timeout 3h 2>&1) || { echo "$out" >&2; exit 1; }
else
  out=$(cd operator && go test -run '^$' -bench '^BenchmarkFleet$' -benchtime 1x -timeout 3h ./internal/bench/ 2>&1) || { echo "$out" >&2; exit 1; }
fi
grep '^BenchmarkFleet' <<<"$out"
awk '
  /^BenchmarkFleet\// {
    split($1, name, "/"); c = name[3]; sub(/-[0-9]+$/, "", c)
    for (i = 3; i < NF; i += 2) v[name[2] "|" c "|" $(i+1)] = $i
    if (!(c in seen)) { seen[c] = 1; order[++n] = c }
  }
  END {
    for (k = 1; k <= n; k++) {
      c = order[k]; o = "operator|" c "|"; s = "sdk|" c "|"
      printf "%s: create %.1f s / bare %.1f s (%.2fx); delete %.1f s / bare %.1f s (%.2fx, target <= 1.3)\n", c,
        v[o "create-ms"] / 1000, v[s "create-ms"] / 1000, v[o "create-ms"] / v[s "create-ms"],
        v[o "delete-ms"] / 1000, v[s "delete-ms"] / 1000, v[o "delete-ms"] / v[s "delete-ms"]
      printf "  SOAP per create %.1f (bare %.1f), per delete %.1f (bare %.1f; target <= 6), per Proxy per resync %.2f (target <= 1)\n",
        v[o "calls/create"], v[s "calls/create"], v[o "calls/delete"], v[s "calls/delete"], v[o "calls/resync"]
      printf "  API writes per Proxy per resync %.3f (target 0); API requests per Proxy %.1f; peak RSS %.0f MiB, file pages (the binary) %.0f MiB at the end; peak anonymous %.0f MiB (target <= 150 at 1000)\n",
        v[o "writes/resync"], v[o "api/proxy"], v[o "peak-MiB"], v[o "file-MiB"], v[o "peak-anon-MiB"]
      printf "  GC sweep of the fleet: %.0f ms, %d SOAP calls, %.0f KiB\n", v[o "sweep-ms"], v[o "sweep-calls"], v[o "sweep-KiB"]
      printf "  API requests per deletion: GET %.2f, PUT %.2f, PATCH %.2f, POST %.2f, DELETE %.2f; answered Conflict %.2f\n",
        v[o "delete-api-GET"], v[o "delete-api-PUT"], v[o "delete-api-PATCH"], v[o "delete-api-POST"], v[o "delete-api-DELETE"], v[o "delete-api-409"]
      printf "  workqueue: creating %.1f reconciles per Proxy, each %.0f ms queued and %.1f ms reconciling; deleting %.1f, %.0f ms, %.1f ms\n",
        v[o "create-reconciles"], v[o "create-queued-ms"], v[o "create-reconcile-ms"], v[o "delete-reconciles"], v[o "delete-queued-ms"], v[o "delete-reconcile-ms"]
      printf "  connections to vCenter (TLS handshakes): creating %d (bare %d), deleting %d (bare %d)\n",
        v[o "create-conns"], v[s "create-conns"], v[o "delete-conns"], v[s "delete-conns"]
      printf "  CPU seconds creating: operator %.1f, API server and etcd %.1f, vcsim and benchmark %.1f; machine %.0f%% busy (bare: %.1f, %.1f; %.0f%%)\n",
        v[o "create-cpu-s"], v[o "create-apiserver-cpu-s"], v[o "create-vcsim-cpu-s"], 100 * v[o "create-busy"],
        v[s "create-apiserver-cpu-s"], v[s "create-vcsim-cpu-s"], 100 * v[s "create-busy"]
      printf "  CPU seconds deleting: operator %.1f, API server and etcd %.1f, vcsim and benchmark %.1f; machine %.0f%% busy (bare: %.1f, %.1f; %.0f%%)\n",
        v[o "delete-cpu-s"], v[o "delete-apiserver-cpu-s"], v[o "delete-vcsim-cpu-s"], 100 * v[o "delete-busy"],
        v[s "delete-apiserver-cpu-s"], v[s "delete-vcsim-cpu-s"], 100 * v[s "delete-busy"]
    }
  }' <<<"$out"
