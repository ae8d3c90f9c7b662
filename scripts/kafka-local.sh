#!/usr/bin/env bash
# Local single-node Apache Kafka (KRaft, broker+controller) for development and CI.
#
#   scripts/kafka-local.sh start          fetch Kafka if needed, start a fresh broker, wait until ready
#   scripts/kafka-local.sh stop           stop the broker (no-op when not running)
#   scripts/kafka-local.sh status         exit 0 iff the broker is running and answering
#   scripts/kafka-local.sh wait           wait until the broker answers (up to the start timeout)
#   scripts/kafka-local.sh topics ARGS..  run kafka-topics (TopicCommand) against the broker,
#                                         e.g. topics --create --topic t --partitions 4
#
# Kafka is not downloaded as a tarball: the broker jars and their runtime
# dependencies come from Maven Central through mvn (scripts/kafka/pom.xml) and are
# cached, so only the first run needs the network. Needs Java 17+ and, for that
# first run, Maven.
#
# Environment (all optional):
#   WINDOWD_KAFKA_CACHE            jar cache           (default $HOME/.cache/windowd/kafka)
#   WINDOWD_KAFKA_DIR              data dir, wiped on every start (default /tmp/windowd-kafka)
#   WINDOWD_KAFKA_PORT             PLAINTEXT port on 127.0.0.1 (default 9092)
#   WINDOWD_KAFKA_CONTROLLER_PORT  KRaft controller port on 127.0.0.1 (default 9093)
#   WINDOWD_KAFKA_START_TIMEOUT    seconds to wait for readiness (default 90)
#   WINDOWD_KAFKA_VERSION          Kafka version to fetch (default: kafka.version in scripts/kafka/pom.xml)
#   WINDOWD_KAFKA_HEAP_OPTS        broker heap flags   (default "-Xms256m -Xmx768m")
#   WINDOWD_KAFKA_M2_REPO          Maven local repository (default $HOME/.m2/repository)
#   WINDOWD_KAFKA_CLUSTER_ID       KRaft cluster id    (default: a fixed id)
#   JAVA_HOME                      used for java when set
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
KAFKA_FILES="$SCRIPT_DIR/kafka"
HOME_DIR="${HOME:-$(cd ~ && pwd)}"

HOST=127.0.0.1
PORT="${WINDOWD_KAFKA_PORT:-9092}"
CONTROLLER_PORT="${WINDOWD_KAFKA_CONTROLLER_PORT:-9093}"
CACHE_DIR="${WINDOWD_KAFKA_CACHE:-$HOME_DIR/.cache/windowd/kafka}"
DATA_DIR="${WINDOWD_KAFKA_DIR:-/tmp/windowd-kafka}"
START_TIMEOUT="${WINDOWD_KAFKA_START_TIMEOUT:-90}"
KAFKA_VERSION="${WINDOWD_KAFKA_VERSION:-}"
HEAP_OPTS="${WINDOWD_KAFKA_HEAP_OPTS:--Xms256m -Xmx768m}"
M2_REPO="${WINDOWD_KAFKA_M2_REPO:-$HOME_DIR/.m2/repository}"
CLUSTER_ID="${WINDOWD_KAFKA_CLUSTER_ID:-d2luZG93ZC1rYWZrYQAAAQ}"

DATA_DIR="${DATA_DIR%/}"
LIB_DIR="$CACHE_DIR/lib"
STAMP_FILE="$CACHE_DIR/lib.stamp"
MVN_LOG="$CACHE_DIR/mvn.log"
ADMIN_PROPS="$CACHE_DIR/admin.properties"
PID_FILE="$DATA_DIR/kafka.pid"
LOG_FILE="$DATA_DIR/kafka.log"
CONFIG_FILE="$DATA_DIR/server.properties"
MARKER_FILE="$DATA_DIR/.windowd-kafka"
LOCK_FILE="$DATA_DIR.lock"
JAVA="${JAVA_HOME:+$JAVA_HOME/bin/}java"

