#!/usr/bin/env bash
# bench/failover.sh [REPS] — failover time of `windowd run` against the
# local Kafka broker, with and without a standby replica (see
# bench/README.md): kill -9 of the instance owning some partitions, to the
# first pane of one of them written by the instance that takes them over.
#
# Per repetition and mode (state.standby_replicas 0, then 1), on a fresh
# 4-partition input topic (unique name):
#   1. produce RECORDS records of bench/gen over KEYS keys (partition = key
#      mod 4, as gen says) with kcat;
#   2. start instances A and B (same group, own state dirs, session_timeout
#      6s, tumbling 1 h, count + sum, early panes every 200 ms of processing
#      time) and wait until they have consumed everything, committed, and
#      (standby) B follows A's partitions and has caught up;
#   3. kill -9 A, and produce one new record for one key of each of A's
#      partitions (event time inside the open windows);
#   4. the failover time is from the kill to the first pane of one of those
#      keys read from the output (checked every 50 ms); B's log gives how its restore went (from the changelog, or from
#      its standby replica) and how long it took;
#   5. stop B, delete the run's topics (KEEP_TOPICS=1 keeps them).
# Then it prints the medians per mode over the REPS repetitions (default 3).
# The session timeout (the time the group takes to notice a dead member)
# is the floor of every figure: 6 s is the broker's smallest by default.
#
# Needs: a broker from `bash scripts/kafka-local.sh start`, kcat, curl, jq, go.
#
# Environment:
#   RECORDS=2000000 KEYS=1000000  input size (864k open windows, about
#                                 half of them on A's two partitions)
#   WINDOWD_KAFKA_PORT=9092       broker port on 127.0.0.1
#   KEEP_TOPICS=1                 do not delete the topics afterwards
#
# Raw measurements: bench/out/failover-raw.tsv; logs of the last repetition:
# bench/out/failover-{a,b}.log.
set -euo pipefail

reps=${1:-3}
case $reps in '' | *[!0-9]* | 0) echo "usage: bench/failover.sh [REPS>=1]" >&2; exit 2 ;; esac

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
script=failover.sh
# shellcheck source=bench/lib.sh
. bench/lib.sh
out=bench/out
mkdir -p "$out"

records=${RECORDS:-2000000}
keys=${KEYS:-1000000}
partitions=4
port=${WINDOWD_KAFKA_PORT:-9092}
broker=127.0.0.1:$port
wait_limit=300

need_broker

