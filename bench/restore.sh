#!/usr/bin/env bash
# bench/restore.sh [REPS] — changelog volume and cold-restore time of
# `windowd run` against the local Kafka broker (see bench/README.md).
#
# Per repetition, on a fresh 4-partition input topic (unique name):
#   1. produce RECORDS records of bench/gen over KEYS keys (partition =
#      key mod 4, as gen says; Kafka key = gen's key = the group key) with kcat;
#   2. instance A (`windowd run`, tumbling 1 h, count + sum, empty state dir)
#      consumes them all; once every record is in and two more commit cycles
#      have run, read its metrics (open windows, state writes, changelog
#      records and bytes); stop it (SIGTERM);
#   3. read the changelog topic back with kcat (key records, markers, bytes,
#      latest value per key) and its .log segment sizes in the broker's dir;
#   4. produce BACKLOG more records (event times after the first ones), then
#      instance B, same group, EMPTY state dir: time from exec to /readyz 200,
#      restore seconds and records per partition (metrics and log), the
#      restore's wall time (its partitions restore in the background, 2 at a
#      time), open windows after the restore (must equal A's plus what the
#      backlog opened: checked with BACKLOG=0), and, sampling /api/status
#      every 0.2 s, the input records/s B processed on its restored
#      partitions while others still restored, against its records/s after;
#   5. delete the run's topics (KEEP_TOPICS=1 keeps them).
# Then it prints the medians over the REPS repetitions (default 3).
#
# Needs: a broker from `bash scripts/kafka-local.sh start` (this script never
# starts or stops one; its `topics` subcommand creates and deletes topics),
# kcat, curl, jq, go.
#
# Environment:
#   RECORDS=500000 KEYS=100000   input size (gen: 1000 records/s of event time,
#                                so 500k records span 500 s: one open window per key)
#   BACKLOG=0                    records produced after A stopped, before B starts
#   B_BIN=path                   the windowd binary of instance B (default: this
#                                tree's): another build's restore on the same changelog
#   COMMIT_INTERVAL=1s           the pipeline's commit_interval
#   CACHE_BYTES=64MiB            state.cache_bytes
#   WINDOWD_KAFKA_PORT=9092      broker port on 127.0.0.1 (as scripts/kafka-local.sh)
#   WINDOWD_KAFKA_DIR=/tmp/windowd-kafka  broker data dir, for segment sizes (optional)
#   KEEP_TOPICS=1                do not delete the topics afterwards
#
# Raw measurements: bench/out/restore-raw.tsv (one line per repetition);
# logs of the last repetition: bench/out/restore-{a,b}.log, B's samples of
# /api/status (seconds, records in, restoring): bench/out/restore-samples.tsv.
set -euo pipefail

reps=${1:-3}
case $reps in '' | *[!0-9]* | 0) echo "usage: bench/restore.sh [REPS>=1]" >&2; exit 2 ;; esac

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
script=restore.sh
# shellcheck source=bench/lib.sh
. bench/lib.sh
out=bench/out
mkdir -p "$out"

records=${RECORDS:-500000}
keys=${KEYS:-100000}
backlog=${BACKLOG:-0}
partitions=4
commit_interval=${COMMIT_INTERVAL:-1s}
cache_bytes=${CACHE_BYTES:-64MiB}
port=${WINDOWD_KAFKA_PORT:-9092}
broker=127.0.0.1:$port
kafka_dir=${WINDOWD_KAFKA_DIR:-/tmp/windowd-kafka}
wait_limit=300 # seconds A may take to consume, B to become ready

need_broker

