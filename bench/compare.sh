#!/usr/bin/env bash
# bench/compare.sh [N] [REPS] — windowd, Kafka Streams and Flink on the same
# job and the same preloaded topic, one after another, REPS repetitions
# interleaved (see bench/README.md, "windowd, Kafka Streams and Flink").
#
#   bash bench/compare.sh                 # N=1000000 records, 3 repetitions (about 5 min on 2 cores)
#   bash bench/compare.sh 200000 2        # a smoke run (about 1 min)
#   SYSTEMS="windowd flink" bash bench/compare.sh 1000000 5
#   SYSTEMS="windowd windowd-eos flink-eos" bash bench/compare.sh 2000000 3   # the exactly_once cost
#
# The job: tumbling WINDOW_S (10) s event-time windows by record key, count
# and sum of value.x, event time value.ts (Unix ms), bounded out-of-orderness
# = grace = GRACE_MS (2000), final panes only:
#   windowd   `windowd run` (built once with go build) with a generated
#             config: no key (the record key), timestamp {field: ts},
#             watermark max_delay GRACE_MS, allowed_lateness 0s,
#             commit_interval COMMIT_MS, at_least_once;
#   kstreams  bench/peers/kstreams: TimeWindows.ofSizeAndGrace +
#             suppress(untilWindowCloses), a TimestampExtractor reading the
#             parsed value, THREADS stream threads, commit.interval.ms
#             COMMIT_MS, at_least_once;
#   flink     bench/peers/flink: a MiniCluster in one JVM, parallelism
#             THREADS, KafkaSource + forBoundedOutOfOrderness(grace) +
#             TumblingEventTimeWindows + an AggregateFunction, hashmap state
#             checkpointed every COMMIT_MS to the state dir, KafkaSink at least
#             once.
# Exactly once: the systems windowd-eos, kstreams-eos and flink-eos run the
# same job with exactly-once output, in the same run and repetitions as the
# at-least-once ones (SYSTEMS takes any mix of the six):
#   windowd-eos   `delivery: exactly_once`, commit_interval EOS_COMMIT_MS
#                 (unset: left out, windowd's exactly_once default, 100ms;
#                 commit_interval_max stays at its default, the larger of
#                 commit_interval and 1s: while input waits in Kafka a cycle
#                 is put off up to then);
#   kstreams-eos  processing.guarantee exactly_once_v2, commit.interval.ms
#                 EOS_COMMIT_MS (unset: 100, Kafka Streams' exactly-once
#                 default);
#   flink-eos     checkpointing mode EXACTLY_ONCE (as flink's), a KafkaSink
#                 with DeliveryGuarantee.EXACTLY_ONCE (a transaction per
#                 checkpoint, every COMMIT_MS; transactional id prefix = the
#                 run's output topic, transaction.timeout.ms 60000), the
#                 source read_committed.
# A -eos system's panes are counted, for the poll below, by bench/consume
# -progress: started with the run, it reads the output topic read_committed
# and rewrites a count file after each fetch (the end offsets would count
# transaction markers, and panes not yet committed). Every system's output
# is read back read_committed, and bench/agree -exactly-once flags any
# duplicate final pane of a -eos system as a disagreement. The summary adds
# the -eos systems' ratios to windowd-eos and "windowd-eos / windowd CPU s",
# the exactly_once cost in CPU.
#
# The peers are built by bench/peers/build.sh (Maven Central, cached).
#
# Once: start the local broker (`scripts/kafka-local.sh start`: a no-op when
# one is running; it is left running), build windowd, bench/gen and
# bench/agree, generate N records with bench/gen (KEYS users, RATE records
# per second of event time, out of order by up to GRACE_MS) and produce them
# with kcat to a new 4-partition topic: Kafka key = value.user (KEY=user, the
# default) or value.country (KEY=country, 8 keys), partition = gen's (user
# mod 4, so each key lives in one partition), then one "flush" record per
# partition (key ~flush-P) an hour of event time past the last record, which
# closes every window of the input in every system. The flush records' own
# windows never close and are left out of the comparison.
#
# Per repetition, each system in turn (the order rotates between
# repetitions) with a fresh output topic, consumer group / application id
# and state directory: exec, then the output topic's end offsets are polled
# every POLL (0.1) s (-eos systems: the count file, the same way) until it
# holds every pane the input closes. Measured:
#   first s       exec to the first pane on the output topic (-eos: the
#                 first committed; start-up, group join, the first window's
#                 close);
#   drain s       exec to the last pane on the output topic (-eos: the last
#                 committed; JVM and group start included);
#   CPU s         the process's user+sys CPU at that moment (/proc/PID/stat);
#   steady rec/s  0.8 N over the time between the output reaching 10% and
#                 90% of its panes (panes come at an even rate of event time,
#                 and so of input records): the rate once started;
#   peak RSS      VmHWM of the process at that moment;
#   broker CPU s  the broker's CPU over the same time.
# Then SIGTERM, the output topic is read back (kcat, read_committed; its
# records are output_records in the raw file) and, once every system of the
# repetition has run, bench/agree checks every final pane against the batch
# computation (exact counts and sums from the preloaded records) and against
# the other systems (sums within 1e-9 relative): a pane missing, extra or
# differing is a disagreement, and so is a duplicate of a -eos system (at
# least once, a duplicate with the same value is counted but allowed).
#
# It prints one line per run, then per system the medians, the ratios to
# windowd's medians (and, with windowd-eos, the -eos systems' ratios to
# windowd-eos's and windowd-eos / windowd), and whether every final pane
# agreed in every repetition.
#
# Needs: Java 17+ (JAVA_HOME is honoured) and Maven (the peers, the broker),
# go, kcat (installed with apt-get when missing).
#
# Environment:
#   KEYS=10000 KEY=user        users in the input; group key user | country
#   RATE=1000                  records per second of event time (bench/gen -rate):
#                              10000 gives about 10 records per window by user
#   WINDOW_S=10 GRACE_MS=2000  window size (s) and grace / max_delay (ms)
#   COMMIT_MS=1000             commit / checkpoint interval of all three (and
#                              Flink's checkpoints under exactly once)
#   THREADS=2                  Kafka Streams threads, Flink parallelism
#   SYSTEMS="windowd kstreams flink"   also windowd-eos kstreams-eos flink-eos
#   EOS_COMMIT_MS=             commit interval of windowd-eos and kstreams-eos
#                              (unset: their exactly-once defaults, both 100 ms)
#   PEER_JAVA_OPTS=-Xmx1g      JVM options of both peers
#   POLL=0.1                   seconds between polls of the output topic
#   WAIT_LIMIT=600             seconds a run may take
#   WINDOWD_KAFKA_PORT=9092    broker port on 127.0.0.1 (as scripts/kafka-local.sh)
#   KEEP_TOPICS=1              do not delete the topics afterwards
# Raw measurements: bench/out/compare-raw.tsv; logs of the last run of each
# system: bench/out/compare-<system>.log.
set -euo pipefail

