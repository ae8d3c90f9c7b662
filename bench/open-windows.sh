#!/usr/bin/env bash
# bench/open-windows.sh — issue #6's memory bound: `windowd replay` with about
# ten million windows open at once (1M+ keys x 10 hopping windows), under the
# default state.cache_bytes, reporting peak RSS, wall time and the windows.
#
# Input: bench/gen -records 3000000 -keys 1200000 -rate 20000 (kept in
# bench/out/ between runs; same seed, same bytes): about 1.1M distinct keys
# within 150 s of event time. Pipeline: bench/hopping-1h-6m-key.yaml (hopping
# 1 h / 6 min by record key). The first window end after the input's start is
# 280 s away, so no window closes before the end of input: every window is
# open at once, and the final panes printed at the end (one per window) count
# them.
#
# Environment: WINDOWD_CACHE (e.g. 256MiB) overrides state.cache_bytes.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
script=open-windows.sh
# shellcheck source=bench/lib.sh
. bench/lib.sh
out=bench/out
mkdir -p "$out"
timebin=/usr/bin/time
[ -x "$timebin" ] || die "needs GNU time at $timebin"

bin=$out/windowd-open
go build -o "$bin" ./cmd/windowd
go build -o "$out/gen-open" ./bench/gen
input=$out/open-3m-k1200000.jsonl
if [ ! -s "$input" ]; then
	echo "# generating $input"
	"$out/gen-open" -records 3000000 -keys 1200000 -rate 20000 > "$input.tmp"
	mv "$input.tmp" "$input"
fi
cfg=bench/hopping-1h-6m-key.yaml
if [ -n "${WINDOWD_CACHE:-}" ]; then
	cfg=$out/hopping-1h-6m-key-cache.yaml
	sed "s|^kafka: {brokers: embedded}|kafka: {brokers: embedded}\nstate: {cache_bytes: $WINDOWD_CACHE}|" bench/hopping-1h-6m-key.yaml > "$cfg"
fi
state=$(mktemp -d "${TMPDIR:-/tmp}/windowd-open.XXXXXX")
trap 'rm -rf "$state"' EXIT
echo "# commit $(git rev-parse --short HEAD 2>/dev/null || echo '?'); $(nproc) CPUs; $(date -u +%FT%TZ); config $cfg"
keys=$(jq -r '.key' "$input" | sort -u | wc -l)
start=$(now)
"$timebin" -f '%M %e %U %S' -o "$out/open-time.txt" \
	"$bin" replay --config "$cfg" --input "$input" --state-dir "$state" 2> "$out/open-stderr.txt" |
	grep -c '"final":true' > "$out/open-windows.txt" || true
end=$(now)
read -r rss_kib wall user sys < "$out/open-time.txt"
windows=$(cat "$out/open-windows.txt")
awk -v k="$rss_kib" -v w="$wall" -v u="$user" -v s="$sys" -v n="$windows" -v keys="$keys" -v t0="$start" -v t1="$end" 'BEGIN {
	printf "distinct keys %s; windows (final panes, all open before the end of input) %d\n", keys, n
	printf "peak RSS %.0f MiB (%d KiB); wall %.1f s (replay), %.1f s with the pane count; CPU %.1f s user + %.1f s sys\n", k/1024, k, w, t1-t0, u, s
	printf "target: peak RSS < 1024 MiB with >= 10M open windows: %s\n", (k < 1048576 && n >= 10000000) ? "PASS" : "MISS"
}'