die() {
	echo "$*" >&2
	exit 1
}

usage() {
	echo "usage: $0 start|stop|status|wait|topics [kafka-topics args...]" >&2
	exit 2
}

check_settings() {
	local v
	for v in PORT CONTROLLER_PORT START_TIMEOUT; do
		[[ ${!v} =~ ^[0-9]+$ ]] || die "kafka: $v must be a number, got '${!v}'"
	done
	[[ $PORT != "$CONTROLLER_PORT" ]] || die "kafka: WINDOWD_KAFKA_PORT and WINDOWD_KAFKA_CONTROLLER_PORT must differ"
	case "$DATA_DIR" in
	/?*) ;;
	*) die "kafka: WINDOWD_KAFKA_DIR must be an absolute path other than /, got '$DATA_DIR'" ;;
	esac
	[[ $DATA_DIR != "${HOME_DIR%/}" ]] || die "kafka: WINDOWD_KAFKA_DIR must not be \$HOME"
	# start wipes the data dir: only ever wipe one that this script created.
	if [[ -d $DATA_DIR && ! -f $MARKER_FILE ]] && [[ -n "$(ls -A "$DATA_DIR")" ]]; then
		die "kafka: refusing to use $DATA_DIR (not created by kafka-local.sh); remove it or set WINDOWD_KAFKA_DIR"
	fi
}

# Serialise start/stop between concurrent callers (e.g. parallel CI steps).
take_lock() {
	command -v flock >/dev/null 2>&1 || return 0
	mkdir -p "$(dirname "$LOCK_FILE")"
	exec 9>"$LOCK_FILE"
	flock -w 900 9 || die "kafka: could not lock $LOCK_FILE"
}

