#!/usr/bin/env bash
# bench/pair.sh ROUNDS BIN_A BIN_B [CONFIG] — CPU seconds of two windowd
# binaries replaying the same input, run at the same time, one on each of
# CPUs 0 and 1 (taskset), the CPUs swapped every round.
#
# On a shared machine the speed of one core drifts by a factor of up to two
# within a minute, so runs of A and B one after the other differ by more
# than most changes do. Run side by side, both meet the same drift; what
# is left is the asymmetry of the two CPUs, which swapping cancels over
# rounds. Calibrate with the same binary twice (BIN_B a copy of BIN_A): the
# spread of that A/A ratio is the method's noise.
#
# Prints each round's CPU seconds (user + sys, GOMAXPROCS=1) and A/B, then
# the median of A/B (above 1: B is faster) and how many rounds B won.
#
# Environment: INPUT=FILE (default bench/out/rss-1m-k10000.jsonl, generated
# when missing, as for speed.sh). CONFIG defaults to bench/tumbling.yaml.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
script=pair.sh
# shellcheck source=bench/lib.sh
. bench/lib.sh
[ $# -ge 3 ] || { echo "usage: bench/pair.sh ROUNDS BIN_A BIN_B [CONFIG]" >&2; exit 2; }
rounds=$1 a=$2 b=$3 cfg=${4:-bench/tumbling.yaml}
case $rounds in '' | *[!0-9]* | 0) die "ROUNDS must be a number >= 1" ;; esac
in=$(speed_input)
[ "$(nproc)" -ge 2 ] || die "needs two CPUs"
command -v taskset >/dev/null || die "needs taskset (util-linux)"
[ -x /usr/bin/time ] || die "needs GNU time at /usr/bin/time"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

run() { # BIN NAME CPU
	GOMAXPROCS=1 taskset -c "$3" /usr/bin/time -o "$tmp/$2" -f '%U %S' \
		"$1" replay --config "$cfg" --input "$in" >/dev/null 2>"$tmp/$2.err" ||
		fail_with_log "$1 failed" "$tmp/$2.err"
}
for ((r = 0; r < rounds; r++)); do
	ca=$((r % 2))
	run "$a" a "$ca" &
	pa=$!
	run "$b" b $((1 - ca)) &
	pb=$!
	st=0
	wait "$pa" || st=1
	wait "$pb" || st=1
	[ "$st" = 0 ] || exit 1
	read -r ua sa <"$tmp/a"
	read -r ub sb <"$tmp/b"
	awk -v r=$((r + 1)) -v ca="$ca" -v x="$ua" -v y="$sa" -v u="$ub" -v v="$sb" \
		'BEGIN {printf "round %d  A (cpu %d) %.2f s  B (cpu %d) %.2f s  A/B %.3f\n", r, ca, x + y, 1 - ca, u + v, (x + y) / (u + v)}'
done | tee "$tmp/rounds"
ratios=$(awk '{print $NF}' "$tmp/rounds")
echo "# median A/B $(median <<<"$ratios") over $rounds rounds; B faster in $(awk '$1 > 1' <<<"$ratios" | wc -l)"
