#!/usr/bin/env bash
# bench/e2e.sh [REPS] — end-to-end throughput and peak RSS of `windowd run`
# against the local Kafka broker, next to a bare franz-go consume loop over
# the same topic (the consume ceiling), in the same run (see bench/README.md).
#
# Once: build windowd, bench/gen and bench/consume; create a 4-partition
# input topic (unique name) and preload RECORDS records of bench/gen with
# kcat (Kafka key = gen's key, partition = key mod 4, as gen says).
# Then REPS repetitions (default 3), each of two runs over that topic, in
# alternating order (odd repetitions consume first, even ones windowd first),
# and a replay run:
#   consume  bench/consume -topic T -records N -group <fresh>: a consumer
#            group member with read_committed fetches, as windowd; time from
#            exec to exit (after the N-th record), peak RSS and CPU seconds
#            (/usr/bin/time);
#   windowd  `windowd run`, fresh group, empty state dir, tumbling WINDOW_S
#            (10 s), count + sum of x, keyed by KEY; time from exec until
#            windowd_records_in_total reaches N ("in"), until the output
#            topic holds every pane the input closes ("out"), and until the
#            first commit cycle that completed after "in" was seen
#            ("committed": output, state and offsets of all N records are
#            durable); peak RSS (/usr/bin/time), CPU seconds at the commit
#            (/proc/PID/stat), changelog records and bytes, Go heap bytes
#            and objects allocated (/metrics); then SIGTERM;
#   produce  (PRODUCE=1, the default) bench/produce: a bare franz-go producer
#            of the panes windowd writes (built beforehand from `windowd
#            replay`'s output of the same input and pipeline, the first
#            "expected" of them, as windowd's sink builds them, produced with
#            its producer settings) to a fresh topic of as many partitions:
#            its seconds and CPU, and the broker's CPU to take them. With the
#            consume loop's run (and replay's) this bounds the target on this
#            machine: at the target rate windowd has consume seconds / TARGET,
#            in which the machine's CPUs give nproc times that many CPU
#            seconds, while fetching the input, the broker serving it,
#            producing the panes and the broker taking them (and decoding and
#            the engine, replay's CPU) need what they needed alone (the
#            summary's "bound" lines);
#   replay   (REPLAY=1, the default; always last) `windowd replay` of the
#            same generated records from a file, same pipeline, one worker
#            (as `run` has one engine): the engine
#            and JSON decoding without Kafka, for where windowd's time goes.
# Each run also records the broker's CPU seconds (from /proc of the pid that
# `kafka-local.sh status` prints). It prints medians, the ratio
# windowd/consume of records/s per repetition (to "committed" and to "in")
# and its median, and whether the median (to "committed") meets TARGET.
#
# Needs: a broker from `bash scripts/kafka-local.sh start` (this script never
# starts or stops one; its `topics` subcommand creates and deletes topics),
# kcat, curl, jq, go, GNU time (/usr/bin/time).
#
# Environment:
#   RECORDS=1000000 KEYS=10000   input size (gen: 1000 records/s of event time)
#   KEY=record                   group key: record (Kafka key = value.user),
#                                user (key.field: user), country (key.field:
#                                country, 8 keys; each lives in one partition)
#   WINDOW_S=10                  tumbling window size in seconds (3600: no
#                                window closes within the 1000 s of event time
#                                of 1M records, so no panes: isolates their cost)
#   COMMIT_INTERVAL=1s           the pipeline's commit_interval
#   DELIVERY=at_least_once       the pipeline's delivery (exactly_once: one
#                                transaction per commit cycle; the output's
#                                end offsets then include transaction markers)
#   REPARTITION=0                1: repartition: true (KEY user or country):
#                                two stages through the internal topic; the
#                                summary adds the marker records written
#                                (per second per internal partition)
#   CACHE_BYTES=64MiB            state.cache_bytes
#   COMPRESSION=lz4              kafka.compression (windowd's default), also
#                                the bare producer's codec
#   CONSUME_GROUP=1              0: the consume loop uses no group (direct
#                                partition consumption)
#   TARGET=0.70                  pass when median windowd/consume >= TARGET
#   POLL=0.1                     seconds between /metrics polls
#   REPLAY=1                     0: leave out the replay reference run
#   PRODUCE=1                    0: leave out the bare producer run
#   WINDOWD_KAFKA_PORT=9092      broker port on 127.0.0.1 (as scripts/kafka-local.sh)
#   KEEP_TOPICS=1                do not delete the topics afterwards
#
# Raw measurements: bench/out/e2e-raw.tsv (one line per repetition); the log
# of the last windowd run: bench/out/e2e-windowd.log.
set -euo pipefail