check_java() {
	command -v "$JAVA" >/dev/null 2>&1 || die "kafka: java not found (Java 17+ needed; set JAVA_HOME or PATH)"
	local line major
	line="$("$JAVA" -version 2>&1 | head -n 1)" || true
	major="$(sed -n 's/.*version "\([0-9]*\)[."].*/\1/p' <<<"$line")"
	[[ $major == 1 ]] && major="$(sed -n 's/.*version "1\.\([0-9]*\).*/\1/p' <<<"$line")"
	if [[ -n $major && $major -lt 17 ]]; then
		die "kafka: Java 17+ needed, found: $line"
	fi
}

wanted_stamp() {
	local sum
	sum="$(cksum <"$KAFKA_FILES/pom.xml")"
	echo "pom=${sum// /-} version=${KAFKA_VERSION:-default}"
}

have_lib() {
	[[ -f $STAMP_FILE && "$(cat "$STAMP_FILE")" == "$(wanted_stamp)" ]] || return 1
	compgen -G "$LIB_DIR/kafka_2.13-*.jar" >/dev/null
}

# Fetch the broker, tools and log4j2 jars into $LIB_DIR unless already there.
ensure_lib() {
	have_lib && return 0
	command -v mvn >/dev/null 2>&1 || die "kafka: mvn not found (needed once to fetch Kafka into $CACHE_DIR)"
	mkdir -p "$CACHE_DIR"
	local tmp="$CACHE_DIR/lib.tmp.$$"
	local args=(-B -q -Dstyle.color=never -f "$KAFKA_FILES/pom.xml" "-Dmaven.repo.local=$M2_REPO"
		dependency:copy-dependencies -DincludeScope=runtime "-DoutputDirectory=$tmp")
	[[ -n $KAFKA_VERSION ]] && args+=("-Dkafka.version=$KAFKA_VERSION")
	echo "kafka: fetching Kafka ${KAFKA_VERSION:-(pom default)} into $LIB_DIR with mvn..." >&2
	rm -rf "$tmp"
	if ! mvn "${args[@]}" >"$MVN_LOG" 2>&1 || ! compgen -G "$tmp/kafka_2.13-*.jar" >/dev/null; then
		rm -rf "$tmp"
		die "kafka: mvn failed, see $MVN_LOG"
	fi
	rm -rf "$LIB_DIR"
	mv "$tmp" "$LIB_DIR"
	wanted_stamp >"$STAMP_FILE"
}

write_admin_props() {
	mkdir -p "$CACHE_DIR"
	printf '%s\n' request.timeout.ms=4000 default.api.timeout.ms=6000 >"$ADMIN_PROPS.$$"
	mv "$ADMIN_PROPS.$$" "$ADMIN_PROPS"
}

# Run a Kafka CLI class from the cache (quiet logging, fast-start JVM flags).
TOOL_CMD=("$JAVA" -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Djava.awt.headless=true
	"-Dlog4j2.configurationFile=$KAFKA_FILES/tools-log4j2.properties" -cp "$LIB_DIR/*")
kafka_tool() {
	"${TOOL_CMD[@]}" "$@"
}

pid_alive() {
	local pid="$1" state
	kill -0 "$pid" 2>/dev/null || return 1
	if [[ -r /proc/$pid/stat ]]; then
		state="$(sed 's/^.*) \(.\).*/\1/' "/proc/$pid/stat" 2>/dev/null)" || return 1
		[[ $state != Z ]] || return 1
	fi
	if [[ -r /proc/$pid/cmdline ]]; then
		tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q 'kafka\.Kafka' || return 1
	fi
	return 0
}

# Prints the broker pid and succeeds iff the broker started by this script is alive.
running_pid() {
	local pid
	[[ -f $PID_FILE ]] || return 1
	pid="$(cat "$PID_FILE" 2>/dev/null)" || return 1
	[[ $pid =~ ^[0-9]+$ ]] || return 1
	pid_alive "$pid" || return 1
	echo "$pid"
}

port_open() {
	(exec 3<>"/dev/tcp/$HOST/$1") 2>/dev/null
}

# The broker answers a metadata request (list topics).
answering() {
	port_open "$PORT" || return 1
	[[ -d $LIB_DIR ]] || return 1
	[[ -f $ADMIN_PROPS ]] || write_admin_props
	timeout 30 "${TOOL_CMD[@]}" org.apache.kafka.tools.TopicCommand --bootstrap-server "$HOST:$PORT" \
		--command-config "$ADMIN_PROPS" --list >/dev/null 2>&1
}

show_log_tail() {
	if [[ -f $LOG_FILE ]]; then
		echo "kafka: last lines of $LOG_FILE:" >&2
		tail -n 40 "$LOG_FILE" >&2
	fi
}

# Wait until the broker answers; fail early if the broker process we started dies.
wait_ready() {
	local deadline=$((SECONDS + START_TIMEOUT)) pid
	while ((SECONDS < deadline)); do
		pid=""
		[[ -f $PID_FILE ]] && pid="$(cat "$PID_FILE" 2>/dev/null || true)"
		if [[ $pid =~ ^[0-9]+$ ]] && ! pid_alive "$pid"; then
			echo "kafka: broker process $pid exited during startup" >&2
			return 1
		fi
		if port_open "$PORT" && answering; then
			return 0
		fi
		sleep 0.5
	done
	echo "kafka: not ready on $HOST:$PORT after ${START_TIMEOUT}s" >&2
	return 1
}

kill_pid() {
	local pid="$1" i
	kill -TERM "$pid" 2>/dev/null || return 0
	for ((i = 0; i < 100; i++)); do
		pid_alive "$pid" || return 0
		sleep 0.2
	done
	echo "kafka: pid $pid did not stop within 20s, killing" >&2
	kill -KILL "$pid" 2>/dev/null || true
	for ((i = 0; i < 25; i++)); do
		pid_alive "$pid" || return 0
		sleep 0.2
	done
}

fresh_data_dir() {
	check_settings
	rm -rf "$DATA_DIR"
	mkdir -p "$DATA_DIR/logs"
	: >"$MARKER_FILE"
}

render_config() {
	local tpl
	tpl="$(<"$KAFKA_FILES/server.properties.template")"
	tpl="${tpl//@PORT@/"$PORT"}"
	tpl="${tpl//@CONTROLLER_PORT@/"$CONTROLLER_PORT"}"
	tpl="${tpl//@DATA_DIR@/"$DATA_DIR"}"
	printf '%s\n' "$tpl" >"$CONFIG_FILE"
}

cmd_start() {
	check_settings
	take_lock
	check_java
	local pid
	if pid="$(running_pid)"; then
		wait_ready || {
			show_log_tail
			die "kafka: broker (pid $pid) is running but not answering on $HOST:$PORT"
		}
		echo "kafka: ready on $HOST:$PORT"
		return 0
	fi
	local p
	for p in "$PORT" "$CONTROLLER_PORT"; do
		port_open "$p" && die "kafka: $HOST:$p is already in use by another process"
	done
	ensure_lib
	write_admin_props
	fresh_data_dir
	render_config

	if ! kafka_tool kafka.tools.StorageTool format --standalone -t "$CLUSTER_ID" -c "$CONFIG_FILE" \
		>"$DATA_DIR/format.log" 2>&1; then
		die "kafka: storage format failed, see $DATA_DIR/format.log"
	fi

	local -a heap
	read -r -a heap <<<"$HEAP_OPTS"
	# fd 9 (the lock) is closed for the broker so that it does not hold the lock.
	nohup "$JAVA" "${heap[@]}" -server -XX:+UseG1GC -XX:MaxGCPauseMillis=20 \
		-XX:InitiatingHeapOccupancyPercent=35 -XX:+ExplicitGCInvokesConcurrent \
		-Djava.awt.headless=true "-Dkafka.logs.dir=$DATA_DIR" \
		"-Dlog4j2.configurationFile=$KAFKA_FILES/log4j2.properties" \
		-cp "$LIB_DIR/*" kafka.Kafka "$CONFIG_FILE" \
		</dev/null >"$LOG_FILE" 2>&1 9>&- &
	pid=$!
	echo "$pid" >"$PID_FILE"

	if ! wait_ready; then
		show_log_tail
		kill_pid "$pid"
		rm -f "$PID_FILE"
		die "kafka: broker failed to start on $HOST:$PORT, see $LOG_FILE"
	fi
	echo "kafka: ready on $HOST:$PORT"
}

cmd_stop() {
	check_settings
	take_lock
	local pid
	if ! pid="$(running_pid)"; then
		rm -f "$PID_FILE"
		echo "kafka: not running"
		return 0
	fi
	kill_pid "$pid"
	if pid_alive "$pid"; then
		die "kafka: could not stop pid $pid"
	fi
	rm -f "$PID_FILE"
	echo "kafka: stopped (pid $pid)"
}

cmd_status() {
	check_settings
	local pid
	if ! pid="$(running_pid)"; then
		echo "kafka: not running"
		return 1
	fi
	if answering; then
		echo "kafka: running (pid $pid) on $HOST:$PORT"
		return 0
	fi
	echo "kafka: pid $pid is running but not answering on $HOST:$PORT"
	return 1
}

cmd_wait() {
	check_settings
	check_java
	# Tolerates a concurrent `start` that is still fetching or launching.
	wait_ready || {
		[[ -f $PID_FILE ]] && show_log_tail
		exit 1
	}
	echo "kafka: ready on $HOST:$PORT"
}

cmd_topics() {
	check_settings
	check_java
	[[ -d $LIB_DIR ]] || die "kafka: no Kafka jars in $LIB_DIR; run '$0 start' first"
	[[ -f $ADMIN_PROPS ]] || write_admin_props
	kafka_tool org.apache.kafka.tools.TopicCommand --bootstrap-server "$HOST:$PORT" "$@"
}

[[ $# -ge 1 ]] || usage
cmd="$1"
shift
case "$cmd" in
start) cmd_start ;;
stop) cmd_stop ;;
status) cmd_status ;;
wait) cmd_wait ;;
topics) cmd_topics "$@" ;;
-h | --help | help) usage ;;
*) usage ;;
esac