tmp=$(mktemp -d)
pids=()
topics=()
cleanup() {
	for p in "${pids[@]}"; do
		kill -KILL "$p" 2>/dev/null || true
	done
	if [ -z "${KEEP_TOPICS:-}" ] && [ ${#topics[@]} -gt 0 ] && bash scripts/kafka-local.sh status >/dev/null 2>&1; then
		for t in "${topics[@]}"; do
			bash scripts/kafka-local.sh topics --delete --if-exists --topic "$t" >/dev/null 2>&1 || true
		done
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

write_config() { # file state_dir topic group standby_replicas
	cat >"$1" <<EOF
kafka: {brokers: ["$broker"], session_timeout: 6s}
state: {dir: "$2", standby_replicas: $5}
http: {listen: "127.0.0.1:0"}
pipelines:
  - name: bench
    input: {topic: $3, group: $4}
    timestamp: {field: ts, format: unix_ms}
    watermark: {strategy: bounded_out_of_orderness, max_delay: 2s}
    window: {type: tumbling, size: 1h}
    trigger: {early: {every: 200ms}}
    aggregates:
      - {name: n, op: count}
      - {name: total, op: sum, field: x}
    output: {topic: $3-windows}
    dead_letter_topic: $3-dlq
EOF
}
# status ADDR FILTER: a jq filter over the pipeline's /api/status
status() { curl -sf "http://$1/api/status" | jq -r ".pipelines[0] | $2" || echo 0; }
elapsed() { awk -v a="$1" -v b="$(now)" -v l="$2" 'BEGIN {exit !(b - a > l)}'; }

echo "# windowd failover benchmark — $(date -u +%Y-%m-%dT%H:%MZ)"
echo "# commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet HEAD -- . 2>/dev/null || echo ' (working tree has changes)'); $(go version | cut -d' ' -f3-); $(nproc) CPUs"
echo "# $records records, $keys keys, $partitions partitions; tumbling 1h count+sum; session_timeout 6s; broker $broker"
bin=$tmp/windowd
go build -o "$bin" ./cmd/windowd
go build -o "$tmp/gen" ./bench/gen
split_input "$tmp/gen" "$tmp" p "$keys" "$partitions" -records "$records"
[ "$(cat "$tmp"/p[0-9]*.tsv | wc -l)" = "$records" ] || die "splitting the generated input failed"
# the probe: one key per partition and a record for it at the input's last event time
last_ts=$((1700000000000 + records))

raw=$out/failover-raw.tsv
printf 'rep\tstandby\tfailover_s\trestore_s\trestore_records\tfrom_standby\tload1\n' >"$raw"

for ((r = 1; r <= reps; r++)); do
	for standby in 0 1; do
		load=$(cut -d' ' -f1 /proc/loadavg)
		topic=windowd-failover-$(date +%s)-$RANDOM
		group=$topic-g
		topics+=("$topic" "$topic-windows" "$topic-dlq" "$group-bench-changelog")
		echo "# rep $r/$reps, standby_replicas $standby: topic $topic, load $load" >&2
		bash scripts/kafka-local.sh topics --create --topic "$topic" --partitions $partitions --replication-factor 1 >/dev/null
		bash scripts/kafka-local.sh topics --create --topic "$topic-windows" --partitions $partitions --replication-factor 1 >/dev/null
		produce_input "$broker" "$tmp" p "$topic" "$partitions"

		declare -A addr=()
		for i in a b; do
			mkdir -p "$tmp/state-$i"
			write_config "$tmp/$i.yaml" "$tmp/state-$i" "$topic" "$group" "$standby"
			"$bin" run --config "$tmp/$i.yaml" >/dev/null 2>"$out/failover-$i.log" &
			pids+=($!)
			eval "pid_$i=$!"
			addr[$i]=$(http_addr "$out/failover-$i.log" $!) || fail_with_log "instance $i did not start" "$out/failover-$i.log"
		done
		# both consumed everything and committed; with a standby, B follows
		# A's partitions and has read their changelogs to the end
		t0=$(now)
		while :; do
			# partitions held between them, and records behind their ends
			held=$(($(status "${addr[a]}" ".partitions | length") + $(status "${addr[b]}" ".partitions | length")))
			lag=$(($(status "${addr[a]}" "[.partitions[].lag_records // 1000000] | add // 0") + $(status "${addr[b]}" "[.partitions[].lag_records // 1000000] | add // 0")))
			ready=$(status "${addr[a]}" .ready)$(status "${addr[b]}" .ready)
			if [ "$held" = "$partitions" ] && [ "$lag" = 0 ] && [ "$ready" = truetrue ]; then
				if [ "$standby" = 0 ] || [ "$(status "${addr[b]}" '.standbys | length')" -gt 0 ]; then
					break
				fi
			fi
			elapsed "$t0" $wait_limit && die "A and B did not consume the input in ${wait_limit}s (partitions $held, lag $lag, ready $ready)"
			sleep 0.5
		done
		sleep 5 # commit cycles; a standby's batches come every second
		aparts=$(status "${addr[a]}" '.group.assigned | join(" ")')
		[ -n "$aparts" ] || die "A has no partition"
		probe_keys=()
		for p in $aparts; do
			k=$(head -1 "$tmp/p$p.tsv" | cut -f1)
			probe_keys+=("$k")
			printf '%s\t{"user":"%s","ts":%d,"x":1}\n' "$k" "$k" "$last_ts" >>"$tmp/probe.tsv.$p"
		done
		# read the output from its end (record timestamps are event time:
		# the time a pane is seen here is taken instead)
		kcat -C -b "$broker" -t "$topic-windows" -o end -u -f '%k\n' >"$tmp/out.txt" 2>/dev/null &
		reader=$!
		pids+=("$reader")
		sleep 1

		t_kill=$(now)
		kill -KILL "$pid_a"
		for p in $aparts; do
			kcat -P -b "$broker" -t "$topic" -p "$p" -K $'\t' <"$tmp/probe.tsv.$p"
			rm -f "$tmp/probe.tsv.$p"
		done
		t0=$(now)
		until awk -v ks="${probe_keys[*]}" 'BEGIN {n = split(ks, a, " "); for (i = 1; i <= n; i++) k[a[i]] = 1}
			($1 in k) {found = 1; exit} END {exit !found}' "$tmp/out.txt"; do
			elapsed "$t0" 120 && fail_with_log "no pane of A's partitions within 120 s of the kill" "$out/failover-b.log"
			sleep 0.05
		done
		failover=$(awk -v a="$t_kill" -v b="$(now)" 'BEGIN {printf "%.2f", b - a}')
		read -r rs rrec from_standby < <(jq -R -r -s '[split("\n")[] | fromjson? |
			select(.msg == "partition state restored from the changelog" or .msg == "partition state restored from its standby replica")] |
			"\(map(.took) | max // 0) \(map(.records // .tail_records) | add // 0) \(map(select(.msg | test("standby"))) | length)"' "$out/failover-b.log")
		printf '%s\t%s\t%s\t%.2f\t%s\t%s\t%s\n' "$r" "$standby" "$failover" "$rs" "$rrec" "$from_standby" "$load" >>"$raw"
		echo "#   A held [$aparts]; failover ${failover}s; B's restore ${rs}s, $rrec records, $from_standby partitions from standby replicas" >&2

		kill -TERM "$pid_b" 2>/dev/null || true
		wait "$pid_b" 2>/dev/null || true
		kill "$reader" 2>/dev/null || true
		wait "$reader" 2>/dev/null || true
		pids=()
		rm -rf "$tmp/state-a" "$tmp/state-b"
		if [ -z "${KEEP_TOPICS:-}" ]; then
			for t in "${topics[@]}"; do
				bash scripts/kafka-local.sh topics --delete --if-exists --topic "$t" >/dev/null 2>&1 || true
			done
			topics=()
		fi
	done
done

echo
echo "# $reps repetition(s); medians per mode"
printf '%-20s %-12s %-12s %-16s %s\n' "standby_replicas" "failover s" "restore s" "restore records" "from standby"
for standby in 0 1; do
	col() { awk -F'\t' -v s="$standby" -v c="$1" 'NR > 1 && $2 == s {print $c}' "$raw" | median; }
	printf '%-20s %-12s %-12s %-16s %s\n' "$standby" "$(col 3)" "$(col 4)" "$(col 5)" "$(col 6)"
done
echo "# raw: $raw"
