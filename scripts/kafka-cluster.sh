#!/usr/bin/env bash
# A local three-node Apache Kafka cluster (KRaft, each node broker+controller)
# on one machine, for the broker-failure tests and for users who want to see
# windowd ride through a broker restart. Every topic, the internal ones too,
# has replication 3 and min.insync.replicas 2, and the internal topics have
# Kafka's 50 partitions, as in production. A killed node is fenced 4 s after
# its last heartbeat (broker.session.timeout.ms, set by kafka-local.sh for a
# node of a quorum; Kafka's default is 9 s).
#
#   scripts/kafka-cluster.sh start          start three fresh nodes, wait until all answer
#   scripts/kafka-cluster.sh stop           stop every node (no-op when not running)
#   scripts/kafka-cluster.sh status         exit 0 iff every node is running and answering
#   scripts/kafka-cluster.sh brokers        print the bootstrap list (host:port,...)
#   scripts/kafka-cluster.sh kill N         SIGKILL node N (1..3): a crash
#   scripts/kafka-cluster.sh stop-node N    SIGTERM node N and wait for it: a clean shutdown
#   scripts/kafka-cluster.sh start-node N   start node N again on its data, wait until it answers
#   scripts/kafka-cluster.sh topics ARGS..  kafka-topics against the cluster
#
# Each node is scripts/kafka-local.sh with its own data dir and ports
# (node N: PLAINTEXT on 127.0.0.1:$((WINDOWD_KAFKA_CLUSTER_PORT+N-1)), controller on
# 127.0.0.1:$((WINDOWD_KAFKA_CLUSTER_CONTROLLER_PORT+N-1))); the jars come from the
# same cache. Environment (all optional):
#   WINDOWD_KAFKA_CLUSTER_DIR              parent of the nodes' data dirs (default /tmp/windowd-kafka-cluster)
#   WINDOWD_KAFKA_CLUSTER_PORT             node 1's PLAINTEXT port (default 29092)
#   WINDOWD_KAFKA_CLUSTER_CONTROLLER_PORT  node 1's controller port (default 29192)
#   WINDOWD_KAFKA_HEAP_OPTS                each node's heap flags (default "-Xms128m -Xmx512m")
# and the cache settings of kafka-local.sh.
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
LOCAL="$SCRIPT_DIR/kafka-local.sh"
BASE="${WINDOWD_KAFKA_CLUSTER_DIR:-/tmp/windowd-kafka-cluster}"
BASE="${BASE%/}"
PORT0="${WINDOWD_KAFKA_CLUSTER_PORT:-29092}"
CPORT0="${WINDOWD_KAFKA_CLUSTER_CONTROLLER_PORT:-29192}"
NODES=3

die() {
	echo "$*" >&2
	exit 1
}

[[ $PORT0 =~ ^[0-9]+$ && $CPORT0 =~ ^[0-9]+$ ]] || die "kafka-cluster: the ports must be numbers"
[[ $BASE == /?* ]] || die "kafka-cluster: WINDOWD_KAFKA_CLUSTER_DIR must be an absolute path other than /"

# addresses PORT [ID@]: every node's 127.0.0.1:port (node N on PORT+N-1),
# comma-separated, each prefixed with N@ when asked (the quorum voters).
addresses() {
	local i out=""
	for ((i = 1; i <= NODES; i++)); do
		out+="${out:+,}${2:+$i@}127.0.0.1:$(($1 + i - 1))"
	done
	echo "$out"
}
voters() { addresses "$CPORT0" id; }
brokers() { addresses "$PORT0"; }

# node N CMD...: run kafka-local.sh CMD as node N.
node() {
	local n="$1"
	shift
	env -u WINDOWD_KAFKA_SECURITY \
		WINDOWD_KAFKA_DIR="$BASE/node$n" \
		WINDOWD_KAFKA_PORT="$((PORT0 + n - 1))" \
		WINDOWD_KAFKA_CONTROLLER_PORT="$((CPORT0 + n - 1))" \
		WINDOWD_KAFKA_NODE_ID="$n" \
		WINDOWD_KAFKA_VOTERS="$(voters)" \
		WINDOWD_KAFKA_REPLICATION="$NODES" \
		WINDOWD_KAFKA_INTERNAL_PARTITIONS=50 \
		WINDOWD_KAFKA_HEAP_OPTS="${WINDOWD_KAFKA_HEAP_OPTS:--Xms128m -Xmx512m}" \
		bash "$LOCAL" "$@"
}

check_node() {
	[[ ${1:-} =~ ^[1-9][0-9]*$ && $1 -le $NODES ]] || die "kafka-cluster: node must be 1..$NODES, got '${1:-}'"
}

cmd_start() {
	bash "$LOCAL" fetch
	mkdir -p "$BASE"
	# The nodes start together: none answers before a quorum of
	# controllers has formed.
	local i failed=0
	local -a pids=()
	for ((i = 1; i <= NODES; i++)); do
		node "$i" start >"$BASE/node$i.start.log" 2>&1 &
		pids+=("$!")
	done
	for ((i = 1; i <= NODES; i++)); do
		if ! wait "${pids[i - 1]}"; then
			echo "kafka-cluster: node $i failed to start:" >&2
			cat "$BASE/node$i.start.log" >&2
			failed=1
		fi
	done
	if ((failed)); then
		cmd_stop
		exit 1
	fi
	echo "kafka-cluster: ready on $(brokers) (replication $NODES, min.insync.replicas 2)"
}

cmd_stop() {
	local i
	for ((i = 1; i <= NODES; i++)); do
		node "$i" stop || true
	done
}

cmd_status() {
	local i
	for ((i = 1; i <= NODES; i++)); do
		node "$i" status || return 1
	done
}

cmd_kill() {
	check_node "$1"
	local pidf="$BASE/node$1/kafka.pid" pid
	[[ -f $pidf ]] || die "kafka-cluster: node $1 has no pid file"
	pid="$(cat "$pidf")"
	kill -KILL "$pid" 2>/dev/null || true
	while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
	echo "kafka-cluster: node $1 killed (SIGKILL)"
}

[[ $# -ge 1 ]] || die "usage: $0 start|stop|status|brokers|kill N|stop-node N|start-node N|topics ARGS"
cmd="$1"
shift
case "$cmd" in
start) cmd_start ;;
stop) cmd_stop ;;
status) cmd_status ;;
brokers) brokers ;;
kill) cmd_kill "${1:-}" ;;
stop-node)
	check_node "${1:-}"
	node "$1" stop
	;;
start-node)
	check_node "${1:-}"
	WINDOWD_KAFKA_KEEP_DATA=1 node "$1" start
	;;
topics) node 1 topics "$@" ;;
*) die "usage: $0 start|stop|status|brokers|kill N|stop-node N|start-node N|topics ARGS" ;;
esac