reps=${1:-3}
case $reps in '' | *[!0-9]* | 0) echo "usage: bench/e2e.sh [REPS>=1]" >&2; exit 2 ;; esac

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
script=e2e.sh
# shellcheck source=bench/lib.sh
. bench/lib.sh
out=bench/out
mkdir -p "$out"

records=${RECORDS:-1000000}
keys=${KEYS:-10000}
key=${KEY:-record}
window_s=${WINDOW_S:-10}
case $window_s in '' | *[!0-9]* | 0) echo "e2e.sh: WINDOW_S must be a whole number of seconds" >&2; exit 2 ;; esac
partitions=4
commit_interval=${COMMIT_INTERVAL:-1s}
delivery=${DELIVERY:-at_least_once}
case $delivery in at_least_once | exactly_once) ;; *) echo "e2e.sh: DELIVERY must be at_least_once or exactly_once" >&2; exit 2 ;; esac
cache_bytes=${CACHE_BYTES:-64MiB}
compression=${COMPRESSION:-lz4}
case $compression in lz4 | snappy | zstd | gzip | none) ;; *) echo "e2e.sh: COMPRESSION must be lz4, snappy, zstd, gzip or none" >&2; exit 2 ;; esac
consume_group=${CONSUME_GROUP:-1}
target=${TARGET:-0.70}
poll=${POLL:-0.1}
replay=${REPLAY:-1}
produce=${PRODUCE:-1}
port=${WINDOWD_KAFKA_PORT:-9092}
broker=127.0.0.1:$port
wait_limit=300 # seconds a run may take
case $key in
record) keycfg="" ;;
user | country) keycfg="    key: {field: $key}" ;;
*) echo "e2e.sh: KEY must be record, user or country" >&2; exit 2 ;;
esac
repartition=${REPARTITION:-0}
case $repartition in
0) ;;
1)
	[ "$key" != record ] || { echo "e2e.sh: REPARTITION=1 needs KEY=user or KEY=country" >&2; exit 2; }
	keycfg="$keycfg
    repartition: true"
	;;
*) echo "e2e.sh: REPARTITION must be 0 or 1" >&2; exit 2 ;;
esac

need_kcat
for t in curl jq go; do command -v "$t" >/dev/null || die "needs $t"; done
[ -x /usr/bin/time ] || die "needs GNU time at /usr/bin/time"
status=$(bash scripts/kafka-local.sh status 2>&1) ||
	die "no broker answering on $broker: start one with 'bash scripts/kafka-local.sh start'"
# the broker's pid, for its CPU seconds during each run (read from /proc only)
bpid=$(sed -n 's/.*(pid \([0-9]*\)).*/\1/p' <<<"$status")
[ -n "$bpid" ] && [ -r "/proc/$bpid/stat" ] || bpid=""
tck=$(getconf CLK_TCK)

