# Helpers shared by the bench scripts; source it after setting `script` to
# the script's name (for messages): script=e2e.sh; . bench/lib.sh

# die MSG: print "script: MSG" and exit 1.
die() { echo "$script: $*" >&2; exit 1; }

# fail_with_log MSG LOG: die with the last lines of LOG.
fail_with_log() {
	echo "$script: $1; last lines of $2:" >&2
	tail -20 "$2" >&2
	exit 1
}

# now: the time in seconds with nanoseconds.
now() { date +%s.%N; }

# need_kcat installs Debian's kcat when it is missing and apt-get can
# (root, or sudo without a password), so that a benchmark is one command.
need_kcat() {
	command -v kcat >/dev/null && return 0
	command -v apt-get >/dev/null || die "needs kcat (not found, and no apt-get to install it)"
	local sudo=""
	[ "$(id -u)" = 0 ] || sudo="sudo -n"
	echo "$script: installing kcat (apt-get)" >&2
	{ $sudo apt-get update -q && $sudo apt-get install -y -q --no-install-recommends kcat; } >&2 ||
		die "needs kcat: apt-get install kcat failed"
}

# need_broker checks for the tools a run against the local broker uses
# (kcat, curl, jq, go) and that the broker on $broker answers.
need_broker() {
	need_kcat
	for t in curl jq go; do command -v "$t" >/dev/null || die "needs $t"; done
	bash scripts/kafka-local.sh status >/dev/null 2>&1 ||
		die "no broker answering on $broker: start one with 'bash scripts/kafka-local.sh start'"
}

# msum NAME FILE: the sum of the samples of Prometheus metric NAME in FILE
# (a /metrics scrape).
msum() { awk -v n="$1" '$1 == n || index($1, n "{") == 1 {s += $2} END {printf "%.0f\n", s}' "$2"; }

# http_addr LOG PID: the address windowd logged as "http listening" in LOG,
# waiting up to 15 s while PID runs.
http_addr() {
	local log=$1 pid=$2 i addr
	for ((i = 0; i < 300; i++)); do
		addr=$(jq -R -r 'fromjson? | select(.msg == "http listening") | .addr' "$log" 2>/dev/null | head -1)
		[ -n "$addr" ] && { echo "$addr"; return 0; }
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.05
	done
	return 1
}

# select_cases: keep of the array `cases` (entries "ID|...") those whose ID
# the space-separated CASES names, in table order; all when CASES is unset.
select_cases() {
	[ -n "${CASES:-}" ] || return 0
	local sel=() c want
	for c in "${cases[@]}"; do
		for want in $CASES; do [ "${c%%|*}" = "$want" ] && sel+=("$c"); done
	done
	[ ${#sel[@]} -gt 0 ] || die "CASES matches nothing"
	cases=("${sel[@]}")
}

# median: the median of the numbers on stdin ("-" when there is none).
median() { sort -g | awk '{v[NR] = $1} END {if (NR == 0) print "-"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

# med_col FILE COLUMN: the median of a named column of a tab-separated file
# with a header line, leaving out "-".
med_col() {
	awk -F'\t' -v c="$2" 'NR == 1 {for (i = 1; i <= NF; i++) if ($i == c) k = i; next} $k != "-" {print $k}' "$1" | median
}

# speed_input: print the path of the replay input of speed.sh, pgo.sh and
# pair.sh (INPUT, default bench/out/rss-1m-k10000.jsonl), generating it
# with bench/gen when it is missing: 1M records, 10k keys, 4 partitions.
speed_input() {
	local in=${INPUT:-bench/out/rss-1m-k10000.jsonl}
	if [ ! -s "$in" ]; then
		echo "# generating $in" >&2
		mkdir -p bench/out
		go build -o bench/out/gen-speed ./bench/gen || die "building bench/gen failed"
		bench/out/gen-speed -records 1000000 -keys 10000 -partitions 4 >"$in.tmp" || die "generating $in failed"
		mv "$in.tmp" "$in"
	fi
	echo "$in"
}

# split_input GEN DIR PREFIX KEYS PARTITIONS GEN_ARGS...: bench/gen's JSON
# lines over KEYS keys and PARTITIONS partitions split into one
# "key<TAB>value" file per partition, DIR/PREFIX<p>.tsv (for kcat -K).
split_input() {
	local gen=$1 dir=$2 prefix=$3 keys=$4 parts=$5
	shift 5
	"$gen" -keys "$keys" -partitions "$parts" "$@" |
		awk -v dir="$dir" -v pre="$prefix" '{
			p = substr($0, 14, index($0, ",") - 14)
			rest = substr($0, index($0, ",\"key\":\"") + 8)
			k = substr(rest, 1, index(rest, "\"") - 1)
			v = substr(rest, index(rest, "\"value\":") + 8)
			print k "\t" substr(v, 1, length(v) - 1) > (dir "/" pre p ".tsv")
		}'
}

# produce_input BROKER DIR PREFIX TOPIC PARTITIONS: split_input's files into
# the topic's partitions with kcat.
produce_input() {
	local p
	for ((p = 0; p < $5; p++)); do
		[ -s "$2/$3$p.tsv" ] || continue
		kcat -P -b "$1" -t "$4" -p "$p" -K $'\t' -X linger.ms=20 -X batch.num.messages=10000 \
			-X queue.buffering.max.messages=1000000 <"$2/$3$p.tsv"
	done
}

# end_offsets BROKER TOPIC PARTITIONS: the sum of the topic's end offsets.
end_offsets() {
	local p
	kcat -b "$1" -Q $(for ((p = 0; p < $3; p++)); do echo "-t $2:$p:-1"; done) |
		awk '{s += $NF} END {print s + 0}'
}

# drop_topics TOPIC...: delete the topics a run created (quietly; those
# already gone are fine).
drop_topics() {
	local t
	for t in "$@"; do
		bash scripts/kafka-local.sh topics --delete --if-exists --topic "$t" >/dev/null 2>&1 || true
	done
}

# write_windowd_config FILE STATE_DIR GROUP OUTPUT DELIVERY: the windowd
# configuration of compare.sh's job (pgo.sh profiles the same one). It reads
# the caller's broker, topic, window_s, grace_ms, commit_ms and
# eos_commit_ms (empty: windowd's exactly_once default).
write_windowd_config() {
	local commit="commit_interval: ${commit_ms}ms"
	if [ "$5" = exactly_once ]; then
		commit="# commit_interval: windowd's exactly_once default"
		[ -z "$eos_commit_ms" ] || commit="commit_interval: ${eos_commit_ms}ms"
	fi
	cat >"$1" <<EOF
kafka: {brokers: ["$broker"], compression: lz4}
state: {dir: "$2"}
http: {listen: "127.0.0.1:0"}
shutdown_grace: 30s
pipelines:
  - name: bench
    input: {topic: $topic, group: $3}
    timestamp: {field: ts, format: unix_ms}
    watermark: {strategy: bounded_out_of_orderness, max_delay: ${grace_ms}ms}
    window: {type: tumbling, size: ${window_s}s}
    allowed_lateness: 0s
    aggregates:
      - {name: n, op: count}
      - {name: total, op: sum, field: x}
    output: {topic: $4}
    dead_letter_topic: $4-dlq
    $commit
    delivery: $5
EOF
}
