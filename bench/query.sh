#!/usr/bin/env bash
# bench/query.sh [REPS] — the query API's cost (docs/OPERATIONS.md, Querying
# windows): `windowd run` drains a preloaded topic with and without 500
# point queries per second, and the queries' latency: while the drain runs
# with 1M windows or more open (its last third), and after it.
#
# Once: build windowd, bench/gen and bench/querier; preload a 4-partition
# topic with RECORDS (3M) records of KEYS (1.2M) keys at 20,000 records per
# second of event time (150 s): tumbling 24 h by record key, so no window
# closes and every key's window stays open (about 1.1M). Then REPS
# repetitions (default 3) of two runs, alternating which goes first:
#   plain  `windowd run`, fresh group and state: seconds from exec until the
#          first commit cycle that completed after every record was in
#          (as bench/e2e.sh's "committed");
#   load   the same, with bench/querier (niced: it shares the machine)
#          asking /api/windows for random keys of the input at RATE (500)
#          per second from the moment the HTTP listener is up; its
#          latencies during the drain once WINDOWS (1M) windows are open,
#          then REST (10) s more with the drained state (every window
#          open).
# Prints the medians: drain seconds of both, their ratio per repetition and
# its median (target: load / plain <= 1.10), and the queries' p50 and p99
# during the drain and at rest.
#
# Needs: a broker from `bash scripts/kafka-local.sh start`, kcat, curl, jq,
# go. Environment: RECORDS, KEYS, RATE, REST, WINDOWD_KAFKA_PORT (9092),
# BIN (a windowd binary to run instead of building this tree's: an older
# build's plain drains for comparison).
# Raw figures: bench/out/query-raw.tsv.
set -euo pipefail

reps=${1:-3}
case $reps in '' | *[!0-9]* | 0) echo "usage: bench/query.sh [REPS>=1]" >&2; exit 2 ;; esac
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
script=query.sh
# shellcheck source=bench/lib.sh
. bench/lib.sh
out=bench/out
mkdir -p "$out"
records=${RECORDS:-3000000}
keys=${KEYS:-1200000}
rate=${RATE:-500}
rest=${REST:-10}
windows_at=${WINDOWS:-1000000}
port=${WINDOWD_KAFKA_PORT:-9092}
broker=127.0.0.1:$port
partitions=4
need_broker