records=${1:-${RECORDS:-1000000}}
reps=${2:-${REPS:-3}}
case $records in '' | *[!0-9]* | 0) echo "usage: bench/compare.sh [N>=1] [REPS>=1]" >&2; exit 2 ;; esac
case $reps in '' | *[!0-9]* | 0) echo "usage: bench/compare.sh [N>=1] [REPS>=1]" >&2; exit 2 ;; esac

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
script=compare.sh
# shellcheck source=bench/lib.sh
. bench/lib.sh
out=bench/out
mkdir -p "$out"

keys=${KEYS:-10000}
rate=${RATE:-1000}
key=${KEY:-user}
case $key in user | country) ;; *) die "KEY must be user or country" ;; esac
window_s=${WINDOW_S:-10}
grace_ms=${GRACE_MS:-2000}
commit_ms=${COMMIT_MS:-1000}
threads=${THREADS:-2}
read -ra systems <<<"${SYSTEMS:-windowd kstreams flink}"
eos_commit_ms=${EOS_COMMIT_MS:-}
read -ra java_opts <<<"${PEER_JAVA_OPTS:--Xmx1g}"
poll=${POLL:-0.1}
wait_limit=${WAIT_LIMIT:-600}
port=${WINDOWD_KAFKA_PORT:-9092}
broker=127.0.0.1:$port
partitions=4
[ -z "$eos_commit_ms" ] || case $eos_commit_ms in *[!0-9]*) die "EOS_COMMIT_MS must be a whole number" ;; esac
for v in window_s grace_ms commit_ms threads keys rate wait_limit; do
	case ${!v} in '' | *[!0-9]*) die "$v must be a whole number" ;; esac
