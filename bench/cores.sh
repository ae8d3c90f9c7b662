#!/usr/bin/env bash
# bench/cores.sh [REPS] — `windowd replay` on one core against two: the
# same binary and input with GOMAXPROCS=1 --workers 1 and GOMAXPROCS=2
# --workers 2, runs interleaved within each repetition; docs/PERFORMANCE.md.
#
# Prints per case the medians of records/s and CPU seconds, and the median
# of the per-repetition ratios (2 cores / 1 core); checks in the first
# repetition that both runs print the same panes as a multiset (sorted
# output lines), so the figure is of the same work.
#
# Environment:
#   INPUT=FILE   replay input (default as speed.sh: 1M records, 10k keys, 4
#                partitions)
#   CASES="T .." only these cases (default: all)
#
# Raw measurements go to bench/out/cores-raw.tsv.
set -euo pipefail

reps=${1:-5}
case $reps in '' | *[!0-9]* | 0) echo "usage: bench/cores.sh [REPS>=1]" >&2; exit 2 ;; esac

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
script=cores.sh
# shellcheck source=bench/lib.sh
. bench/lib.sh
out=bench/out
mkdir -p "$out"
bin=$out/windowd-cores
timebin=/usr/bin/time
[ -x "$timebin" ] || die "needs GNU time at $timebin"
[ "$(nproc)" -ge 2 ] || die "needs 2 CPUs, this machine has $(nproc)"

# id | config [flags] | what
cases=(
	"T|bench/tumbling.yaml|tumbling 10s by record key (10k keys), partition scan included"
	"Tp|bench/tumbling.yaml --partitions 4|T with --partitions 4: no partition scan"
	"H|bench/hopping-1h-6m-key.yaml --partitions 4|hopping 1h/6m by record key (info)"
	"TC|bench/tumbling-10s-country.yaml --partitions 4|tumbling 10s by value.country, 8 keys (info)"
)
select_cases

echo "# windowd replay on 1 and 2 cores — $(date -u +%Y-%m-%dT%H:%MZ)"
echo "# commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet HEAD -- . 2>/dev/null || echo ' (working tree has changes)'); $(go version | cut -d' ' -f3-); $(nproc) CPUs ($(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1))"
go build -o "$bin" ./cmd/windowd
in=$(speed_input)
echo "# input $in ($(wc -l <"$in") lines)"

raw=$out/cores-raw.tsv
printf 'rep\tcase\tcores\trecords\twall_s\tuser_s\tsys_s\tpeak_rss_kib\tload1\n' >"$raw"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

for ((r = 1; r <= reps; r++)); do
	for c in "${cases[@]}"; do
		IFS='|' read -r id kind what <<<"$c"
		read -ra argv <<<"$kind"
		for cores in 1 2; do
			load=$(cut -d' ' -f1 /proc/loadavg)
			echo "# rep $r/$reps case $id, $cores core(s), load $load" >&2
			t0=$(date +%s%N)
			GOMAXPROCS=$cores "$timebin" -f '%M %U %S' -o "$tmp/time" "$bin" replay --workers "$cores" --config "${argv[0]}" --input "$in" "${argv[@]:1}" >"$tmp/out-$cores" 2>"$tmp/err" ||
				fail_with_log "case $id on $cores core(s) failed" "$tmp/err"
			t1=$(date +%s%N)
			wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.4f", (b - a) / 1e9}')
			n=$(sed -n 's/.*"summary":{"lines":[0-9]*,"records":\([0-9]*\).*/\1/p' "$tmp/err" | tail -1)
			read -r rss us sy < <(tail -1 "$tmp/time")
			printf '%d\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n' "$r" "$id" "$cores" "${n:-0}" "$wall" "$us" "$sy" "$rss" "$load" >>"$raw"
		done
		if [ "$r" = 1 ]; then
			sort "$tmp/out-1" >"$tmp/s1"
			sort "$tmp/out-2" >"$tmp/s2"
			cmp -s "$tmp/s1" "$tmp/s2" || die "case $id: the panes of 2 cores differ from 1 core's"
			echo "# case $id: $(wc -l <"$tmp/s1") panes, the same on 1 and 2 cores" >&2
		fi
	done
done

echo
echo "# $reps repetition(s), medians; records/s over the whole process (start-up, Pebble"
echo "# open/close included); ratio: 2-core / 1-core records/s in the same repetition, median"
echo "# (min-max); cpu/record ratio: the same for CPU seconds (user + sys) per record"
printf '%-4s %-70s %11s %11s %8s %8s %18s %9s %8s %8s\n' case what "1 core r/s" "2 cores r/s" "cpu s 1" "cpu s 2" "ratio" "cpu/rec" "RSS 1" "RSS 2"
for c in "${cases[@]}"; do
	IFS='|' read -r id kind what <<<"$c"
	rows=$(awk -F'\t' -v id="$id" 'NR > 1 && $2 == id' "$raw")
	rate() { awk -F'\t' -v k="$1" '$3 == k && $5 > 0 {printf "%.0f\n", $4 / $5}' <<<"$rows" | median; }
	cpu() { awk -F'\t' -v k="$1" '$3 == k {printf "%.2f\n", $6 + $7}' <<<"$rows" | median; }
	rss() { awk -F'\t' -v k="$1" '$3 == k {printf "%.0f\n", $8 / 1024}' <<<"$rows" | median; }
	ratios=$(awk -F'\t' '{w[$1 "|" $3] = $5; c[$1 "|" $3] = $6 + $7; reps[$1] = 1}
		END {for (r in reps) if ((r "|1") in w && (r "|2") in w) printf "%.3f %.3f\n", w[r "|1"] / w[r "|2"], c[r "|2"] / c[r "|1"]}' <<<"$rows")
	ratio=$(cut -d' ' -f1 <<<"$ratios" | median)
	range=$(cut -d' ' -f1 <<<"$ratios" | sort -g | awk 'NR == 1 {lo = $1} {hi = $1} END {print lo "-" hi}')
	cpurec=$(cut -d' ' -f2 <<<"$ratios" | median)
	printf '%-4s %-70s %11s %11s %8s %8s %18s %9s %8s %8s\n' "$id" "$what" "$(rate 1)" "$(rate 2)" "$(cpu 1)" "$(cpu 2)" "$ratio ($range)" "$cpurec" "$(rss 1)" "$(rss 2)"
done
echo
t=$(awk -F'\t' 'NR > 1 && $2 == "T"' "$raw" | awk -F'\t' '{w[$1 "|" $3] = $5; reps[$1] = 1} END {for (r in reps) if ((r "|1") in w && (r "|2") in w) printf "%.3f\n", w[r "|1"] / w[r "|2"]}' | median)
echo "# target (#46): case T, 2 cores >= 1.7x 1 core's records/s: $t $(awk -v v="$t" 'BEGIN {if (v == "-") print "n/a"; else if (v + 0 >= 1.7) print "PASS"; else print "MISS"}')"
