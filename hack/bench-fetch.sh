#!/usr/bin/env bash
# Benchmark: images/fetch against curl -o, both on loopback, same image,
# same run (DESIGN.md §8: RSS flat, at most 16 MiB growth for a 2 GiB
# image; throughput at least 0.9x curl's). Prints both and the ratio.
#   hack/bench-fetch.sh [size-bytes]     # default 2 GiB
set -euo pipefail
size=${1:-$((2 << 30))}
cd "$(dirname "$0")/.."
work=$(mktemp -d)
server=""
trap '[ -n "$server" ] && kill "$server" 2>/dev/null; rm -rf "$work"' EXIT
command -v curl >/dev/null || { echo "bench-fetch: curl is required" >&2; exit 1; }

(cd images && go build -o "$work/fetchbench" ./internal/cmd/fetchbench)
"$work/fetchbench" serve -size "$size" > "$work/serve.out" &
server=$!
for _ in $(seq 100); do [ -s "$work/serve.out" ] && break; sleep 0.2; done
read -r url sum < "$work/serve.out"

mkdir "$work/ours" "$work/curl"
ours=$("$work/fetchbench" fetch -url "$url" -sha256 "$sum" -dir "$work/ours")
rm -f "$work/ours/image"
start=$(date +%s.%N)
curl -s -f -o "$work/curl/image" "$url"
end=$(date +%s.%N)
rm -f "$work/curl/image"

ours_s=$(sed -n 's/.*seconds=\([0-9.]*\).*/\1/p' <<<"$ours")
growth=$(sed -n 's/.*rss_growth_kib=\([0-9]*\).*/\1/p' <<<"$ours")
curl_s=$(echo "$end - $start" | bc -l)
mib=$(echo "$size / 1048576" | bc)
printf 'image: %s MiB over loopback\n' "$mib"
printf 'images/fetch: %.2f s (%.0f MiB/s), peak RSS growth %d KiB (sha256 verified while streaming)\n' "$ours_s" "$(echo "$mib / $ours_s" | bc -l)" "$growth"
printf 'curl -o:      %.2f s (%.0f MiB/s)\n' "$curl_s" "$(echo "$mib / $curl_s" | bc -l)"
printf 'throughput ratio (fetch / curl): %.2f (target >= 0.9)\n' "$(echo "$curl_s / $ours_s" | bc -l)"
