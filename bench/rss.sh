#!/usr/bin/env bash
# bench/rss.sh [REPS] — peak RSS and speed of `windowd replay` on 1M-record
# generated inputs, for few and many open windows (see bench/README.md).
#
# Builds the binary once, generates the inputs into bench/out/ (kept between
# runs; same seed, same bytes), replays every case REPS times (default 3),
# interleaving the cases within each repetition, and prints medians.
#
# Environment:
#   CASES="A B C16 ..."  run only these cases (default: all, in table order)
#   GOFLAGS etc.         passed to go build as usual
#
# Raw measurements go to bench/out/rss-raw.tsv (one line per replay).
set -euo pipefail

reps=${1:-3}
case $reps in '' | *[!0-9]* | 0) echo "usage: bench/rss.sh [REPS>=1]" >&2; exit 2 ;; esac

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
script=rss.sh
# shellcheck source=bench/lib.sh
. bench/lib.sh
out=bench/out
mkdir -p "$out"
bin=$out/windowd-rss
gen=$out/gen-rss
timebin=/usr/bin/time
[ -x "$timebin" ] || { echo "rss.sh: needs GNU time at $timebin" >&2; exit 1; }

records=1000000

# id | config | keys | open windows at the peak (for the generator's defaults:
# 1000 records/s of event time, 2 s disorder; counted once with the engine's
# OpenWindows, they do not depend on cache_bytes) | what the case is
cases=(
	"A|bench/tumbling.yaml|10000|7.6k (few)|tumbling 10s, 10k keys"
	"B100k|bench/tumbling-1h.yaml|100000|100k (all open at end)|tumbling 1h, 100k keys"
	"B|bench/tumbling-1h.yaml|1000000|632k (all open at end)|tumbling 1h, 1M keys"
	"C16|bench/tumbling-1h-cache16m.yaml|1000000|632k (all open at end)|B, cache_bytes 16MiB"
	"C256|bench/tumbling-1h-cache256m.yaml|1000000|632k (all open at end)|B, cache_bytes 256MiB"
	"D|bench/hopping-60s-1s.yaml|10000|520k (60 per record)|hopping 60s/1s, 10k keys"
	"D256|bench/hopping-60s-1s-cache256m.yaml|10000|520k (60 per record)|D, cache_bytes 256MiB"
	"E|bench/session-30s.yaml|10000|9.6k sessions|session gap 30s, 10k keys"
)
select_cases

echo "# windowd replay RSS benchmark — $(date -u +%Y-%m-%dT%H:%MZ)"
echo "# commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet HEAD -- . 2>/dev/null || echo ' (working tree has changes)'); $(go version | cut -d' ' -f3-); $(nproc) CPUs; $(awk '/MemTotal/{printf "%.1f GiB RAM", $2/1048576}' /proc/meminfo)"
echo "# building $bin and $gen"
go build -o "$bin" ./cmd/windowd
go build -o "$gen" ./bench/gen

for c in "${cases[@]}"; do
	IFS='|' read -r id cfg keys est what <<<"$c"
	"$bin" validate --config "$cfg" >/dev/null || { echo "rss.sh: $cfg does not validate" >&2; exit 1; }
	in=$out/rss-1m-k$keys.jsonl
	if [ ! -s "$in" ]; then
		echo "# generating $in"
		"$gen" -records $records -keys "$keys" -partitions 4 >"$in.tmp"
		mv "$in.tmp" "$in"
	fi
done

raw=$out/rss-raw.tsv
printf 'rep\tcase\tpeak_rss_kib\telapsed_s\tuser_s\tsys_s\trecords\tload1\n' >"$raw"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

for ((r = 1; r <= reps; r++)); do
	for c in "${cases[@]}"; do
		IFS='|' read -r id cfg keys est what <<<"$c"
		in=$out/rss-1m-k$keys.jsonl
		load=$(cut -d' ' -f1 /proc/loadavg)
		echo "# rep $r/$reps case $id ($what), load $load" >&2
		if ! "$timebin" -f '%M %e %U %S' -o "$tmp/time" "$bin" replay --config "$cfg" --input "$in" >/dev/null 2>"$tmp/err"; then
			echo "rss.sh: case $id failed:" >&2
			tail -5 "$tmp/err" >&2
			exit 1
		fi
		n=$(sed -n 's/.*"summary":{"lines":[0-9]*,"records":\([0-9]*\).*/\1/p' "$tmp/err" | tail -1)
		read -r rss el us sy < <(tail -1 "$tmp/time")
		printf '%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$r" "$id" "$rss" "$el" "$us" "$sy" "${n:-0}" "$load" >>"$raw"
	done
done


echo
echo "# $reps repetition(s); medians; RSS/A is peak RSS over case A's in the same repetition; load = 1-min load average at start of each replay (min-max)"
printf '%-6s %-28s %-26s %12s %10s %14s %8s %10s\n' case what "open windows (peak)" "records/s" "cpu s" "peak RSS MiB" "RSS/A" "load"
for c in "${cases[@]}"; do
	IFS='|' read -r id cfg keys est what <<<"$c"
	rows=$(awk -F'\t' -v id="$id" 'NR > 1 && $2 == id' "$raw")
	rate=$(awk -F'\t' '$4 > 0 {printf "%.0f\n", $7 / $4}' <<<"$rows" | median)
	cpu=$(awk -F'\t' '{printf "%.1f\n", $5 + $6}' <<<"$rows" | median)
	rss=$(awk -F'\t' '{printf "%.0f\n", $3 / 1024}' <<<"$rows" | median)
	ratio=$(awk -F'\t' -v id="$id" 'NR > 1 && $2 == "A" {a[$1] = $3} NR > 1 && $2 == id && a[$1] > 0 {printf "%.2f\n", $3 / a[$1]}' "$raw" | median)
	load=$(awk -F'\t' '{print $8}' <<<"$rows" | sort -g | awk 'NR == 1 {lo = $1} {hi = $1} END {print lo "-" hi}')
	printf '%-6s %-28s %-26s %12s %10s %14s %8s %10s\n' "$id" "$what" "$est" "$rate" "$cpu" "$rss" "$ratio" "$load"
done
echo "# raw: $raw"