tmp=$(mktemp -d)
pid=""
topics=()
cleanup() {
	if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
		kill -TERM "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	fi
	if [ -z "${KEEP_TOPICS:-}" ] && [ ${#topics[@]} -gt 0 ]; then
		bash scripts/kafka-local.sh status >/dev/null 2>&1 ||
			echo "restore.sh: broker gone; delete these topics later: ${topics[*]}" >&2
		bash scripts/kafka-local.sh status >/dev/null 2>&1 && for t in "${topics[@]}"; do
			bash scripts/kafka-local.sh topics --delete --if-exists --topic "$t" >/dev/null 2>&1 || true
		done
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# "p=value ..." of metric $1 per partition label in file $2, value printed with format $3
mparts() {
	awk -v n="$1" -v f="$3" 'index($1, n "{") == 1 && match($1, /partition="[0-9]+"/) {
		p = substr($1, RSTART + 11, RLENGTH - 12); v[p] = $2 }
		END { for (p = 0; p < 64; p++) if (p in v) printf "%s%d=" f, (s++ ? " " : ""), p, v[p]; print "" }' "$2"
}
# stop the running instance with SIGTERM; sets stop_s to the seconds it took
stop_instance() {
	local t0 rc=0
	t0=$(now)
	kill -TERM "$pid"
	wait "$pid" || rc=$?
	pid=""
	[ "$rc" = 0 ] || fail_with_log "instance exited with status $rc after SIGTERM" "$1"
	stop_s=$(awk -v a="$t0" -v b="$(now)" 'BEGIN {printf "%.2f\n", b - a}')
}
write_config() { # file state_dir topic group
	cat >"$1" <<EOF
kafka: {brokers: ["$broker"]}
state: {dir: "$2", cache_bytes: $cache_bytes}
http: {listen: "127.0.0.1:0"}
shutdown_grace: 60s
pipelines:
  - name: bench
    input: {topic: $3, group: $4}
    timestamp: {field: ts, format: unix_ms}
    watermark: {strategy: bounded_out_of_orderness, max_delay: 2s}
    window: {type: tumbling, size: 1h}
    aggregates:
      - {name: n, op: count}
      - {name: total, op: sum, field: x}
    output: {topic: $3-windows}
    dead_letter_topic: $3-dlq
    commit_interval: $commit_interval
EOF
}

echo "# windowd restore benchmark — $(date -u +%Y-%m-%dT%H:%MZ)"
echo "# commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet HEAD -- . 2>/dev/null || echo ' (working tree has changes)'); $(go version | cut -d' ' -f3-); $(nproc) CPUs; $(awk '/MemTotal/{printf "%.1f GiB RAM", $2/1048576}' /proc/meminfo)"
echo "# $records records, $keys keys, $partitions partitions; tumbling 1h count+sum; commit_interval $commit_interval; cache_bytes $cache_bytes; broker $broker"
[ -z "${B_BIN:-}" ] || echo "# instance B runs $B_BIN"
bin=$tmp/windowd
go build -o "$bin" ./cmd/windowd
go build -o "$tmp/gen" ./bench/gen

split_input "$tmp/gen" "$tmp" p "$keys" "$partitions" -records "$records"
[ "$(cat "$tmp"/p[0-9]*.tsv | wc -l)" = "$records" ] || die "splitting the generated input failed"
if [ "$backlog" -gt 0 ]; then
	# event times after the first input's (gen: 1000 records/s from 1700000000000)
	split_input "$tmp/gen" "$tmp" backlog "$keys" "$partitions" -records "$backlog" -seed 2 -start $((1700000000000 + records + 10000))
	[ "$(cat "$tmp"/backlog*.tsv | wc -l)" = "$backlog" ] || die "splitting the backlog failed"
fi

raw=$out/restore-raw.tsv
cols="rep windows input_records state_writes changelog_records changelog_key_records changelog_markers changelog_bytes_metric changelog_key_bytes latest_value_bytes segment_bytes commits consume_s stop_a_s ready_s restore_s_sum restore_records b_reconsumed b_windows load1 restore_s_parts restore_records_parts restore_s_wall during_rps after_rps"
tr ' ' '\t' <<<"$cols" >"$raw"

for ((r = 1; r <= reps; r++)); do
	load=$(cut -d' ' -f1 /proc/loadavg)
	topic=windowd-restore-$(date +%s)-$RANDOM
	group=$topic-g
	cl=$group-bench-changelog
	topics+=("$topic" "$topic-windows" "$topic-dlq" "$cl")
	echo "# rep $r/$reps: topic $topic, load $load" >&2
	bash scripts/kafka-local.sh topics --create --topic "$topic" --partitions $partitions --replication-factor 1 >/dev/null
	t0=$(now)
	produce_input "$broker" "$tmp" p "$topic" "$partitions"
	produced=$(end_offsets "$broker" "$topic" "$partitions")
	[ "$produced" = "$records" ] || die "produced $produced records, expected $records"
	echo "#   produced $records records in $(awk -v a="$t0" -v b="$(now)" 'BEGIN {printf "%.1f", b - a}') s" >&2

	# --- instance A: consume everything ---------------------------------
	mkdir -p "$tmp/state-a$r" "$tmp/state-b$r"
	write_config "$tmp/a$r.yaml" "$tmp/state-a$r" "$topic" "$group"
	write_config "$tmp/b$r.yaml" "$tmp/state-b$r" "$topic" "$group"
	loga=$out/restore-a.log
	t0=$(now)
	"$bin" run --config "$tmp/a$r.yaml" >/dev/null 2>"$loga" &
	pid=$!
	addr=$(http_addr "$loga" "$pid") || fail_with_log "instance A did not start its HTTP listener" "$loga"
	m=$tmp/metrics
	consumed=""
	c0=0
	while :; do
		kill -0 "$pid" 2>/dev/null || fail_with_log "instance A exited" "$loga"
		curl -sf "http://$addr/metrics" >"$m" || { sleep 0.2; continue; }
		in=$(msum windowd_records_in_total "$m")
		commits=$(msum windowd_commit_latency_seconds_count "$m")
		if [ -z "$consumed" ] && [ "$in" -ge "$records" ]; then
			consumed=$(awk -v a="$t0" -v b="$(now)" 'BEGIN {printf "%.1f", b - a}')
			c0=$commits
		fi
		# two full commit cycles after the last record: every change is logged
		[ -n "$consumed" ] && [ "$commits" -ge $((c0 + 2)) ] && break
		awk -v a="$t0" -v b="$(now)" -v l=$wait_limit 'BEGIN {exit !(b - a > l)}' &&
			fail_with_log "instance A consumed $in of $records records in ${wait_limit}s" "$loga"
		sleep 0.5
	done
	windows=$(msum windowd_open_windows "$m")
	in=$(msum windowd_records_in_total "$m")
	writes=$(msum windowd_state_writes_total "$m")
	clrec=$(msum windowd_changelog_records_total "$m")
	clbytes=$(msum windowd_changelog_bytes_total "$m")
	stop_instance "$loga"
	stopa=$stop_s
	clrec_after=$(end_offsets "$broker" "$cl" "$partitions")
	[ "$clrec_after" = "$clrec" ] ||
		echo "#   note: changelog end offsets sum to $clrec_after after A stopped; A's metric said $clrec before SIGTERM" >&2

	# --- the changelog as written --------------------------------------
	read -r keyrecs markers keybytes latest < <(
		kcat -C -b "$broker" -t "$cl" -o beginning -e -q -f '%K %S %k\n' |
			awk '$1 == 1 && $3 == "m" {m++; next}
				{n++; v = ($2 < 0 ? 0 : $2); b += $1 + v; last[$3] = $1 + v}
				END {for (k in last) l += last[k]; printf "%d %d %d %d\n", n, m, b, l}')
	segbytes=-
	if [ -d "$kafka_dir/logs/$cl-0" ]; then
		segbytes=$(cat "$kafka_dir"/logs/"$cl"-*/*.log | wc -c)
	fi

	# --- instance B: empty state dir, same group --------------------------
	if [ "$backlog" -gt 0 ]; then
		produce_input "$broker" "$tmp" backlog "$topic" "$partitions"
		[ "$(end_offsets "$broker" "$topic" "$partitions")" = $((records + backlog)) ] || die "backlog not produced"
	fi
	logb=$out/restore-b.log
	samples=$tmp/samples-b$r
	: >"$samples"
	t0=$(now)
	"${B_BIN:-$bin}" run --config "$tmp/b$r.yaml" >/dev/null 2>"$logb" &
	pid=$!
	addr=$(http_addr "$logb" "$pid") || fail_with_log "instance B did not start its HTTP listener" "$logb"
	ready=""
	while :; do
		kill -0 "$pid" 2>/dev/null || fail_with_log "instance B exited before /readyz answered 200" "$logb"
		# seconds since exec, records in, whether a restore runs
		curl -sf "http://$addr/api/status" |
			jq -r --arg t "$(awk -v a="$t0" -v b="$(now)" 'BEGIN {printf "%.3f", b - a}')" \
				'[$t, (.pipelines[0].records_in // 0), (if .pipelines[0].restore == null then 0 else 1 end)] | @tsv' >>"$samples" || true
		if [ -z "$ready" ] && [ "$(curl -s -o /dev/null -w '%{http_code}' "http://$addr/readyz")" = 200 ]; then
			ready=$(awk -v a="$t0" -v b="$(now)" 'BEGIN {printf "%.2f\n", b - a}')
		fi
		# with a backlog: until it is consumed too
		if [ -n "$ready" ]; then
			[ "$backlog" = 0 ] && break
			[ "$(tail -1 "$samples" | cut -f2)" -ge "$backlog" ] && break
		fi
		awk -v a="$t0" -v b="$(now)" -v l=$wait_limit 'BEGIN {exit !(b - a > l)}' &&
			fail_with_log "instance B not ready after ${wait_limit}s: $(curl -s "http://$addr/readyz" | tr '\n' ' ')" "$logb"
		sleep 0.2
	done
	cp "$samples" "$out/restore-samples.tsv"
	# records/s processed while a restore ran (from the first sample with a
	# record in), and after the last one (until the backlog was consumed)
	read -r during after < <(awk -F'\t' '
		$3 == 1 && $2 > 0 && t1 == "" {t1 = $1; n1 = $2}
		$3 == 1 {t2 = $1; n2 = $2}
		$3 == 0 && t2 != "" && t3 == "" {t3 = $1; n3 = $2}
		$3 == 0 {t4 = $1; n4 = $2}
		END {
			d = (t1 != "" && t2 > t1) ? sprintf("%.0f", (n2 - n1) / (t2 - t1)) : "-"
			a = (t3 != "" && t4 > t3) ? sprintf("%.0f", (n4 - n3) / (t4 - t3)) : "-"
			print d, a
		}' "$samples")
	# the open-windows gauge is refreshed by the poll loop: wait for it
	for ((i = 0; i < 50; i++)); do
		curl -sf "http://$addr/metrics" >"$m"
		bwin=$(msum windowd_open_windows "$m")
		[ "$bwin" = "$windows" ] || [ "$backlog" -gt 0 ] && break
		sleep 0.2
	done
	rsum=$(awk '/^windowd_restore_seconds\{/ {s += $2} END {printf "%.2f\n", s}' "$m")
	rmax=$(awk '/^windowd_restore_seconds\{/ && $2 > m {m = $2} END {printf "%.2f\n", m}' "$m")
	rrec=$(msum windowd_restore_records_total "$m")
	rparts=$(mparts windowd_restore_seconds "$m" '%.2f')
	rrparts=$(mparts windowd_restore_records_total "$m" '%d')
	bin_in=$(($(msum windowd_records_in_total "$m") - backlog))
	nlog=$(jq -R -c 'fromjson? | select(.msg == "partition state restored from the changelog")' "$logb" | wc -l)
	stop_instance "$logb"
	[ "$bwin" = "$windows" ] || [ "$backlog" -gt 0 ] || echo "#   MISMATCH: B has $bwin open windows after the restore, A had $windows" >&2
	[ "$nlog" = "$partitions" ] || echo "#   note: $nlog restore log lines, expected $partitions" >&2

	printf '%s\n' "$r" "$windows" "$in" "$writes" "$clrec" "$keyrecs" "$markers" "$clbytes" "$keybytes" "$latest" \
		"$segbytes" "$c0" "$consumed" "$stopa" "$ready" "$rsum" "$rrec" "$bin_in" "$bwin" "$load" "$rparts" "$rrparts" "$rmax" "$during" "$after" |
		paste -sd '\t' >>"$raw"
	echo "#   windows $windows; state writes $writes; changelog $clrec records ($keyrecs keys, $markers markers), $clbytes B; B ready in ${ready}s, restore ${rmax}s wall ($rparts), $rrec records; records/s during restores $during, after $after" >&2
	jq -R -r 'fromjson? | select(.msg == "partition state restored from the changelog") |
		"#     log: partition \(.partition) from_scratch=\(.from_scratch) records=\(.records) bytes=\(.bytes) took=\(.took)s"' "$logb" >&2

	if [ -z "${KEEP_TOPICS:-}" ]; then
		for t in "$topic" "$topic-windows" "$topic-dlq" "$cl"; do
			bash scripts/kafka-local.sh topics --delete --if-exists --topic "$t" >/dev/null 2>&1 || true
		done
		topics=()
	fi
	rm -rf "$tmp/state-a$r" "$tmp/state-b$r"
done

ratio() { awk -v a="$1" -v b="$2" -v f="${3:-%.2f}" 'BEGIN {if (b + 0 == 0 || a == "-") print "-"; else printf f "\n", a / b}'; }
windows=$(med_col "$raw" windows)
in=$(med_col "$raw" input_records)
writes=$(med_col "$raw" state_writes)
keyrecs=$(med_col "$raw" changelog_key_records)
clrec=$(med_col "$raw" changelog_records)
clbytes=$(med_col "$raw" changelog_bytes_metric)
latest=$(med_col "$raw" latest_value_bytes)
seg=$(med_col "$raw" segment_bytes)
rsum=$(med_col "$raw" restore_s_sum)
rrec=$(med_col "$raw" restore_records)
rate=$(awk -F'\t' 'NR > 1 && $23 > 0 {printf "%.0f\n", $17 / $23}' "$raw" | sort -g |
	awk '{v[NR] = $1} END {if (NR == 0) print "-"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2}')
parts=$(awk -F'\t' 'NR > 1 {n = split($21, a, " "); for (i = 1; i <= n; i++) {split(a[i], kv, "="); print kv[1], kv[2]}}' "$raw" |
	sort -k1,1n -k2,2g | awk '{v[$1] = v[$1] " " $2; c[$1]++} END {for (p = 0; p < 64; p++) if (p in v) {n = split(v[p], x, " "); m = (n % 2) ? x[(n + 1) / 2] : (x[n / 2] + x[n / 2 + 1]) / 2; printf "%s%d=%s", (s++ ? " " : ""), p, m} print ""}')

echo
echo "# $reps repetition(s); medians (per-column, so derived figures are computed from the medians)"
printf '%-44s %s\n' \
	"open windows (A; B after restore)" "$windows; $(med_col "$raw" b_windows)" \
	"input records" "$in" \
	"state writes (local store key writes)" "$writes" \
	"changelog key records" "$keyrecs" \
	"changelog markers" "$(med_col "$raw" changelog_markers)" \
	"changelog records (metric, keys + markers)" "$clrec" \
	"changelog bytes (key+value of key records)" "$clbytes" \
	"changelog bytes per window" "$(ratio "$clbytes" "$windows" %.1f)" \
	"changelog key records per window" "$(ratio "$keyrecs" "$windows")" \
	"latest value per key, bytes per window" "$(ratio "$latest" "$windows" %.1f)" \
	"changelog .log segment bytes (on the broker)" "$seg" \
	"segment bytes per window" "$(ratio "$seg" "$windows" %.1f)" \
	"input : state writes : changelog key records" "$(ratio "$in" "$keyrecs") : $(ratio "$writes" "$keyrecs") : 1" \
	"A: commit cycles (incl. 2 at assignment); s" "$(med_col "$raw" commits); $(med_col "$raw" consume_s)   (when the last record was in)" \
	"B: exec to /readyz 200, s" "$(med_col "$raw" ready_s)" \
	"B: restore seconds, wall (longest partition)" "$(med_col "$raw" restore_s_wall)" \
	"B: restore seconds, sum over partitions" "$rsum" \
	"B: restore seconds per partition" "$parts" \
	"B: restore records (all partitions)" "$rrec" \
	"B: restore records/s (records / wall s)" "$rate" \
	"B: input records/s while restores ran; after" "$(med_col "$raw" during_rps); $(med_col "$raw" after_rps)   (BACKLOG=$backlog)" \
	"B: input records consumed again" "$(med_col "$raw" b_reconsumed)"
echo "# load (1-min) at the start of each repetition: $(awk -F'\t' 'NR > 1 {printf "%s ", $20}' "$raw")"
echo "# raw: $raw"
