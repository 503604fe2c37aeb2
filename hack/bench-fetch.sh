#!/usr/bin/env bash
# Benchmark: images/fetch against standard tools on loopback, one server,
# one image, same run (docs/architecture.md, Targets: RSS flat, at most 16 MiB growth for a
# 2 GiB image; throughput at least 0.9x each baseline). Contenders:
#   fetch     images/fetch: SHA-256 verified while streaming, fsynced
#             before the copy is marked complete
#   tee|sha   curl | tee file | sha256sum: the same work by standard tools
#             (the sum is checked against the image's)
#   curl -o   curl -o file: no checksum asked, nothing verified or synced
# images/fetch has no unverified mode, so its verified time is what stands
# against curl -o: the "no checksum asked" target holds if this one does.
# Each round times every contender once, the order rotating from round to
# round so that none always runs first or last; medians are printed. A
# sync between contenders keeps one's writeback out of the next one's time,
# and each starts once the machine has been idle for a second (waiting a
# minute at most, then saying so): fetch uses both CPUs of a 2-CPU machine,
# curl one, so another's work on the machine weighs on fetch most.
#   hack/bench-fetch.sh [size-bytes] [rounds]    # default 2 GiB, 3 rounds
set -euo pipefail
size=${1:-$((2 << 30))}
rounds=${2:-3}
cd "$(dirname "$0")/.."
for tool in curl sha256sum bc; do
  command -v "$tool" >/dev/null || { echo "bench-fetch: $tool is required" >&2; exit 1; }
done
work=$(mktemp -d)
server=""
trap '[ -n "$server" ] && kill "$server" 2>/dev/null; rm -rf "$work"' EXIT

(cd images && go build -o "$work/fetchbench" ./internal/cmd/fetchbench)
"$work/fetchbench" serve -size "$size" > "$work/serve.out" &
server=$!
for _ in $(seq 100); do [ -s "$work/serve.out" ] && break; sleep 0.2; done
read -r url sum < "$work/serve.out"
mkdir "$work/out"

# idle waits until less than a tenth of a CPU was busy for one second.
idle() {
  local a b
  for _ in $(seq 30); do
    a=$(awk '/^cpu /{print $2+$3+$4+$7+$8+$9}' /proc/stat); sleep 1
    b=$(awk '/^cpu /{print $2+$3+$4+$7+$8+$9}' /proc/stat)
    [ $((b - a)) -lt 10 ] && return
    sleep 1
  done
  echo "bench-fetch: the machine stayed busy; this run's times include other work" >&2
}

now() { date +%s.%N; }
since() { printf '%.3f\n' "$(echo "$(now) - $1" | bc -l)"; }

# Each run_* appends its seconds to $work/<name>.s.
run_fetch() {
  local start out
  start=$(now)
  out=$("$work/fetchbench" fetch -url "$url" -sha256 "$sum" -dir "$work/out")
  since "$start" >> "$work/fetch.s"
  sed -n 's/.*commit_seconds=\([0-9.]*\).*/\1/p' <<<"$out" >> "$work/commit.s"
  sed -n 's/.*rss_growth_kib=\([0-9]*\).*/\1/p' <<<"$out" >> "$work/rss.kib"
}
run_tee() {
  local start got
  start=$(now)
  got=$(curl -s -f "$url" | tee "$work/out/image" | sha256sum)
  since "$start" >> "$work/tee.s"
  [ "${got%% *}" = "$sum" ] || { echo "bench-fetch: curl | tee | sha256sum got ${got%% *}, want $sum" >&2; exit 1; }
}
run_curl() {
  local start
  start=$(now)
  curl -s -f -o "$work/out/image" "$url"
  since "$start" >> "$work/curl.s"
}

contenders=(fetch tee curl)
for round in $(seq 0 $((rounds - 1))); do
  for i in 0 1 2; do
    c=${contenders[$(( (round + i) % 3 ))]}
    idle
    "run_$c"
    rm -f "$work/out/image"
    sync
  done
done

median() { sort -g "$1" | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
fetch_s=$(median "$work/fetch.s")
commit_s=$(median "$work/commit.s")
tee_s=$(median "$work/tee.s")
curl_s=$(median "$work/curl.s")
growth=$(sort -n "$work/rss.kib" | tail -1)
mib=$(echo "$size / 1048576" | bc -l)
rate() { echo "$mib / $1" | bc -l; }
printf 'image: %.0f MiB over loopback; medians of %d rounds, order rotating\n' "$mib" "$rounds"
printf 'images/fetch:             %6.2f s (%4.0f MiB/s), of which commit (fsync) %.2f s; peak RSS growth %d KiB at most\n' \
  "$fetch_s" "$(rate "$fetch_s")" "$commit_s" "$growth"
printf 'curl | tee | sha256sum:   %6.2f s (%4.0f MiB/s)\n' "$tee_s" "$(rate "$tee_s")"
printf 'curl -o:                  %6.2f s (%4.0f MiB/s)\n' "$curl_s" "$(rate "$curl_s")"
printf 'fetch vs curl|tee|sha256sum: %.2f (target >= 0.9)\n' "$(echo "$tee_s / $fetch_s" | bc -l)"
printf 'fetch vs curl -o:            %.2f (target >= 0.9)\n' "$(echo "$curl_s / $fetch_s" | bc -l)"
printf 'all runs (s): fetch %s; tee %s; curl -o %s\n' \
  "$(paste -sd' ' "$work/fetch.s")" "$(paste -sd' ' "$work/tee.s")" "$(paste -sd' ' "$work/curl.s")"
