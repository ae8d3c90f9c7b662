#!/usr/bin/env bash
# bench/engine-ratio.sh ROUNDS SHAPE_A SHAPE_B — the records/s of
# BenchmarkEngine's SHAPE_B over SHAPE_A's, measured as pairs: each round
# is one process that runs SHAPE_A once and then SHAPE_B once
# (-benchtime 1x, -cpu 1), so the two of a pair are a few seconds apart.
#
# On a shared machine speeds drift by up to 2x within minutes: runs of A
# and then of B (go test -count) compare different minutes, pairs compare
# neighbours. Prints each round's ns/record of A and B and B's records/s
# over A's, then the median ratio and its quartiles.
#
#   bash bench/engine-ratio.sh 15 tumbling-10s-key sliding-1h-key   # issue #43: >= 0.5
#
# Environment: INPUT=FILE (default bench/out/rss-1m-k10000.jsonl,
# generated when missing, as for speed.sh); TESTBIN=FILE a replay test
# binary to use instead of building one (go test -c ./replay), to compare
# builds.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
script=engine-ratio.sh
# shellcheck source=bench/lib.sh
. bench/lib.sh
[ $# -eq 3 ] || { echo "usage: bench/engine-ratio.sh ROUNDS SHAPE_A SHAPE_B" >&2; exit 2; }
rounds=$1 a=$2 b=$3
case $rounds in '' | *[!0-9]* | 0) die "ROUNDS must be a number >= 1" ;; esac
in=$(cd "$root" && realpath "$(speed_input)")
bin=${TESTBIN:-}
if [ -z "$bin" ]; then
	bin=bench/out/replay.test
	go test -c -o "$bin" ./replay || die "building the replay test binary failed"
fi
bin=$(realpath "$bin")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# ns_per_record SHAPE: the shape's ns/record in this round's output.
ns_per_record() {
	awk -v s="BenchmarkEngine/$1" '$1 == s { for (i = 2; i < NF; i++) if ($(i+1) == "ns/record") print $i }' "$tmp/out"
}

printf 'round\t%s ns/record\t%s ns/record\t%s/%s records/s\n' "$a" "$b" "$b" "$a"
for ((r = 1; r <= rounds; r++)); do
	# go test runs a package's benchmarks in its directory (config paths).
	(cd replay && WINDOWD_BENCH_INPUT=$in "$bin" -test.run '^$' \
		-test.bench "BenchmarkEngine/^($a|$b)\$" -test.cpu 1 -test.benchtime 1x) >"$tmp/out" 2>&1 ||
		fail_with_log "round $r failed" "$tmp/out"
	na=$(ns_per_record "$a") nb=$(ns_per_record "$b")
	[ -n "$na" ] && [ -n "$nb" ] || fail_with_log "round $r: no ns/record for $a or $b (shape names: replay/engine_bench_test.go)" "$tmp/out"
	awk -v r="$r" -v x="$na" -v y="$nb" 'BEGIN { printf "%d\t%s\t%s\t%.3f\n", r, x, y, x / y }' | tee -a "$tmp/rows"
done
sort -t$'\t' -k4,4g "$tmp/rows" | awk -F'\t' '{ v[NR] = $4 }
	END {
		m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
		printf "median %.3f (quartiles %.3f, %.3f) of %d pairs\n", m, v[int((NR + 3) / 4)], v[int((3 * NR + 3) / 4)], NR
	}'