done
for s in "${systems[@]}"; do
	case $s in windowd | kstreams | flink | windowd-eos | kstreams-eos | flink-eos) ;; *) die "SYSTEMS: unknown system $s" ;; esac
done

java=${JAVA_HOME:+$JAVA_HOME/bin/}java
need_kcat
for t in go "$java" mvn; do command -v "$t" >/dev/null || die "needs $t"; done
bash scripts/kafka-local.sh start >&2 || die "could not start the local broker"
status=$(bash scripts/kafka-local.sh status 2>&1) || die "no broker answering on $broker"
bpid=$(sed -n 's/.*(pid \([0-9]*\)).*/\1/p' <<<"$status")
[ -n "$bpid" ] && [ -r "/proc/$bpid/stat" ] || bpid=""
tck=$(getconf CLK_TCK)

tmp=$(mktemp -d)
pid=""  # the system under test
cpid="" # its pane counter (bench/consume -progress), -eos systems
topic=cmp-$(date +%s)-$RANDOM
delete_topics() { # regex
	[ -n "${KEEP_TOPICS:-}" ] && return 0
	bash scripts/kafka-local.sh topics --delete --if-exists --topic "$1" >/dev/null 2>&1 || true
}
cleanup() {
	if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
		kill -KILL "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	fi
	if [ -n "$cpid" ] && kill -0 "$cpid" 2>/dev/null; then
		kill "$cpid" 2>/dev/null || true
		wait "$cpid" 2>/dev/null || true
	fi
	delete_topics "$topic|$topic-.*"
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

since() { awk -v a="$1" -v b="$(now)" 'BEGIN {printf "%.3f\n", b - a}'; }
cpu() { awk -v t="$tck" '{sub(/^.*\) /, ""); printf "%.2f\n", ($12 + $13) / t}' "/proc/$1/stat" 2>/dev/null || echo 0; }
bcpu() { if [ -n "$bpid" ]; then cpu "$bpid"; else echo 0; fi; }
hwm() { awk '/^VmHWM:/ {printf "%.0f\n", $2 / 1024}' "/proc/$1/status" 2>/dev/null || echo 0; }
ends() {
	# shellcheck disable=SC2046 # one -t argument per partition
	kcat -b "$broker" -Q $(for ((p = 0; p < partitions; p++)); do echo "-t $1:$p:-1"; done) 2>/dev/null |
		awk '{s += $NF} END {print s + 0}'
}

echo "# windowd, Kafka Streams, Flink — $(date -u +%Y-%m-%dT%H:%MZ)"
echo "# commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet HEAD -- . 2>/dev/null || echo ' (working tree has changes)'); $(go version | cut -d' ' -f3-); $("$java" -version 2>&1 | head -1); $(nproc) CPUs ($(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)); $(awk '/MemTotal/{printf "%.1f GiB RAM", $2/1048576}' /proc/meminfo)"
echo "# $records records, $keys users, $rate records per second of event time, $partitions partitions, keyed by $key; tumbling ${window_s}s count+sum, grace ${grace_ms}ms, final panes only; commit/checkpoint every ${commit_ms}ms; Kafka Streams $threads threads, Flink parallelism $threads; peers' JVM: ${java_opts[*]}; broker $broker"
if [[ " ${systems[*]} " == *"-eos "* ]]; then
	if [ -n "$eos_commit_ms" ]; then
		eos_w="${eos_commit_ms}ms (EOS_COMMIT_MS)" eos_k="$eos_commit_ms (EOS_COMMIT_MS)"
	else
		eos_w="100ms (windowd's exactly_once default; commit_interval_max its default, 1s)" eos_k="100 (its exactly-once default)"
	fi
	echo "# exactly once (-eos): windowd commit_interval $eos_w; Kafka Streams exactly_once_v2, commit.interval.ms $eos_k; Flink EXACTLY_ONCE sink, a transaction per checkpoint (every ${commit_ms}ms); -eos panes counted read_committed"
fi

bash bench/peers/build.sh || die "building the peers failed"
ks_cp="bench/peers/kstreams/target/peer-kstreams.jar:bench/peers/kstreams/target/lib/*"
fl_cp="bench/peers/flink/target/peer-flink.jar:bench/peers/flink/target/lib/*"
bin=$tmp/windowd
go build -o "$bin" ./cmd/windowd
go build -o "$tmp/gen" ./bench/gen
go build -o "$tmp/agree" ./bench/agree
go build -o "$tmp/consume" ./bench/consume

# --- the input -----------------------------------------------------------
# gen's JSON lines as one "key<TAB>value" file per partition, then a flush
# record per partition an hour (plus a window) past the largest event time.
mkdir -p "$tmp/in"
"$tmp/gen" -records "$records" -keys "$keys" -rate "$rate" -partitions "$partitions" -disorder "$grace_ms" |
	awk -v dir="$tmp/in" -v kf="$key" -v np=$partitions -v ahead=$((3600000 + window_s * 1000)) '{
		p = substr($0, 14, index($0, ",") - 14)
		rest = substr($0, index($0, ",\"key\":\"") + 8)
		k = substr(rest, 1, index(rest, "\"") - 1)
		v = substr(rest, index(rest, "\"value\":") + 8)
		v = substr(v, 1, length(v) - 1)
		if (kf == "country") { match(v, /"country":"[^"]*"/); k = substr(v, RSTART + 11, RLENGTH - 12) }
		print k "\t" v > (dir "/p" p ".tsv")
		match(v, /"ts":[0-9]+/); ts = substr(v, RSTART + 5, RLENGTH - 5) + 0
		if (ts > mx) mx = ts
	}
	END {
		for (p = 0; p < np; p++)
			printf "~flush-%d\t{\"user\":\"~flush\",\"ts\":%.0f,\"x\":0,\"country\":\"~flush\"}\n", p, mx + ahead >> (dir "/p" p ".tsv")
	}'
[ "$(cat "$tmp"/in/p*.tsv | wc -l)" = "$((records + partitions))" ] || die "splitting the generated input failed"
expected=$("$tmp/agree" -size-ms $((window_s * 1000)) -input "$tmp/in/p*.tsv" -expect)
bash scripts/kafka-local.sh topics --create --topic "$topic" --partitions $partitions --replication-factor 1 >/dev/null
t0=$(now)
for ((p = 0; p < partitions; p++)); do
	kcat -P -b "$broker" -t "$topic" -p "$p" -K $'\t' -X linger.ms=20 -X batch.num.messages=10000 \
		-X queue.buffering.max.messages=1000000 <"$tmp/in/p$p.tsv"
done
produced=$(ends "$topic")
[ "$produced" = "$((records + partitions))" ] || die "produced $produced records, expected $((records + partitions))"
echo "# input topic $topic: $records records + $partitions flush records, produced in $(since "$t0") s; the input closes $expected panes"

# --- the runs ------------------------------------------------------------
run_system() { # system rep; sets r_* variables, writes $tmp/out-<system>.jsonl
	local s=$1 r=$2
	local o=$topic-$s-r$r st=$tmp/state-$s-r$r log=$out/compare-$s.log
	local t0 b0 n t i cmd eos=() ecommit=$commit_ms
	mkdir -p "$st"
	if [[ $s == *-eos ]]; then
		eos=(--exactly-once true)
		ecommit=${eos_commit_ms:-100}
	fi
	bash scripts/kafka-local.sh topics --create --topic "$o" --partitions $partitions --replication-factor 1 >/dev/null
	case $s in
	windowd | windowd-eos)
		write_windowd_config "$tmp/windowd.yaml" "$st" "$o" "$o" "$([ "$s" = windowd ] && echo at_least_once || echo exactly_once)"
		cmd=("$bin" run --config "$tmp/windowd.yaml")
		;;
	kstreams | kstreams-eos)
		cmd=("$java" "${java_opts[@]}" -Dorg.slf4j.simpleLogger.defaultLogLevel=warn -cp "$ks_cp" windowd.peers.KStreamsPeer
			--bootstrap "$broker" --input "$topic" --output "$o" --app-id "$o" --state-dir "$st"
			--size-ms $((window_s * 1000)) --grace-ms "$grace_ms" --threads "$threads" --commit-ms "$ecommit" "${eos[@]}")
		;;
	flink | flink-eos)
		cmd=("$java" "${java_opts[@]}" -Dorg.slf4j.simpleLogger.defaultLogLevel=warn -cp "$fl_cp" windowd.peers.FlinkPeer
			--bootstrap "$broker" --input "$topic" --output "$o" --group "$o" --state-dir "$st"
			--size-ms $((window_s * 1000)) --grace-ms "$grace_ms" --parallelism "$threads" --checkpoint-ms "$commit_ms" "${eos[@]}")
		;;
	esac
	rm -f "$tmp/count"
	if [ ${#eos[@]} -gt 0 ]; then
		# Counts the committed panes (read_committed) until it has them all.
		"$tmp/consume" -brokers "$broker" -topic "$o" -records "$expected" -progress "$tmp/count" \
			-timeout "$((wait_limit + 60))s" >/dev/null 2>"$tmp/consume.err" &
		cpid=$!
	fi
	r_first="" r_t10="" r_t90="" r_done=""
	b0=$(bcpu)
	t0=$(now)
	"${cmd[@]}" >"$log" 2>&1 &
	pid=$!
	while :; do
		kill -0 "$pid" 2>/dev/null || fail_with_log "$s exited before its last pane" "$log"
		if [ -n "$cpid" ]; then
			n=$(cat "$tmp/count" 2>/dev/null || echo 0)
			n=${n:-0}
			if [ "$n" -lt "$expected" ] && ! kill -0 "$cpid" 2>/dev/null; then
				n=$(cat "$tmp/count" 2>/dev/null || echo 0) # it may have just finished
				[ "${n:-0}" -ge "$expected" ] || fail_with_log "the pane counter of $s stopped at ${n:-0} of $expected panes" "$tmp/consume.err"
			fi
		else
			n=$(ends "$o")
		fi
		t=$(since "$t0")
		[ -z "$r_first" ] && [ "$n" -gt 0 ] && r_first=$t
		[ -z "$r_t10" ] && [ $((n * 10)) -ge "$expected" ] && r_t10=$t
		[ -z "$r_t90" ] && [ $((n * 10)) -ge $((expected * 9)) ] && r_t90=$t
		if [ "$n" -ge "$expected" ]; then
			r_done=$t
			r_cpu=$(cpu "$pid")
			r_rss=$(hwm "$pid")
			r_bcpu=$(awk -v a="$(bcpu)" -v b="$b0" 'BEGIN {printf "%.2f\n", a - b}')
			break
		fi
		awk -v t="$t" -v l="$wait_limit" 'BEGIN {exit !(t > l)}' &&
			fail_with_log "$s wrote $n of $expected panes in ${wait_limit}s" "$log"
		sleep "$poll"
	done
	kill -TERM "$pid" 2>/dev/null || true
	for ((i = 0; i < 300; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	kill -KILL "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
	pid=""
	if [ -n "$cpid" ]; then
		kill "$cpid" 2>/dev/null || true
		wait "$cpid" 2>/dev/null || true
		cpid=""
	fi
	r_steady=$(awk -v n="$records" -v a="$r_t10" -v b="$r_t90" 'BEGIN {if (b - a <= 0) print "-"; else printf "%.0f\n", 0.8 * n / (b - a)}')
	# Read back read_committed: the committed records, without transaction
	# markers (which the end offsets would count).
	kcat -C -b "$broker" -t "$o" -X isolation.level=read_committed -e -q -f '%s\n' >"$tmp/out-$s.jsonl"
	r_outrec=$(wc -l <"$tmp/out-$s.jsonl")
	delete_topics "$o|$o-.*"
	rm -rf "$st"
}

raw=$out/compare-raw.tsv
printf 'rep\tsystem\tposition\tload1\tfirst_s\tdrain_s\tcpu_s\tsteady_rps\tdrain_rps\trss_mib\tbroker_cpu_s\tt10_s\tt90_s\toutput_records\tfinals\tagree\tmissing\textra\tdiffer\tduplicates\n' >"$raw"
all_agree=1
for ((r = 1; r <= reps; r++)); do
	order=()
	for ((i = 0; i < ${#systems[@]}; i++)); do
		order+=("${systems[$(((i + r - 1) % ${#systems[@]}))]}")
	done
	declare -A line=()
	for ((i = 0; i < ${#order[@]}; i++)); do
		s=${order[$i]}
		load=$(cut -d' ' -f1 /proc/loadavg)
		run_system "$s" "$r"
		drain_rps=$(awk -v n="$records" -v t="$r_done" 'BEGIN {printf "%.0f\n", n / t}')
		line[$s]="$r	$s	$((i + 1))	$load	$r_first	$r_done	$r_cpu	$r_steady	$drain_rps	$r_rss	$r_bcpu	$r_t10	$r_t90	$r_outrec"
		echo "# rep $r/$reps: $s first pane after ${r_first}s, drained in ${r_done}s ($drain_rps rec/s), CPU ${r_cpu}s, steady $r_steady rec/s, peak RSS ${r_rss} MiB, broker CPU ${r_bcpu}s (load $load)" >&2
		sleep 1
	done
	args=() eos_systems=""
	for s in "${systems[@]}"; do
		args+=("$s=$tmp/out-$s.jsonl")
		[[ $s != *-eos ]] || eos_systems+=${eos_systems:+,}$s
	done
	"$tmp/agree" -size-ms $((window_s * 1000)) -input "$tmp/in/p*.tsv" -exactly-once "$eos_systems" "${args[@]}" >"$tmp/agree.out" || all_agree=0
	while IFS=$'\t' read -r kind name finals agree missing extra differ dups _; do
		[ "$kind" = system ] || continue
		printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "${line[$name]}" "$finals" "$agree" "$missing" "$extra" "$differ" "$dups" >>"$raw"
		echo "# rep $r/$reps: $name: $agree of $expected final panes agree with the batch computation; $missing missing, $extra extra, $differ differ, $dups duplicates" >&2
	done <"$tmp/agree.out"
	awk -F'\t' '$1 == "example" {print "#   " $2 ": " $3}' "$tmp/agree.out" >&2
	awk -F'\t' '$1 == "pair" {printf "# rep %s: %s vs %s: %d panes equal, %d differ, %d only in %s, %d only in %s\n", r, $2, $3, $4, $5, $6, $2, $7, $3}' r="$r/$reps" "$tmp/agree.out" >&2
	cp "$tmp/agree.out" "$out/compare-agree-r$r.tsv"
	rm -f "$tmp"/out-*.jsonl
	unset line
done

# --- the summary ---------------------------------------------------------
med() { # system column
	awk -F'\t' -v s="$1" -v c="$2" 'NR == 1 {for (i = 1; i <= NF; i++) if ($i == c) k = i; next} $2 == s && $k != "-" {print $k}' "$raw" | median
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (a == "-" || b == "-" || b + 0 == 0) print "-"; else printf "%.2f\n", a / b}'; }
echo
echo "# $reps repetition(s), medians; N = $records records, $expected final panes"
printf '%-12s %8s %8s %11s %7s %12s %8s %10s  %s\n' system "first s" "drain s" "drain rec/s" "CPU s" "steady rec/s" "RSS MiB" "broker CPU" "final panes agreeing"
for s in "${systems[@]}"; do
	# All agree: every pane agrees, none extra; under exactly once no duplicate.
	ag=$(awk -F'\t' -v s="$s" -v e="$expected" 'NR > 1 && $2 == s {n++; if ($16 == e && $17 == 0 && $18 == 0 && $19 == 0 && (s !~ /-eos$/ || $20 == 0)) ok++; lo = (lo == "" || $16 < lo) ? $16 : lo} END {printf "%s/%d (%d of %d reps all)\n", lo, e, ok, n}' "$raw")
	printf '%-12s %8s %8s %11s %7s %12s %8s %10s  %s\n' "$s" "$(med "$s" first_s)" "$(med "$s" drain_s)" "$(med "$s" drain_rps)" "$(med "$s" cpu_s)" \
		"$(med "$s" steady_rps)" "$(med "$s" rss_mib)" "$(med "$s" broker_cpu_s)" "$ag"
done
if [[ " ${systems[*]} " == *" windowd "* ]]; then
	echo
	echo "# ratios of the medians, system / windowd (time and memory: above 1 = windowd better; rates: below 1 = windowd better)"
	printf '%-12s %9s %8s %12s %9s\n' system "drain s" "CPU s" "steady rec/s" "RSS MiB"
	for s in "${systems[@]}"; do
		[ "$s" = windowd ] && continue
		printf '%-12s %9s %8s %12s %9s\n' "$s" "$(ratio "$(med "$s" drain_s)" "$(med windowd drain_s)")" \
			"$(ratio "$(med "$s" cpu_s)" "$(med windowd cpu_s)")" "$(ratio "$(med "$s" steady_rps)" "$(med windowd steady_rps)")" \
			"$(ratio "$(med "$s" rss_mib)" "$(med windowd rss_mib)")"
	done
fi
if [[ " ${systems[*]} " == *" windowd-eos "* ]]; then
	echo
	echo "# exactly once, ratios of the medians, system / windowd-eos"
	printf '%-13s %9s %8s %12s %9s\n' system "drain s" "CPU s" "steady rec/s" "RSS MiB"
	for s in "${systems[@]}"; do
		if [[ $s != *-eos ]] || [ "$s" = windowd-eos ]; then continue; fi
		printf '%-13s %9s %8s %12s %9s\n' "$s" "$(ratio "$(med "$s" drain_s)" "$(med windowd-eos drain_s)")" \
			"$(ratio "$(med "$s" cpu_s)" "$(med windowd-eos cpu_s)")" "$(ratio "$(med "$s" steady_rps)" "$(med windowd-eos steady_rps)")" \
			"$(ratio "$(med "$s" rss_mib)" "$(med windowd-eos rss_mib)")"
	done
	[[ " ${systems[*]} " != *" windowd "* ]] ||
		echo "# the exactly_once cost: windowd-eos / windowd CPU s: $(ratio "$(med windowd-eos cpu_s)" "$(med windowd cpu_s)"); drain s: $(ratio "$(med windowd-eos drain_s)" "$(med windowd drain_s)")"
fi
echo "# agreement: $([ "$all_agree" = 1 ] && echo "every final pane of every system agreed with the batch computation and so with the others, in every repetition" || echo "DISAGREEMENT: see the lines above and $out/compare-agree-r*.tsv")"
echo "# load (1-min) at each run's start: $(awk -F'\t' 'NR > 1 {printf "%s%s", (NR > 2 ? " " : ""), $4}' "$raw")"
echo "# raw: $raw"
[ "$all_agree" = 1 ]