tmp=$(mktemp -d)
wpid="" qpid=""
topics=()
cleanup() {
	[ -z "$qpid" ] || kill -TERM "$qpid" 2>/dev/null || true
	[ -z "$wpid" ] || { kill -TERM "$wpid" 2>/dev/null || true; wait "$wpid" 2>/dev/null || true; }
	drop_topics "${topics[@]}"
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
since() { awk -v a="$1" -v b="$(now)" 'BEGIN {printf "%.3f\n", b - a}'; }
tck=$(getconf CLK_TCK)
# CPU seconds (user + sys) of process $1 so far
cpu() { awk -v t="$tck" '{sub(/^.*\) /, ""); printf "%.2f\n", ($12 + $13) / t}' "/proc/$1/stat" 2>/dev/null || echo 0; }

bin=${BIN:-}
if [ -z "$bin" ]; then
	bin=$tmp/windowd
	go build -o "$bin" ./cmd/windowd
fi
go build -o "$tmp/gen" ./bench/gen
go build -o "$tmp/querier" ./bench/querier
topic=bench-query-$(date +%s)
topics+=("$topic")
echo "# windowd query benchmark — $(date -u +%Y-%m-%dT%H:%MZ); commit $(git rev-parse --short HEAD 2>/dev/null || echo '?'); $(nproc) CPUs"
split_input "$tmp/gen" "$tmp" p "$keys" "$partitions" -records "$records" -rate 20000
cut -f1 "$tmp"/p*.tsv | sort -u | shuf -n 20000 --random-source=<(yes) >"$tmp/keys.txt"
bash scripts/kafka-local.sh topics --create --topic "$topic" --partitions $partitions --replication-factor 1 \
	--config retention.ms=-1 >/dev/null
produce_input "$broker" "$tmp" p "$topic" "$partitions"
[ "$(end_offsets "$broker" "$topic" "$partitions")" = "$records" ] || die "preloading $topic failed"

write_config() { # file state group output
	cat >"$1" <<YAML
kafka: {brokers: ["$broker"]}
state: {dir: "$2"}
http: {listen: "127.0.0.1:0"}
shutdown_grace: 60s
pipelines:
  - name: bench
    input: {topic: $topic, group: $3}
    timestamp: {field: ts, format: unix_ms}
    watermark: {strategy: bounded_out_of_orderness, max_delay: 2s}
    window: {type: tumbling, size: 24h}
    aggregates:
      - {name: n, op: count}
      - {name: total, op: sum, field: x}
    output: {topic: $4}
    dead_letter_topic: $4-dlq
YAML
}

# run REP MODE: one drain; prints "drain_s cpu_s querier_cpu_s open_windows
# [drain stats] [rest stats]" (the CPU seconds to the drain's commit).
run() {
	local r=$1 mode=$2 st=$tmp/state-$1-$2 grp=$topic-g$1-$2 wout=$topic-o$1-$2 cfg=$tmp/w-$1-$2.yaml
	local log=$out/query-windowd.log m=$tmp/metrics t0 in commits c0="" drain="" addr qout=$tmp/q-$1-$2.txt wcpu qcpu full=""
	topics+=("$wout" "$wout-dlq" "$grp-bench-changelog")
	mkdir -p "$st"
	write_config "$cfg" "$st" "$grp" "$wout"
	t0=$(now)
	"$bin" run --config "$cfg" >/dev/null 2>"$log" &
	wpid=$!
	addr=$(http_addr "$log" "$wpid") || fail_with_log "windowd did not start its HTTP listener" "$log"
	if [ "$mode" = load ]; then
		# The load generator runs niced: it shares the two CPUs with the
		# system under test and should take what windowd leaves.
		nice -n 19 "$tmp/querier" -addr "$addr" -pipeline bench -keys "$tmp/keys.txt" -rate "$rate" >"$qout" &
		qpid=$!
	fi
	while :; do
		kill -0 "$wpid" 2>/dev/null || fail_with_log "windowd exited" "$log"
		if curl -sf "http://$addr/metrics" >"$m"; then
			in=$(msum windowd_records_in_total "$m")
			commits=$(msum windowd_commit_latency_seconds_count "$m")
			# From here the drain runs with WINDOWS open: the querier's
			# figures start over (the first line is before).
			if [ -n "$qpid" ] && [ -z "$full" ] && [ "$(msum windowd_open_windows "$m")" -ge "$windows_at" ]; then
				full=1
				kill -USR1 "$qpid"
			fi
			if [ -z "$c0" ] && [ "$in" -ge "$records" ]; then c0=$commits; fi
			if [ -n "$c0" ] && [ "$commits" -gt "$c0" ]; then
				drain=$(since "$t0") wcpu=$(cpu "$wpid") qcpu=0
				[ -z "$qpid" ] || qcpu=$(cpu "$qpid")
				break
			fi
		fi
		awk -v a="$t0" -v b="$(now)" 'BEGIN {exit !(b - a > 600)}' && fail_with_log "no drain within 600 s" "$log"
		sleep 0.1
	done
	local open
	open=$(msum windowd_open_windows "$m")
	if [ "$mode" = load ]; then
		[ -n "$full" ] || die "the drain ended with fewer than $windows_at windows open"
		kill -USR1 "$qpid"
		sleep "$rest"
		kill -TERM "$qpid"
		wait "$qpid" || true
		qpid=""
	fi
	kill -TERM "$wpid"
	wait "$wpid" || true
	wpid=""
	if [ "$mode" = load ]; then
		echo "$drain $wcpu $qcpu $open $(sed -n 2p "$qout") $(sed -n 3p "$qout")"
	else
		echo "$drain $wcpu $qcpu $open"
	fi
}

raw=$out/query-raw.tsv
printf 'rep\tplain_s\tload_s\tratio\tplain_cpu\tload_cpu\tcpu_ratio\tquerier_cpu\topen\tdrain_n\tdrain_ok\tdrain_503\tdrain_other\tdrain_p50\tdrain_p99\tdrain_p999\tdrain_max\trest_n\trest_ok\trest_503\trest_other\trest_p50\trest_p99\trest_p999\trest_max\n' >"$raw"
for ((r = 1; r <= reps; r++)); do
	if ((r % 2)); then
		read -r plain pcpu _ _ < <(run "$r" plain)
		read -r load lcpu qcpu open q < <(run "$r" load)
	else
		read -r load lcpu qcpu open q < <(run "$r" load)
		read -r plain pcpu _ _ < <(run "$r" plain)
	fi
	ratio=$(awk -v a="$load" -v b="$plain" 'BEGIN {printf "%.3f", a / b}')
	cratio=$(awk -v a="$lcpu" -v b="$pcpu" 'BEGIN {printf "%.3f", a / b}')
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$r" "$plain" "$load" "$ratio" "$pcpu" "$lcpu" "$cratio" "$qcpu" "$open" "$(tr ' ' '\t' <<<"$q")" >>"$raw"
	echo "# rep $r: drain ${plain}s plain, ${load}s with $rate queries/s (ratio $ratio); windowd CPU ${pcpu}s, ${lcpu}s (ratio $cratio), the querier's ${qcpu}s; $open windows open; queries during the drain with $windows_at+ windows open / at rest: $q" >&2
done
printf '%-48s %s\n' \
	"records; open windows after the drain" "$records; $(med_col "$raw" open)" \
	"drain seconds, plain (median)" "$(med_col "$raw" plain_s)" \
	"drain seconds, $rate queries/s (median)" "$(med_col "$raw" load_s)" \
	"ratio load/plain per repetition; median" "$(awk -F'\t' 'NR > 1 {printf "%s ", $4}' "$raw"); $(med_col "$raw" ratio)" \
	"windowd CPU s to the drain: plain / load (median)" "$(med_col "$raw" plain_cpu) / $(med_col "$raw" load_cpu) (ratio $(med_col "$raw" cpu_ratio)); the querier's $(med_col "$raw" querier_cpu)" \
	"queries during the drain, $windows_at+ windows open: p50 / p99 ms" "$(med_col "$raw" drain_p50) / $(med_col "$raw" drain_p99)" \
	"queries at rest, every window open: p50 / p99 ms" "$(med_col "$raw" rest_p50) / $(med_col "$raw" rest_p99)" \
	"queries answered 200 / 503 / other (all runs)" "$(awk -F'\t' 'NR > 1 {o += $11 + $19; u += $12 + $20; x += $13 + $21} END {print o " / " u " / " x}' "$raw")" \
	"target: ratio <= 1.10" "$(awk -v r="$(med_col "$raw" ratio)" 'BEGIN {print (r <= 1.10) ? "PASS" : "MISS"}')"
