#!/usr/bin/env bash
# bench/latency.sh [REPS] — the latency from a record to its read_committed
# pane for `windowd run` on a live input (see bench/README.md).
#
#   bash bench/latency.sh                          # 3 repetitions, exactly_once, windowd's default cadence
#   COMMIT_INTERVAL=1s bash bench/latency.sh 2
#   WINDOWD_BIN=/tmp/windowd-old bash bench/latency.sh   # another build
#
# Per repetition: fresh 4-partition input and output topics, a fresh state
# dir, `windowd run` with tumbling WINDOW_S (10) s windows by record key,
# count + sum of x, timestamp {field: ts, format: unix_ms}, watermark
# bounded_out_of_orderness max_delay 2s, allowed_lateness 0s, delivery
# DELIVERY, commit_interval COMMIT_INTERVAL (unset: windowd's default for
# the delivery). Then bench/latency produces RATE records a second for
# DURATION seconds, event time = the wall clock at production, and reads the
# output read_committed: a pane's latency is its arrival minus (window end +
# max_delay), the moment the window could close (bench/latency/main.go says
# exactly what is counted). windowd's CPU seconds over the run (exec to the
# end of the measurement, start-up included; /proc) are reported too.
# windowd is then stopped with SIGTERM (a nonzero exit fails the run) and
# the repetition's topics are deleted. Prints one line per repetition and
# the medians.
#
# All the panes of a window close at once, so the panes counted come from
# few closings, about (DURATION - WARMUP - 2) / WINDOW_S per run (2-3 with
# the defaults); under exactly_once a closing's panes become visible together
# (one transaction), so p50 = p99 within a run and each run samples where
# the closings fell in the commit cycle. To compare commit intervals take
# more closings: WINDOW_S=1 (about 28 a run), more repetitions. bench/latency
# prints the closings and their first and last panes' latencies on stderr.
#
# Needs: a broker from `bash scripts/kafka-local.sh start` (never started or
# stopped here), go.
#
# Environment:
#   DELIVERY=exactly_once  COMMIT_INTERVAL=  (unset: windowd's default)
#   RATE=20000 DURATION=40 WARMUP=10 KEYS=10000 WINDOW_S=10
#   WINDOWD_BIN=           a windowd binary (default: go build ./cmd/windowd)
#   WINDOWD_KAFKA_PORT=9092
set -euo pipefail

reps=${1:-${REPS:-3}}
case $reps in '' | *[!0-9]* | 0) echo "usage: bench/latency.sh [REPS>=1]" >&2; exit 2 ;; esac
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
script=latency.sh
# shellcheck source=bench/lib.sh
. bench/lib.sh
delivery=${DELIVERY:-exactly_once}
interval=${COMMIT_INTERVAL:-}
rate=${RATE:-20000}
duration=${DURATION:-40}
warmup=${WARMUP:-10}
keys=${KEYS:-10000}
window_s=${WINDOW_S:-10}
broker=127.0.0.1:${WINDOWD_KAFKA_PORT:-9092}
tck=$(getconf CLK_TCK)
case $delivery in at_least_once | exactly_once) ;; *) die "DELIVERY must be at_least_once or exactly_once" ;; esac
bash scripts/kafka-local.sh status >/dev/null 2>&1 || die "no broker: bash scripts/kafka-local.sh start"

tmp=$(mktemp -d)
pid=""
topics=()
cleanup() {
	[ -z "$pid" ] || kill -KILL "$pid" 2>/dev/null || true
	for t in "${topics[@]}"; do
		bash scripts/kafka-local.sh topics --delete --if-exists --topic "$t" >/dev/null 2>&1 || true
	done
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

bin=${WINDOWD_BIN:-}
if [ -z "$bin" ]; then
	bin=$tmp/windowd
	go build -o "$bin" ./cmd/windowd
fi
go build -o "$tmp/latency" ./bench/latency
echo "# windowd record-to-pane latency — $(date -u +%Y-%m-%dT%H:%MZ); $bin"
echo "# $delivery, commit_interval ${interval:-default}; $rate records/s for ${duration}s (first ${warmup}s not counted), $keys keys, 4 partitions; tumbling ${window_s}s by record key, max_delay 2s"
printf 'rep\tpanes\tp50_ms\tp90_ms\tp99_ms\tmax_ms\tproduced_per_s\tcpu_s\n' >"$tmp/raw"
for ((r = 1; r <= reps; r++)); do
	t=windowd-latency-$(date +%s)-$RANDOM
	topics+=("$t" "$t-out" "$t-out-dlq" "$t-g-bench-changelog")
	for x in "$t" "$t-out"; do
		bash scripts/kafka-local.sh topics --create --topic "$x" --partitions 4 --replication-factor 1 >/dev/null
	done
	{
		echo "kafka: {brokers: [\"$broker\"]}"
		echo "state: {dir: \"$tmp/state-$r\"}"
		echo "http: {listen: \"127.0.0.1:0\"}"
		echo "pipelines:"
		echo "  - name: bench"
		echo "    input: {topic: $t, group: $t-g}"
		echo "    timestamp: {field: ts, format: unix_ms}"
		echo "    watermark: {strategy: bounded_out_of_orderness, max_delay: 2s}"
		echo "    window: {type: tumbling, size: ${window_s}s}"
		echo "    allowed_lateness: 0s"
		echo "    aggregates: [{name: n, op: count}, {name: total, op: sum, field: x}]"
		echo "    output: {topic: $t-out}"
		echo "    dead_letter_topic: $t-out-dlq"
		echo "    delivery: $delivery"
		[ -z "$interval" ] || echo "    commit_interval: $interval"
	} >"$tmp/w.yaml"
	"$bin" run --config "$tmp/w.yaml" >"$tmp/windowd.log" 2>&1 &
	pid=$!
	line=$("$tmp/latency" -brokers "$broker" -input "$t" -output "$t-out" -rate "$rate" -duration "${duration}s" \
		-warmup "${warmup}s" -keys "$keys" -delay-ms 2000 -window-ms $((window_s * 1000))) ||
		fail_with_log "bench/latency failed" "$tmp/windowd.log"
	kill -0 "$pid" 2>/dev/null || fail_with_log "windowd exited during the measurement" "$tmp/windowd.log"
	cpu=$(awk -v t="$tck" '{sub(/^.*\) /, ""); printf "%.2f", ($12 + $13) / t}' "/proc/$pid/stat")
	kill -TERM "$pid"
	rc=0
	wait "$pid" 2>/dev/null || rc=$?
	pid=""
	[ "$rc" = 0 ] || fail_with_log "windowd exited with status $rc after SIGTERM" "$tmp/windowd.log"
	for x in "${topics[@]}"; do
		bash scripts/kafka-local.sh topics --delete --if-exists --topic "$x" >/dev/null 2>&1 || true
	done
	topics=()
	printf '%s\t%s\t%s\n' "$r" "$line" "$cpu" >>"$tmp/raw"
	echo "# rep $r/$reps: panes, p50, p90, p99, max ms, produced/s, windowd CPU s: $(tr '\t' ' ' <<<"$line") $cpu"
done
echo "# medians of $reps: p50 $(med_col "$tmp/raw" p50_ms) ms, p90 $(med_col "$tmp/raw" p90_ms) ms, p99 $(med_col "$tmp/raw" p99_ms) ms, windowd CPU $(med_col "$tmp/raw" cpu_s) s"
