#!/usr/bin/env bash
# Run every fuzz target of windowd in turn for a fixed time each.
#
#   scripts/fuzz.sh [seconds-per-target]     default 10 (FuzzReplayLines: 4x,
#                                            FuzzReplayInvalidLine: 2x)
#
# Targets (see docs/FUZZING.md): FuzzParse ./config/, FuzzDecode ./source/,
# FuzzSchemaDecode ./schema/,
# FuzzReplayLines, FuzzReplayInvalidLine and FuzzReplayConfig ./replay/. Prints one summary line per target and exits
# non-zero if any target fails (a failing input, a build error, a crash of the
# fuzzing process). A failing input is written by go test to
# <pkg>/testdata/fuzz/<Target>/<hash>; it then runs with `go test ./<pkg>/`
# as a regression test.
#
# Environment (all optional):
#   FUZZ_TARGETS        space-separated subset of target names (default: all)
#   FUZZ_PARALLEL       fuzzing workers per target (default: go test's, GOMAXPROCS)
#   FUZZ_MINIMIZE_TIME  -fuzzminimizetime (default 0: no minimizing). go test's
#                       own default (60s) would spend a short budget minimizing
#                       the first new inputs of FuzzReplayLines (a few hundred
#                       execs/s); with 0, new inputs and failing inputs are kept
#                       as found.
#   FUZZ_LOG_DIR        keep each target's full go test output here (default: a
#                       temporary directory, removed unless a target failed)
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2

secs=${1:-10}
if ! [[ $secs =~ ^[1-9][0-9]*$ ]]; then
	echo "usage: $0 [seconds-per-target]  (a positive integer, default 10)" >&2
	exit 2
fi

all_targets=(
	"FuzzParse ./config/"
	"FuzzDecode ./source/"
	"FuzzSchemaDecode ./schema/"
	# Each execution replays a small file through Pebble (a few hundred
	# execs/s), and gathering baseline coverage over its corpus alone can take
	# 10s: it gets four times the budget.
	"FuzzReplayLines ./replay/ 4"
	# Properties over whole inputs and configurations (two replays per
	# pipeline per input: twice the budget).
	"FuzzReplayInvalidLine ./replay/ 2"
	"FuzzReplayConfig ./replay/"
)

log_dir=${FUZZ_LOG_DIR:-}
keep_logs=1
if [ -z "$log_dir" ]; then
	log_dir=$(mktemp -d "${TMPDIR:-/tmp}/windowd-fuzz.XXXXXX")
	keep_logs=0
fi
mkdir -p "$log_dir"

extra=(-fuzzminimizetime "${FUZZ_MINIMIZE_TIME:-0}")
if [ -n "${FUZZ_PARALLEL:-}" ]; then
	extra+=(-parallel "$FUZZ_PARALLEL")
fi

# deadline_race LOG: true when a failed run's only complaint is Go's fuzzing
# coordinator reporting its own -fuzztime deadline: the target's FAIL block says
# "context deadline exceeded" and nothing else, and no failing input, panic or
# t.Error output was written.
deadline_race() {
	local log=$1
	grep -qE '^--- FAIL: ' "$log" || return 1
	grep -qE 'Failing input written|panic:|_test\.go:[0-9]+:' "$log" && return 1
	local msgs
	msgs=$(sed -n '/^--- FAIL: /,/^FAIL$/p' "$log" | grep -vE '^--- FAIL: |^FAIL$|^[[:space:]]*$')
	[ "$(sed -E 's/^[[:space:]]+//' <<<"$msgs")" = "context deadline exceeded" ]
}

failed=0
ran=0
for entry in "${all_targets[@]}"; do
	read -r target pkg factor <<<"$entry"
	budget=$((secs * ${factor:-1}))
	if [ -n "${FUZZ_TARGETS:-}" ] && ! [[ " $FUZZ_TARGETS " == *" $target "* ]]; then
		continue
	fi
	ran=$((ran + 1))
	log="$log_dir/$target.log"
	start=$(date +%s)
	flaked=""
	for attempt in 1 2; do
		go test -run '^$' -fuzz "^${target}\$" -fuzztime "${budget}s" "${extra[@]}" "$pkg" >"$log" 2>&1
		rc=$?
		if [ $rc -eq 0 ] || ! deadline_race "$log"; then
			break
		fi
		# Go 1.26's fuzzing coordinator can report its own -fuzztime
		# deadline as a failure (go.dev/issue/75804, fixed in Go 1.27):
		# "context deadline exceeded", no failing input, no panic. That is
		# not a finding; run the target once more, and if the race hits
		# again report it without failing.
		cp "$log" "$log.attempt$attempt"
		flaked="go.dev/issue/75804 deadline race on attempt $attempt"
	done
	if [ $rc -ne 0 ] && deadline_race "$log"; then
		rc=0
	fi
	took=$(($(date +%s) - start))
	# The last progress line: "fuzz: elapsed: 10s, execs: 12345 (1234/sec), new interesting: 3 (total: 60)"
	last=$(grep -E '^fuzz: elapsed: .*execs: ' "$log" | tail -n 1)
	execs=$(sed -nE 's/.*execs: ([0-9]+).*/\1/p' <<<"$last")
	newi=$(sed -nE 's/.*new interesting: ([0-9]+) \(total: ([0-9]+)\).*/\1 new, corpus \2/p' <<<"$last")
	if [ -z "$last" ]; then
		# The budget ended while the corpus (seeds and the GOCACHE/fuzz
		# cache) was still being run for baseline coverage.
		newi=$(grep -E 'gathering baseline coverage: ' "$log" | tail -n 1 | sed -nE 's/.*coverage: ([0-9]+\/[0-9]+).*/none; baseline coverage only: \1 corpus entries/p')
		execs=0
	fi
	if [ $rc -eq 0 ]; then
		printf '%-16s %-10s ok    %3ss  execs %-9s interesting: %s%s\n' "$target" "$pkg" "$took" "${execs:-?}" "${newi:-?}" \
			"${flaked:+  (retried: $flaked)}"
	else
		failed=1
		input=$(sed -nE 's/.*Failing input written to (.*)$/\1/p' "$log" | tail -n 1)
		printf '%-16s %-10s FAIL  %3ss  execs %-9s %s (log: %s)\n' "$target" "$pkg" "$took" "${execs:-?}" \
			"${input:+failing input ${pkg%/}/${input}}" "$log"
		# Show why: the failure message and the first frames.
		grep -vE '^fuzz: elapsed: ' "$log" | head -n 40 | sed 's/^/    /'
	fi
done

if [ $ran -eq 0 ]; then
	echo "no target matches FUZZ_TARGETS=${FUZZ_TARGETS:-}" >&2
	exit 2
fi
if [ $failed -eq 0 ] && [ $keep_logs -eq 0 ]; then
	rm -rf "$log_dir"
fi
exit $failed
