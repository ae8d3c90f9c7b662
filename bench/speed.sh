#!/usr/bin/env bash
# bench/speed.sh [REPS] — records/s of whole-process `windowd replay` on one
# core (GOMAXPROCS=1) against a decode-only ceiling, for several window
# shapes, on the same 1M-record input (see bench/README.md).
#
# Builds windowd and bench/ceiling once, generates the input if it is
# missing, then runs every case REPS times (default 3), the cases
# interleaved within each repetition, and prints medians, ratios taken
# within the same repetition, and the speed targets (pass/miss).
#
# Environment:
#   INPUT=FILE         replay input (default bench/out/rss-1m-k10000.jsonl:
#                      bench/gen -records 1000000 -keys 10000 -partitions 4)
#   CASES="ceil T .."  run only these cases (default: all; ratios need ceil
#                      and TC in the same repetition)
#   GOFLAGS etc.       passed to go build as usual
#
# Raw measurements go to bench/out/speed-raw.tsv (one line per process).
set -euo pipefail

reps=${1:-3}
case $reps in '' | *[!0-9]* | 0) echo "usage: bench/speed.sh [REPS>=1]" >&2; exit 2 ;; esac

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
script=speed.sh
# shellcheck source=bench/lib.sh
. bench/lib.sh
out=bench/out
mkdir -p "$out"
bin=$out/windowd-speed
ceil=$out/ceiling
timebin=/usr/bin/time
[ -x "$timebin" ] || { echo "speed.sh: needs GNU time at $timebin" >&2; exit 1; }

# id | kind (ceiling mode, or windowd config [extra flags]) | what
cases=(
	"ceil|ceiling get|decode-only ceiling: gjson.Get of partition, key, value{ts,x}"
	"ceilM|ceiling getmany|decode-only, gjson.GetManyBytes of the 4 paths (info)"
	"T|windowd bench/tumbling.yaml|tumbling 10s, record key (10k keys)"
	"Tp|windowd bench/tumbling.yaml --partitions 4|T with --partitions 4: no partition scan (info)"
	"TC|windowd bench/tumbling-10s-country.yaml|tumbling 10s, value.country (8 keys)"
	"TCR|windowd bench/tumbling-10s-country-repartition.yaml|TC with repartition: true (info)"
	"HC|windowd bench/hopping-60s-1s-country.yaml|hopping 60s/1s, value.country"
	"SC|windowd bench/session-30s-country.yaml|session gap 30s, value.country"
)
select_cases

echo "# windowd replay speed benchmark — $(date -u +%Y-%m-%dT%H:%MZ)"
echo "# commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet HEAD -- . 2>/dev/null || echo ' (working tree has changes)'); $(go version | cut -d' ' -f3-); $(nproc) CPUs ($(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)); GOMAXPROCS=1"
echo "# building $bin and $ceil"
go build -o "$bin" ./cmd/windowd
go build -o "$ceil" ./bench/ceiling
in=$(speed_input)
echo "# input $in ($(wc -c <"$in") bytes)"
for c in "${cases[@]}"; do
	IFS='|' read -r id kind what <<<"$c"
	read -ra argv <<<"$kind"
	if [ "${argv[0]}" = windowd ]; then
		"$bin" validate --config "${argv[1]}" >/dev/null || { echo "speed.sh: ${argv[1]} does not validate" >&2; exit 1; }
	fi
done

raw=$out/speed-raw.tsv
printf 'rep\tcase\trecords\twall_s\tuser_s\tsys_s\tpeak_rss_kib\tload1\tinproc_records_per_s\n' >"$raw"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

for ((r = 1; r <= reps; r++)); do
	for c in "${cases[@]}"; do
		IFS='|' read -r id kind what <<<"$c"
		read -ra argv <<<"$kind" # "ceiling MODE" or "windowd CONFIG [FLAGS...]"
		if [ "${argv[0]}" = ceiling ]; then
			cmd=("$ceil" -input "$in" -mode "${argv[1]}")
		else
			cmd=("$bin" replay --config "${argv[1]}" --input "$in" "${argv[@]:2}")
		fi
		load=$(cut -d' ' -f1 /proc/loadavg)
		echo "# rep $r/$reps case $id ($what), load $load" >&2
		t0=$(date +%s%N)
		if ! GOMAXPROCS=1 "$timebin" -f '%M %e %U %S' -o "$tmp/time" "${cmd[@]}" >"$tmp/out" 2>"$tmp/err"; then
			echo "speed.sh: case $id failed:" >&2
			tail -5 "$tmp/err" >&2
			exit 1
		fi
		t1=$(date +%s%N)
		wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.4f", (b - a) / 1e9}')
		inproc=-
		if [ "${cmd[0]}" = "$ceil" ]; then
			n=$(awk '{print $2}' "$tmp/out")
			inproc=$(awk '{print $6}' "$tmp/out")
		else
			n=$(sed -n 's/.*"summary":{"lines":[0-9]*,"records":\([0-9]*\).*/\1/p' "$tmp/err" | tail -1)
		fi
		read -r rss _ us sy < <(tail -1 "$tmp/time")
		printf '%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$r" "$id" "${n:-0}" "$wall" "$us" "$sy" "$rss" "$load" "$inproc" >>"$raw"
	done