tmp=$(mktemp -d)
tpid="" # the /usr/bin/time process of the running windowd
wpid="" # windowd itself (the child of $tpid)
topics=()
delete_topics() {
	bash scripts/kafka-local.sh status >/dev/null 2>&1 || {
		echo "e2e.sh: broker gone; delete these topics later: $*" >&2
		return 0
	}
	for t in "$@"; do
		bash scripts/kafka-local.sh topics --delete --if-exists --topic "$t" >/dev/null 2>&1 || true
	done
}
cleanup() {
	if [ -n "$wpid" ] && kill -0 "$wpid" 2>/dev/null; then
		kill -TERM "$wpid" 2>/dev/null || true
		wait "$tpid" 2>/dev/null || true
	fi
	if [ -z "${KEEP_TOPICS:-}" ] && [ ${#topics[@]} -gt 0 ]; then
		delete_topics "${topics[@]}"
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

since() { awk -v a="$1" -v b="$(now)" 'BEGIN {printf "%.3f\n", b - a}'; }
# CPU seconds (user + sys) of process $1 so far
cpu() { awk -v t="$tck" '{sub(/^.*\) /, ""); printf "%.2f\n", ($12 + $13) / t}' "/proc/$1/stat" 2>/dev/null || echo 0; }
bcpu() { if [ -n "$bpid" ]; then cpu "$bpid"; else echo 0; fi; }
minus() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f\n", a - b}'; }
# sum of the end offsets of topic $1 over its $partitions partitions
ends() {
	# shellcheck disable=SC2046 # one -t argument per partition
	kcat -b "$broker" -Q $(for ((p = 0; p < partitions; p++)); do echo "-t $1:$p:-1"; done) 2>/dev/null |
		awk '{s += $NF} END {print s + 0}'
}
write_config() { # file state_dir topic group output [brokers]
	local brokers=${6:-"[\"$broker\"]"}
	cat >"$1" <<EOF
kafka: {brokers: $brokers, compression: $compression}
state: {dir: "$2", cache_bytes: $cache_bytes}
http: {listen: "127.0.0.1:0"}
shutdown_grace: 60s
pipelines:
  - name: bench
    input: {topic: $3, group: $4}
$keycfg
    timestamp: {field: ts, format: unix_ms}
    watermark: {strategy: bounded_out_of_orderness, max_delay: 2s}
    window: {type: tumbling, size: ${window_s}s}
    aggregates:
      - {name: n, op: count}
      - {name: total, op: sum, field: x}
    output: {topic: $5}
    dead_letter_topic: $5-dlq
    commit_interval: $commit_interval
    delivery: $delivery
EOF
}

echo "# windowd end-to-end benchmark — $(date -u +%Y-%m-%dT%H:%MZ)"
echo "# commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet HEAD -- . 2>/dev/null || echo ' (working tree has changes)'); $(go version | cut -d' ' -f3-); $(nproc) CPUs ($(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)); $(awk '/MemTotal/{printf "%.1f GiB RAM", $2/1048576}' /proc/meminfo)"
echo "# $records records, $keys keys, $partitions partitions; tumbling ${window_s}s count+sum keyed by $key$([ "$repartition" = 0 ] || echo ", repartition: true"); $delivery, commit_interval $commit_interval; cache_bytes $cache_bytes; $compression batches; broker $broker; consume loop $([ "$consume_group" = 0 ] && echo "without a group" || echo "in a fresh group")"
bin=$tmp/windowd
go build -o "$bin" ./cmd/windowd
go build -o "$tmp/gen" ./bench/gen
go build -o "$tmp/consume" ./bench/consume
[ "$produce" = 0 ] || go build -o "$tmp/produce" ./bench/produce
write_config "$tmp/replay.yaml" "$tmp/replay-state" replay-in replay-g replay-out embedded
"$bin" validate --config "$tmp/replay.yaml" >/dev/null || die "the replay configuration is not valid"

# Input: gen's JSON lines split into one "key<TAB>value" file per partition.
# The same pass counts the panes the input closes: one per (group key,
# window) whose end is at or before the final frontier, the minimum over
# partitions of (largest ts - max_delay). gen's disorder (2 s) is within
# max_delay, so no record is late.
expected=$("$tmp/gen" -records "$records" -keys "$keys" -partitions "$partitions" |
	if [ "$replay$produce" = 00 ]; then cat; else tee "$tmp/in.jsonl"; fi |
	awk -v dir="$tmp" -v kf="$key" -v ws=$((window_s * 1000)) '{
		p = substr($0, 14, index($0, ",") - 14)
		rest = substr($0, index($0, ",\"key\":\"") + 8)
		k = substr(rest, 1, index(rest, "\"") - 1)
		v = substr(rest, index(rest, "\"value\":") + 8)
		v = substr(v, 1, length(v) - 1)
		print k "\t" v > (dir "/p" p ".tsv")
		match(v, /"ts":[0-9]+/); ts = substr(v, RSTART + 5, RLENGTH - 5) + 0
		if (!(p in mx) || ts > mx[p]) mx[p] = ts
		g = k
		if (kf == "country") { match(v, /"country":"[^"]*"/); g = substr(v, RSTART + 11, RLENGTH - 12) }
		seen[g SUBSEP int(ts / ws)] = 1
	}
	END {
		f = ""
		for (p in mx) if (f == "" || mx[p] < f) f = mx[p]
		f -= 2000
		for (gw in seen) { split(gw, a, SUBSEP); if ((a[2] + 1) * ws <= f) n++ }
		print n + 0
	}')
[ "$(cat "$tmp"/p*.tsv | wc -l)" = "$records" ] || die "splitting the generated input failed"

topic=windowd-e2e-$(date +%s)-$RANDOM
topics+=("$topic")
bash scripts/kafka-local.sh topics --create --topic "$topic" --partitions $partitions --replication-factor 1 >/dev/null
t0=$(now)
for ((p = 0; p < partitions; p++)); do
	[ -s "$tmp/p$p.tsv" ] || continue
	kcat -P -b "$broker" -t "$topic" -p "$p" -K $'\t' -X linger.ms=20 -X batch.num.messages=10000 \
		-X queue.buffering.max.messages=1000000 <"$tmp/p$p.tsv"
done
produced=$(ends "$topic")
[ "$produced" = "$records" ] || die "produced $produced records, expected $records"
input_bytes=$(cat "$tmp"/p*.tsv | wc -c)
echo "# input topic $topic: $records records ($((input_bytes - records)) bytes of keys + values) produced in $(since "$t0") s; the input closes $expected panes"
rm -f "$tmp"/p*.tsv
if [ "$produce" != 0 ]; then
	# the panes windowd writes, for the bare producer: replay fires the same
	# windows in frontier order (the input's last ones at its end)
	"$bin" replay --config "$tmp/replay.yaml" --input "$tmp/in.jsonl" >"$tmp/panes.jsonl" 2>"$tmp/panes.err" ||
		die "replay for the producer's panes failed: $(tail -3 "$tmp/panes.err")"
	[ "$(wc -l <"$tmp/panes.jsonl")" -ge "$expected" ] || die "replay printed fewer than $expected panes"
	[ "$replay" != 0 ] || rm -f "$tmp/in.jsonl"
fi

# --- the runs -----------------------------------------------------------
run_consume() { # rep; sets c_* variables
	local r=$1 g="" t0 b0
	[ "$consume_group" = 0 ] || g=$topic-c$r
	b0=$(bcpu)
	t0=$(now)
	/usr/bin/time -f '%M %e %U %S' -o "$tmp/time.c" \
		"$tmp/consume" -brokers "$broker" -topic "$topic" -records "$records" -group "$g" >"$tmp/c.out" ||
		die "the consume loop failed: $(cat "$tmp/time.c")"
	c_wall=$(since "$t0")
	c_bcpu=$(minus "$(bcpu)" "$b0")
	read -r c_n _ c_int _ c_first <"$tmp/c.out"
	read -r c_rss _ c_u c_s < <(tail -1 "$tmp/time.c")
	c_cpu=$(awk -v u="$c_u" -v s="$c_s" 'BEGIN {printf "%.2f\n", u + s}')
	[ "$c_n" = "$records" ] || die "the consume loop counted $c_n records"
}

run_windowd() { # rep; sets w_* variables
	local r=$1
	local st=$tmp/state$r grp=$topic-g$r wout=$topic-w$r log=$out/e2e-windowd.log
	local cfg=$tmp/w$r.yaml m=$tmp/metrics t0 b0 in=0 commits=0 c0="" i
	topics+=("$wout" "$wout-dlq" "$grp-bench-changelog" "$grp-bench-repartition")
	mkdir -p "$st"
	write_config "$cfg" "$st" "$topic" "$grp" "$wout"
	w_in="" w_out="" w_commit=""
	b0=$(bcpu)
	t0=$(now)
	/usr/bin/time -f '%M %e %U %S' -o "$tmp/time.w" "$bin" run --config "$cfg" >/dev/null 2>"$log" &
	tpid=$!
	for ((i = 0; i < 200; i++)); do
		wpid=$(pgrep -P "$tpid" | head -1 || true)
		[ -n "$wpid" ] && break
		sleep 0.01
	done
	[ -n "$wpid" ] || die "no windowd process under /usr/bin/time (pid $tpid)"
	addr=$(http_addr "$log" "$wpid") || fail_with_log "windowd did not start its HTTP listener" "$log"
	while :; do
		kill -0 "$wpid" 2>/dev/null || fail_with_log "windowd exited" "$log"
		if curl -sf "http://$addr/metrics" >"$m"; then
			in=$(msum windowd_records_in_total "$m")
			commits=$(msum windowd_commit_latency_seconds_count "$m")
			if [ -z "$w_in" ] && [ "$in" -ge "$records" ]; then
				w_in=$(since "$t0")
				c0=$commits
			fi
			# a cycle that completed after every record was in: it covers them all
			if [ -n "$w_in" ] && [ -z "$w_commit" ] && [ "$commits" -gt "$c0" ]; then
				w_commit=$(since "$t0")
				w_cpu_commit=$(cpu "$wpid")
				w_bcpu=$(minus "$(bcpu)" "$b0")
			fi
			if [ -n "$w_in" ] && [ -z "$w_out" ] && [ "$(ends "$wout")" -ge "$expected" ]; then
				w_out=$(since "$t0")
			fi
			[ -n "$w_commit" ] && [ -n "$w_out" ] && break
			# output short of the expected panes well after the commit: give up waiting
			[ -n "$w_commit" ] && awk -v a="$w_commit" -v b="$(since "$t0")" 'BEGIN {exit !(b - a > 5)}' && {
				w_out="-"
				break
			}
		fi
		awk -v a="$t0" -v b="$(now)" -v l=$wait_limit 'BEGIN {exit !(b - a > l)}' &&
			fail_with_log "windowd consumed $in of $records records in ${wait_limit}s" "$log"
		sleep "$poll"
	done
	curl -sf "http://$addr/metrics" >"$m"
	w_n=$(msum windowd_records_in_total "$m")
	w_panes=$(msum windowd_panes_total "$m")
	w_dead=$(msum windowd_dead_letters_total "$m")
	w_late=$(msum windowd_late_dropped_total "$m")
	w_clrec=$(msum windowd_changelog_records_total "$m")
	w_clbytes=$(msum windowd_changelog_bytes_total "$m")
	w_writes=$(msum windowd_state_writes_total "$m")
	w_open=$(msum windowd_open_windows "$m")
	w_commits=$(msum windowd_commit_latency_seconds_count "$m")
	w_alloc=$(msum go_memstats_alloc_bytes_total "$m")
	w_mallocs=$(msum go_memstats_mallocs_total "$m")
	w_gcs=$(msum go_gc_duration_seconds_count "$m")
	w_markers=$(msum windowd_repartition_markers_total "$m")
	w_dups=$(msum windowd_repartition_duplicates_total "$m")
	w_outrec=$(ends "$wout")
	w_assigned=$(jq -R -r 'fromjson? | select(.msg == "partitions assigned") | .ts' "$log" 2>/dev/null | head -1)
	[ -z "$w_assigned" ] || w_assigned=$(date -d "$w_assigned" +%s.%N)
	w_assigned=$(awk -v a="$t0" -v b="$w_assigned" 'BEGIN {if (b == "") print "-"; else printf "%.3f\n", b - a}')
	local rc=0
	kill -TERM "$wpid"
	wait "$tpid" || rc=$?
	tpid="" wpid=""
	[ "$rc" = 0 ] || fail_with_log "windowd exited with status $rc after SIGTERM" "$log"
	read -r w_rss _ w_u w_s < <(tail -1 "$tmp/time.w")
	w_cpu=$(awk -v u="$w_u" -v s="$w_s" 'BEGIN {printf "%.2f\n", u + s}')
	# under exactly_once every transaction adds a commit marker to each output partition it wrote
	[ "$delivery" = exactly_once ] && [ "$w_outrec" -ge "$expected" ] && w_outrec=$expected
	[ "$w_outrec" = "$expected" ] && [ "$w_panes" = "$expected" ] ||
		echo "#   MISMATCH: output topic holds $w_outrec records, windowd_panes_total $w_panes, expected $expected panes" >&2
	[ "$w_dead" = 0 ] && [ "$w_late" = 0 ] || echo "#   note: $w_dead dead letters, $w_late late records" >&2
	if [ -z "${KEEP_TOPICS:-}" ]; then
		delete_topics "$wout" "$wout-dlq" "$grp-bench-changelog" "$grp-bench-repartition"
		topics=("$topic")
	fi
	rm -rf "$st"
}

run_produce() { # rep; sets p_* variables
	p_wall="-" p_cpu="-" p_bcpu="-" p_rss="-"
	[ "$produce" = 0 ] && return 0
	if [ "$expected" = 0 ]; then # no pane to write (WINDOW_S=3600): nothing to produce
		p_wall=0 p_cpu=0 p_bcpu=0
		return 0
	fi
	local r=$1 pt=$topic-p$r n
	topics+=("$pt")
	bash scripts/kafka-local.sh topics --create --topic "$pt" --partitions $partitions --replication-factor 1 >/dev/null
	/usr/bin/time -f '%M %e %U %S' -o "$tmp/time.p" "$tmp/produce" -brokers "$broker" -topic "$pt" \
		-panes "$tmp/panes.jsonl" -records "$expected" -compression "$compression" -cpu-of "${bpid:-0}" >"$tmp/p.out" ||
		die "the producer failed: $(cat "$tmp/time.p")"
	read -r n _ p_wall _ p_cpu p_bcpu <"$tmp/p.out"
	[ -n "$bpid" ] || p_bcpu="-"
	read -r p_rss _ < <(tail -1 "$tmp/time.p")
	[ "$n" = "$expected" ] && [ "$(ends "$pt")" = "$expected" ] || die "the producer wrote $n records, the topic holds $(ends "$pt"); expected $expected"
	if [ -z "${KEEP_TOPICS:-}" ]; then
		delete_topics "$pt"
		topics=("$topic")
	fi
}

run_replay() { # sets r_* variables
	r_wall="-" r_rss="-" r_cpu="-" r_panes="-"
	[ "$replay" = 0 ] && return 0
	local t0 u s
	t0=$(now)
	/usr/bin/time -f '%M %e %U %S' -o "$tmp/time.r" \
		"$bin" replay --workers 1 --config "$tmp/replay.yaml" --input "$tmp/in.jsonl" >/dev/null 2>"$tmp/r.err" ||
		die "replay failed: $(tail -3 "$tmp/r.err")"
	r_wall=$(since "$t0")
	read -r r_rss _ u s < <(tail -1 "$tmp/time.r")
	r_cpu=$(awk -v u="$u" -v s="$s" 'BEGIN {printf "%.2f\n", u + s}')
	r_panes=$(jq -R -r 'fromjson? | .summary.panes // empty' "$tmp/r.err" | tail -1)
}

raw=$out/e2e-raw.tsv
cols="rep order load1 c_wall_s c_loop_s c_first_s c_rss_kib c_cpu_s c_broker_cpu_s w_assigned_s w_in_s w_out_s w_commit_s w_rss_kib w_cpu_commit_s w_cpu_total_s w_broker_cpu_s w_records_in w_panes w_output_records expected_panes w_changelog_records w_changelog_bytes w_state_writes w_commits w_open_windows w_alloc_bytes w_mallocs w_gc_cycles w_markers w_duplicates p_wall_s p_cpu_s p_rss_kib p_broker_cpu_s r_wall_s r_rss_kib r_cpu_s r_panes c_rate w_rate ratio ratio_in"
tr ' ' '\t' <<<"$cols" >"$raw"
for ((r = 1; r <= reps; r++)); do
	load=$(cut -d' ' -f1 /proc/loadavg)
	if ((r % 2)); then
		order=consume,windowd
		run_consume "$r"
		sleep 1
		run_windowd "$r"
	else
		order=windowd,consume
		run_windowd "$r"
		sleep 1
		run_consume "$r"
	fi
	sleep 1
	run_produce "$r"
	sleep 1
	run_replay
	c_rate_r=$(awk -v n="$records" -v t="$c_wall" 'BEGIN {printf "%.0f\n", n / t}')
	w_rate_r=$(awk -v n="$records" -v t="$w_commit" 'BEGIN {printf "%.0f\n", n / t}')
	ratio=$(awk -v a="$c_wall" -v b="$w_commit" 'BEGIN {printf "%.3f\n", a / b}')
	ratio_in=$(awk -v a="$c_wall" -v b="$w_in" 'BEGIN {printf "%.3f\n", a / b}')
	printf '%s\n' "$r" "$order" "$load" "$c_wall" "$c_int" "$c_first" "$c_rss" "$c_cpu" "$c_bcpu" \
		"$w_assigned" "$w_in" "$w_out" "$w_commit" "$w_rss" "$w_cpu_commit" "$w_cpu" "$w_bcpu" \
		"$w_n" "$w_panes" "$w_outrec" "$expected" "$w_clrec" "$w_clbytes" "$w_writes" "$w_commits" "$w_open" \
		"$w_alloc" "$w_mallocs" "$w_gcs" "$w_markers" "$w_dups" "$p_wall" "$p_cpu" "$p_rss" "$p_bcpu" "$r_wall" "$r_rss" "$r_cpu" "$r_panes" "$c_rate_r" "$w_rate_r" "$ratio" "$ratio_in" | paste -sd '\t' >>"$raw"
	echo "# rep $r/$reps ($order, load $load): consume ${c_wall}s ($c_rate_r rec/s, $((c_rss / 1024)) MiB, CPU ${c_cpu}s); windowd in ${w_in}s, out ${w_out}s, committed ${w_commit}s ($w_rate_r rec/s, $((w_rss / 1024)) MiB, CPU ${w_cpu_commit}s); ratio $ratio (to \"in\": $ratio_in); changelog $w_clrec records, $w_clbytes B$([ "$produce" = 0 ] || echo "; producer of the panes ${p_wall}s, broker CPU ${p_bcpu}s")$([ "$replay" = 0 ] || echo "; replay ${r_wall}s (CPU ${r_cpu}s)")" >&2
done

col() { awk -F'\t' -v c="$1" 'NR == 1 {for (i = 1; i <= NF; i++) if ($i == c) k = i; next} {printf "%s%s", (NR > 2 ? " " : ""), $k} END {print ""}' "$raw"; }
mib() { awk -v k="$1" 'BEGIN {if (k == "-") print "-"; else printf "%.0f\n", k / 1024}'; }
rate() { awk -v n="$records" -v t="$1" 'BEGIN {if (t + 0 == 0) print "-"; else printf "%.0f\n", n / t}'; }
ratio=$(med_col "$raw" ratio)
verdict=$(awk -v r="$ratio" -v t="$target" 'BEGIN {print (r + 0 >= t + 0) ? "MET" : "MISSED"}')

echo
echo "# $reps repetition(s); medians per column (records/s from the median seconds)"
printf '%-52s %s\n' \
	"consume loop: exec to exit, s; records/s" "$(med_col "$raw" c_wall_s); $(rate "$(med_col "$raw" c_wall_s)")" \
	"consume loop: first record after, s" "$(med_col "$raw" c_first_s)" \
	"consume loop: peak RSS MiB; CPU s (user+sys)" "$(mib "$(med_col "$raw" c_rss_kib)"); $(med_col "$raw" c_cpu_s)" \
	"consume loop: broker CPU s during the run" "$(med_col "$raw" c_broker_cpu_s)" \
	"windowd: partitions assigned after, s" "$(med_col "$raw" w_assigned_s)" \
	"windowd: all records in after, s; records/s" "$(med_col "$raw" w_in_s); $(rate "$(med_col "$raw" w_in_s)")" \
	"windowd: all panes on the output topic after, s" "$(med_col "$raw" w_out_s)" \
	"windowd: committed after, s; records/s" "$(med_col "$raw" w_commit_s); $(rate "$(med_col "$raw" w_commit_s)")" \
	"windowd: peak RSS MiB" "$(mib "$(med_col "$raw" w_rss_kib)")" \
	"windowd: CPU s at the commit; whole process" "$(med_col "$raw" w_cpu_commit_s); $(med_col "$raw" w_cpu_total_s)" \
	"windowd: broker CPU s until the commit" "$(med_col "$raw" w_broker_cpu_s)" \
	"windowd: panes (output records; expected)" "$(med_col "$raw" w_output_records); $(med_col "$raw" expected_panes)" \
	"windowd: changelog records; bytes (key+value)" "$(med_col "$raw" w_changelog_records); $(med_col "$raw" w_changelog_bytes)" \
	"windowd: state writes; commit cycles; open windows" "$(med_col "$raw" w_state_writes); $(med_col "$raw" w_commits); $(med_col "$raw" w_open_windows)" \
	"windowd: Go heap bytes allocated per input record" "$(awk -v a="$(med_col "$raw" w_alloc_bytes)" -v n="$records" 'BEGIN {printf "%.0f\n", a / n}')" \
	"windowd: Go heap objects per input record; GC cycles" "$(awk -v a="$(med_col "$raw" w_mallocs)" -v n="$records" 'BEGIN {printf "%.1f\n", a / n}'); $(med_col "$raw" w_gc_cycles)" \
	"windowd: marker records; per s per partition; dups" "$(med_col "$raw" w_markers); $(awk -v m="$(med_col "$raw" w_markers)" -v t="$(med_col "$raw" w_commit_s)" -v p=$partitions 'BEGIN {printf "%.1f\n", m / t / p}'); $(med_col "$raw" w_duplicates)" \
	"bare producer of the panes: s; its CPU s; RSS MiB" "$(med_col "$raw" p_wall_s); $(med_col "$raw" p_cpu_s); $(mib "$(med_col "$raw" p_rss_kib)")" \
	"bare producer: broker CPU s to take the panes" "$(med_col "$raw" p_broker_cpu_s)" \
	"replay (no Kafka): exec to exit, s; records/s" "$(med_col "$raw" r_wall_s); $(rate "$(med_col "$raw" r_wall_s)")" \
	"replay: peak RSS MiB; CPU s; panes (all windows)" "$(mib "$(med_col "$raw" r_rss_kib)"); $(med_col "$raw" r_cpu_s); $(med_col "$raw" r_panes)" \
	"ratio windowd/consume (committed), per repetition" "$(col ratio)" \
	"ratio windowd/consume (all in), per repetition" "$(col ratio_in)" \
	"median ratio (committed); (all in)" "$ratio; $(med_col "$raw" ratio_in)" \
	"target: median ratio >= $target" "$verdict"
if [ "$produce" != 0 ] && [ -n "$bpid" ]; then
	# The bound: at the target rate windowd has consume seconds / TARGET, in
	# which the machine's CPUs give nproc times that many CPU seconds. The
	# Kafka side of the pipeline alone needs, each part measured on its own
	# in the same repetition: fetching the input (the consume loop's CPU),
	# the broker serving it (its CPU in the consume run), producing the
	# panes (the bare producer's CPU) and the broker taking them (its CPU in
	# the producer run); with REPLAY=1, decoding and the engine (replay's
	# CPU) come on top. A sum above what the machine gives means the target
	# is out of reach here, however well the parts overlap.
	awk -F'\t' -v t="$target" -v n="$(nproc)" 'NR == 1 {for (i = 1; i <= NF; i++) k[$i] = i; next}
		{allow = n * $k["c_wall_s"] / t
		 kafka = $k["c_cpu_s"] + $k["c_broker_cpu_s"] + $k["p_cpu_s"] + $k["p_broker_cpu_s"]
		 all = $k["r_cpu_s"] == "-" ? "-" : sprintf("%.2f", kafka + $k["r_cpu_s"])
		 printf "%s%.2f/%.2f/%s", (NR > 2 ? " " : ""), allow, kafka, all
		 if (kafka > allow) over++; if (all != "-" && all + 0 > allow) overAll++; if (all != "-") withAll++}
		END {printf "\nthe Kafka side alone exceeds it in %d of %d repetitions; with replay'"'"'s CPU in %d of %d\n", over, NR - 1, overAll, withAll}' "$raw" |
		{
			read -r per
			read -r summary
			printf '%-52s %s\n' "CPU s the target allows / Kafka side / + replay" "$per" "bound" "$summary"
		}
fi
echo "# load (1-min) at the start of each repetition: $(col load1)"
echo "# raw: $raw"
