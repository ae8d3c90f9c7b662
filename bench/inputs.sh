#!/usr/bin/env bash
# bench/inputs.sh [REPS] — several input topics in one pipeline
# (docs/SEMANTICS.md, Several inputs, Joins), with `windowd replay` on one
# core; docs/PERFORMANCE.md.
#
#   co-aggregation  bench/inputs-two.yaml (count + sum of each of two
#                   inputs) against bench/inputs-one.yaml (count + sum of
#                   one) on the same 1M-record input, whose lines name
#                   topic a or b in turn: records/s, interleaved, and the
#                   median of the per-repetition ratio (#45's target:
#                   >= 0.7);
#   join memory     bench/join-interval.yaml (a left interval join, 10 s)
#                   over N and 10 N records (N = JOIN_N, 200000): peak RSS
#                   of each, and their ratio (#45: flat).
#
# Raw measurements go to bench/out/inputs-raw.tsv.
set -euo pipefail

reps=${1:-5}
case $reps in '' | *[!0-9]* | 0) echo "usage: bench/inputs.sh [REPS>=1]" >&2; exit 2 ;; esac

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
script=inputs.sh
# shellcheck source=bench/lib.sh
. bench/lib.sh
out=bench/out
mkdir -p "$out"
bin=$out/windowd-inputs
timebin=/usr/bin/time
[ -x "$timebin" ] || die "needs GNU time at $timebin"
joinN=${JOIN_N:-200000}

echo "# several inputs — $(date -u +%Y-%m-%dT%H:%MZ)"
echo "# commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet HEAD -- . 2>/dev/null || echo ' (working tree has changes)'); $(go version | cut -d' ' -f3-); $(nproc) CPUs ($(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1))"
go build -o "$bin" ./cmd/windowd
go build -o "$out/gen-inputs" ./bench/gen
in=$out/inputs-1m.jsonl
[ -s "$in" ] || "$out/gen-inputs" -records 1000000 -topics a,b >"$in"
for n in "$joinN" "$((joinN * 10))"; do
	[ -s "$out/inputs-$n.jsonl" ] || "$out/gen-inputs" -records "$n" -topics a,b >"$out/inputs-$n.jsonl"
done

raw=$out/inputs-raw.tsv
printf 'rep\tcase\trecords\twall_s\tcpu_s\tpeak_rss_kib\tload1\n' >"$raw"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

run() { # rep case config input
	local load t0 t1 wall n rss us sy
	load=$(cut -d' ' -f1 /proc/loadavg)
	echo "# rep $1/$reps $2, load $load" >&2
	t0=$(date +%s%N)
	GOMAXPROCS=1 "$timebin" -f '%M %U %S' -o "$tmp/time" "$bin" replay --config "$3" --input "$4" --partitions 4 >/dev/null 2>"$tmp/err" ||
		fail_with_log "$2 failed" "$tmp/err"
	t1=$(date +%s%N)
	wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.4f", (b - a) / 1e9}')
	n=$(sed -n 's/.*"summary":{"lines":[0-9]*,"records":\([0-9]*\).*/\1/p' "$tmp/err" | tail -1)
	read -r rss us sy < <(tail -1 "$tmp/time")
	printf '%d\t%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "${n:-0}" "$wall" "$(awk -v a="$us" -v b="$sy" 'BEGIN {print a + b}')" "$rss" "$load" >>"$raw"
}

for ((r = 1; r <= reps; r++)); do
	if ((r % 2)); then
		run "$r" one bench/inputs-one.yaml "$in"
		run "$r" two bench/inputs-two.yaml "$in"
	else
		run "$r" two bench/inputs-two.yaml "$in"
		run "$r" one bench/inputs-one.yaml "$in"
	fi
	run "$r" join-n bench/join-interval.yaml "$out/inputs-$joinN.jsonl"
	run "$r" join-10n bench/join-interval.yaml "$out/inputs-$((joinN * 10)).jsonl"
done

echo
echo "# $reps repetition(s), medians, one core (GOMAXPROCS=1), --partitions 4"
printf '%-9s %10s %12s %8s %9s\n' case records "records/s" "cpu s" "RSS MiB"
for c in one two join-n join-10n; do
	rows=$(awk -F'\t' -v c="$c" 'NR > 1 && $2 == c' "$raw")
	printf '%-9s %10s %12s %8s %9s\n' "$c" "$(cut -f3 <<<"$rows" | median)" \
		"$(awk -F'\t' '$4 > 0 {printf "%.0f\n", $3 / $4}' <<<"$rows" | median)" \
		"$(cut -f5 <<<"$rows" | median)" "$(awk -F'\t' '{printf "%.1f\n", $6 / 1024}' <<<"$rows" | median)"
done
ratio() { # case-a case-b column: the median of a/b per repetition
	awk -F'\t' -v a="$1" -v b="$2" -v col="$3" 'NR > 1 {v[$1 "|" $2] = (col == "rate") ? $3 / $4 : $6; reps[$1] = 1}
		END {for (r in reps) if ((r "|" a) in v && (r "|" b) in v) printf "%.3f\n", v[r "|" a] / v[r "|" b]}' "$raw" | median
}
co=$(ratio two one rate)
mem=$(ratio join-10n join-n rss)
echo
echo "# co-aggregation: two inputs / one input records/s, median of the repetitions: $co (target >= 0.7: $(awk -v v="$co" 'BEGIN {print (v + 0 >= 0.7) ? "PASS" : "MISS"}'))"
echo "# interval join: peak RSS of 10x the records / 1x: $mem (flat: <= 1.25: $(awk -v v="$mem" 'BEGIN {print (v + 0 <= 1.25) ? "PASS" : "MISS"}'))"