done

# ratio ID REF [cpu]: median over repetitions of rate(ID) / rate(REF) in the
# same repetition; rate = records per wall-clock second, or with "cpu" per
# CPU second (user + sys)
ratio() {
	awk -F'\t' -v id="$1" -v ref="$2" -v cpu="${3:-}" 'NR > 1 {t = cpu == "" ? $4 : $5 + $6; if (t > 0) rate[$1 "|" $2] = $3 / t; reps[$1] = 1}
		END {for (r in reps) if ((r "|" id) in rate && (r "|" ref) in rate) printf "%.3f\n", rate[r "|" id] / rate[r "|" ref]}' "$raw" | median
}
verdict() { # VALUE THRESHOLD
	awk -v v="$1" -v t="$2" 'BEGIN {if (v == "-") print "n/a"; else if (v + 0 >= t + 0) print "PASS"; else print "MISS"}'
}

echo
echo "# $reps repetition(s), GOMAXPROCS=1; medians. records/s = records / wall-clock of the whole process"
echo "# (start-up, windowd's partition scan of the input, Pebble open/close included). /ceil and /TC: rate"
echo "# over the ceil or TC rate of the same repetition, median; cpu/ceil, cpu/TC: the same with records per CPU"
echo "# second (user + sys). load = 1-min load average at each start (min-max)."
printf '%-6s %-62s %12s %8s %8s %8s %9s %8s %8s %10s\n' case what "records/s" "cpu s" "/ceil" "/TC" "cpu/ceil" "cpu/TC" "RSS MiB" "load"
for c in "${cases[@]}"; do
	IFS='|' read -r id kind what <<<"$c"
	rows=$(awk -F'\t' -v id="$id" 'NR > 1 && $2 == id' "$raw")
	rate=$(awk -F'\t' '$4 > 0 {printf "%.0f\n", $3 / $4}' <<<"$rows" | median)
	cpu=$(awk -F'\t' '{printf "%.2f\n", $5 + $6}' <<<"$rows" | median)
	rss=$(awk -F'\t' '{printf "%.0f\n", $7 / 1024}' <<<"$rows" | median)
	load=$(awk -F'\t' '{print $8}' <<<"$rows" | sort -g | awk 'NR == 1 {lo = $1} {hi = $1} END {print lo "-" hi}')
	printf '%-6s %-62s %12s %8s %8s %8s %9s %8s %8s %10s\n' "$id" "$what" "$rate" "$cpu" "$(ratio "$id" ceil)" "$(ratio "$id" TC)" "$(ratio "$id" ceil cpu)" "$(ratio "$id" TC cpu)" "$rss" "$load"
done
inproc=$(awk -F'\t' 'NR > 1 && $2 == "ceil" {print $9}' "$raw" | median)
echo "# ceiling's own in-process rate (first read to last line), median: $inproc records/s"

echo
echo "# targets: wall-clock ratios of the same repetition, medians (in brackets: the same by CPU time, for information)"
target() { # ID REF LABEL
	local w c
	w=$(ratio "$1" "$2")
	c=$(ratio "$1" "$2" cpu)
	printf '%-50s %8s  %-4s  [cpu %s %s]\n' "$3" "$w" "$(verdict "$w" 0.5)" "$c" "$(verdict "$c" 0.5)"
}
target T ceil "T (tumbling 10s, record key) >= 0.50 x ceil"
target T ceilM "  (info: T >= 0.50 x getmany ceiling)"
target HC TC "HC (hopping 60s/1s, country) >= 0.50 x TC"
target SC TC "SC (session 30s, country) >= 0.50 x TC"
echo "# raw: $raw"
