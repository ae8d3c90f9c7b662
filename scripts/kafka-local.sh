#!/usr/bin/env bash
# Local single-node Apache Kafka (KRaft, broker+controller) for development and CI.
#
#   scripts/kafka-local.sh start          fetch Kafka if needed, start a fresh broker, wait until ready
#   scripts/kafka-local.sh stop           stop the broker (no-op when not running)
#   scripts/kafka-local.sh status         exit 0 iff the broker is running and answering
#   scripts/kafka-local.sh wait           wait until the broker answers (up to the start timeout)
#   scripts/kafka-local.sh fetch          only fetch the Kafka jars into the cache (if not there yet)
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
#   WINDOWD_KAFKA_KEEP_DATA        set to 1: start on the existing data dir instead (restart after stop)
#   WINDOWD_KAFKA_PORT             PLAINTEXT port on 127.0.0.1 (default 9092)
#   WINDOWD_KAFKA_CONTROLLER_PORT  KRaft controller port on 127.0.0.1 (default 9093)
#   WINDOWD_KAFKA_START_TIMEOUT    seconds to wait for readiness (default 90)
#   WINDOWD_KAFKA_VERSION          Kafka version to fetch (default: kafka.version in scripts/kafka/pom.xml)
#   WINDOWD_KAFKA_HEAP_OPTS        broker heap flags   (default "-Xms256m -Xmx768m")
#   WINDOWD_KAFKA_M2_REPO          Maven local repository (default $HOME/.m2/repository)
#   WINDOWD_KAFKA_CLUSTER_ID       KRaft cluster id    (default: a fixed id)
#   JAVA_HOME                      used for java (and keytool) when set
#
# One node of a cluster (scripts/kafka-cluster.sh sets these for each node):
#   WINDOWD_KAFKA_NODE_ID          node.id of this broker+controller (default 1)
#   WINDOWD_KAFKA_VOTERS           the controller quorum, id@host:port,... (controller.quorum.voters);
#                                  unset: a single standalone controller on CONTROLLER_PORT;
#                                  set: a dead node is fenced after 4 s (broker.session.timeout.ms)
#   WINDOWD_KAFKA_REPLICATION      replication factor of new and internal topics (default 1);
#                                  min.insync.replicas is 2 when it is 3 or more, else 1
#   WINDOWD_KAFKA_INTERNAL_PARTITIONS  partitions of __consumer_offsets and __transaction_state
#                                  (default 1: the first group on a fresh broker starts at once)
#
# Security listeners (opt-in; without WINDOWD_KAFKA_SECURITY=1 nothing below applies):
#   WINDOWD_KAFKA_SECURITY=1       start also adds, next to the PLAINTEXT listener (unchanged):
#                                    SASL_SSL on 127.0.0.1:$WINDOWD_KAFKA_SASL_SSL_PORT (SCRAM-SHA-256
#                                    and SCRAM-SHA-512), and SSL with required client certificates
#                                    (mTLS) on 127.0.0.1:$WINDOWD_KAFKA_MTLS_PORT;
#                                  inter-broker and controller traffic stay PLAINTEXT. A CA, the
#                                  broker's PKCS12 keystore/truststore and a client certificate are
#                                  generated once (openssl, keytool) into <data dir>/security/, which
#                                  start keeps; clients use its ca.pem, client.pem and client.key.
#   WINDOWD_KAFKA_SASL_SSL_PORT    SASL_SSL port (default 9094)
#   WINDOWD_KAFKA_MTLS_PORT        SSL + client certificate port (default 9095)
#   WINDOWD_KAFKA_SCRAM_USER       SCRAM user created at format time (default windowd)
#   WINDOWD_KAFKA_SCRAM_PASSWORD   its password, for both mechanisms (default windowd-secret)
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
KAFKA_FILES="$SCRIPT_DIR/kafka"
HOME_DIR="${HOME:-$(cd ~ && pwd)}"

HOST=127.0.0.1
PORT="${WINDOWD_KAFKA_PORT:-9092}"
CONTROLLER_PORT="${WINDOWD_KAFKA_CONTROLLER_PORT:-9093}"
CACHE_DIR="${WINDOWD_KAFKA_CACHE:-$HOME_DIR/.cache/windowd/kafka}"
DATA_DIR="${WINDOWD_KAFKA_DIR:-/tmp/windowd-kafka}"
KEEP_DATA="${WINDOWD_KAFKA_KEEP_DATA:-}"
START_TIMEOUT="${WINDOWD_KAFKA_START_TIMEOUT:-90}"
KAFKA_VERSION="${WINDOWD_KAFKA_VERSION:-}"
HEAP_OPTS="${WINDOWD_KAFKA_HEAP_OPTS:--Xms256m -Xmx768m}"
M2_REPO="${WINDOWD_KAFKA_M2_REPO:-$HOME_DIR/.m2/repository}"
CLUSTER_ID="${WINDOWD_KAFKA_CLUSTER_ID:-d2luZG93ZC1rYWZrYQAAAQ}"
SECURITY="${WINDOWD_KAFKA_SECURITY:-}"
SASL_SSL_PORT="${WINDOWD_KAFKA_SASL_SSL_PORT:-9094}"
MTLS_PORT="${WINDOWD_KAFKA_MTLS_PORT:-9095}"
SCRAM_USER="${WINDOWD_KAFKA_SCRAM_USER:-windowd}"
SCRAM_PASSWORD="${WINDOWD_KAFKA_SCRAM_PASSWORD:-windowd-secret}"
NODE_ID="${WINDOWD_KAFKA_NODE_ID:-1}"
VOTERS="${WINDOWD_KAFKA_VOTERS:-}"
REPLICATION="${WINDOWD_KAFKA_REPLICATION:-1}"
INTERNAL_PARTITIONS="${WINDOWD_KAFKA_INTERNAL_PARTITIONS:-1}"

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
SECURITY_DIR="$DATA_DIR/security"
JAVA="${JAVA_HOME:+$JAVA_HOME/bin/}java"
KEYTOOL="${JAVA_HOME:+$JAVA_HOME/bin/}keytool"

SERVICE=kafka STOP_TIMEOUT=20 READY_WAIT=0.5
WHERE="on $HOST:$PORT" # where the service answers, for messages
# shellcheck source=scripts/service-lib.sh
source "$SCRIPT_DIR/service-lib.sh"

usage() {
	echo "usage: $0 start|stop|status|wait|fetch|topics [kafka-topics args...]" >&2
	exit 2
}

check_settings() {
	local v
	for v in PORT CONTROLLER_PORT START_TIMEOUT NODE_ID REPLICATION INTERNAL_PARTITIONS; do
		[[ ${!v} =~ ^[0-9]+$ ]] || die "kafka: $v must be a number, got '${!v}'"
	done
	[[ $PORT != "$CONTROLLER_PORT" ]] || die "kafka: WINDOWD_KAFKA_PORT and WINDOWD_KAFKA_CONTROLLER_PORT must differ"
	case "$SECURITY" in
	"" | 0) SECURITY="" ;;
	1) ;;
	*) die "kafka: WINDOWD_KAFKA_SECURITY must be 1 (or unset), got '$SECURITY'" ;;
	esac
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

check_security_settings() {
	local v
	for v in SASL_SSL_PORT MTLS_PORT; do
		[[ ${!v} =~ ^[0-9]+$ ]] || die "kafka: $v must be a number, got '${!v}'"
	done
	[[ $(printf '%s\n' "$PORT" "$CONTROLLER_PORT" "$SASL_SSL_PORT" "$MTLS_PORT" | sort -u | wc -l) == 4 ]] ||
		die "kafka: the PLAINTEXT, controller, SASL_SSL and mTLS ports must differ ($PORT, $CONTROLLER_PORT, $SASL_SSL_PORT, $MTLS_PORT)"
	[[ $SCRAM_USER =~ ^[A-Za-z0-9._-]+$ ]] || die "kafka: WINDOWD_KAFKA_SCRAM_USER may only hold letters, digits, '.', '_' and '-'"
	# The password goes into --add-scram 'MECHANISM=[name=...,password="..."]'.
	# Kafka's parser splits it at every ',', even inside the quotes.
	[[ -n $SCRAM_PASSWORD && $SCRAM_PASSWORD != *[,\"\\[:cntrl:]]* ]] ||
		die "kafka: WINDOWD_KAFKA_SCRAM_PASSWORD must be non-empty, without ',', '\"', '\\' or control characters"
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

# The process is alive and is a broker (a pid file can outlive its process,
# and the pid be reused).
pid_alive() {
	local pid="$1"
	process_exists "$pid" || return 1
	if [[ -r /proc/$pid/cmdline ]]; then
		tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q 'kafka\.Kafka' || return 1
	fi
	return 0
}

# The broker answers a metadata request (list topics).
answering() {
	port_open "$PORT" || return 1
	[[ -d $LIB_DIR ]] || return 1
	[[ -f $ADMIN_PROPS ]] || write_admin_props
	timeout 30 "${TOOL_CMD[@]}" org.apache.kafka.tools.TopicCommand --bootstrap-server "$HOST:$PORT" \
		--command-config "$ADMIN_PROPS" --list >/dev/null 2>&1
}

fresh_data_dir() {
	check_settings
	if [[ -n $SECURITY && -d $SECURITY_DIR ]]; then
		# Keep the generated certificates: clients may hold copies of ca.pem.
		find "$DATA_DIR" -mindepth 1 -maxdepth 1 ! -name security -exec rm -rf {} +
	else
		rm -rf "$DATA_DIR"
	fi
	mkdir -p "$DATA_DIR/logs"
	: >"$MARKER_FILE"
}

render_config() {
	local tpl
	tpl="$(<"$KAFKA_FILES/server.properties.template")"
	tpl="${tpl//@PORT@/"$PORT"}"
	tpl="${tpl//@CONTROLLER_PORT@/"$CONTROLLER_PORT"}"
	tpl="${tpl//@DATA_DIR@/"$DATA_DIR"}"
	tpl="${tpl//@NODE_ID@/"$NODE_ID"}"
	tpl="${tpl//@REPLICATION@/"$REPLICATION"}"
	tpl="${tpl//@INTERNAL_PARTITIONS@/"$INTERNAL_PARTITIONS"}"
	local min_isr=1
	((REPLICATION < 3)) || min_isr=2
	tpl="${tpl//@MIN_ISR@/"$min_isr"}"
	printf '%s\n' "$tpl" >"$CONFIG_FILE"
	if [[ -n $VOTERS ]]; then
		sed -i "s|^controller\.quorum\.bootstrap\.servers=.*|controller.quorum.voters=$VOTERS|" "$CONFIG_FILE"
		# A node of a cluster (scripts/kafka-cluster.sh) is fenced, its
		# partitions get new leaders and its coordinators move, 4 s after
		# its last heartbeat, not Kafka's 9 s: on these nodes the 9 s
		# became 12-17 s from kill -9 to new leaders (the active
		# controller's death adds an election), most of TestBrokerFailures'
		# 20 s bound before any client can act (docs/OPERATIONS.md, Broker
		# failures, has the figures for both).
		printf '%s\n' broker.heartbeat.interval.ms=1000 broker.session.timeout.ms=4000 >>"$CONFIG_FILE"
	fi
	grep -q "^node.id=$NODE_ID\$" "$CONFIG_FILE" || die "kafka: could not render $CONFIG_FILE"
	[[ -n $SECURITY ]] || return 0

	local secure="SASL_SSL://$HOST:$SASL_SSL_PORT,SSL://$HOST:$MTLS_PORT" store_pass
	sed -i -e "s|^listeners=.*|&,$secure|" -e "s|^advertised\.listeners=.*|&,$secure|" \
		-e 's|^listener\.security\.protocol\.map=.*|&,SASL_SSL:SASL_SSL,SSL:SSL|' "$CONFIG_FILE"
	if ! grep -q "^listeners=.*,$secure\$" "$CONFIG_FILE" || ! grep -q "^advertised\.listeners=.*,$secure\$" "$CONFIG_FILE" ||
		! grep -q "^listener\.security\.protocol\.map=.*,SASL_SSL:SASL_SSL,SSL:SSL\$" "$CONFIG_FILE"; then
		die "kafka: could not add the security listeners to $CONFIG_FILE"
	fi
	store_pass="$(<"$SECURITY_DIR/store.password")"
	tpl="$(<"$KAFKA_FILES/security.properties.template")"
	tpl="${tpl//@SASL_SSL_PORT@/"$SASL_SSL_PORT"}"
	tpl="${tpl//@MTLS_PORT@/"$MTLS_PORT"}"
	tpl="${tpl//@SECURITY_DIR@/"$SECURITY_DIR"}"
	tpl="${tpl//@STORE_PASSWORD@/"$store_pass"}"
	printf '\n%s\n' "$tpl" >>"$CONFIG_FILE"
}

# The security files are complete and valid for at least another day.
have_security_files() {
	local f
	for f in ca.pem ca.key broker.p12 truststore.p12 client.pem client.key client.p12 store.password; do
		[[ -s $SECURITY_DIR/$f ]] || return 1
	done
	for f in ca.pem broker.pem client.pem; do
		openssl x509 -checkend 86400 -noout -in "$SECURITY_DIR/$f" >/dev/null 2>&1 || return 1
	done
	# The client certificate is for the SCRAM user.
	[[ "$(openssl x509 -noout -subject -nameopt RFC2253 -in "$SECURITY_DIR/client.pem" 2>/dev/null)" == "subject=CN=$SCRAM_USER" ]]
}

# Generate, once, a CA, the broker's keystore and truststore (PKCS12) and a
# client certificate into $SECURITY_DIR.
ensure_security_files() {
	have_security_files && return 0
	command -v openssl >/dev/null 2>&1 || die "kafka: openssl not found (needed for WINDOWD_KAFKA_SECURITY=1)"
	command -v "$KEYTOOL" >/dev/null 2>&1 || die "kafka: keytool not found (from the JDK; set JAVA_HOME or PATH)"
	local tmp="$DATA_DIR/security.tmp.$$" log="$DATA_DIR/security.log"
	rm -rf "$tmp" "$SECURITY_DIR"
	mkdir -p "$tmp"
	echo "kafka: generating a CA, broker and client certificates into $SECURITY_DIR" >&2
	# In the background, so that set -e holds in the subshell (it does not
	# in a condition).
	(
		set -e
		umask 077
		cd "$tmp"
		openssl rand -hex 16 >store.password
		pass="$(<store.password)"
		openssl req -x509 -newkey rsa:2048 -noenc -sha256 -days 3650 -subj "/CN=windowd-kafka-local CA" \
			-addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
			-keyout ca.key -out ca.pem
		# sign NAME SUBJECT EXTENSIONS...: NAME.key and NAME.pem, signed by the CA.
		sign() {
			local name="$1" subject="$2"
			shift 2
			openssl req -newkey rsa:2048 -noenc -sha256 -subj "$subject" -keyout "$name.key" -out "$name.csr"
			printf '%s\n' "$@" >"$name.ext"
			openssl x509 -req -sha256 -days 825 -in "$name.csr" -CA ca.pem -CAkey ca.key \
				-set_serial "0x$(openssl rand -hex 12)" -extfile "$name.ext" -out "$name.pem"
			rm -f "$name.csr" "$name.ext"
		}
		sign broker "/CN=localhost" "basicConstraints=CA:FALSE" "keyUsage=critical,digitalSignature,keyEncipherment" \
			"extendedKeyUsage=serverAuth,clientAuth" "subjectAltName=IP:127.0.0.1,DNS:localhost"
		sign client "/CN=$SCRAM_USER" "basicConstraints=CA:FALSE" "keyUsage=critical,digitalSignature,keyEncipherment" \
			"extendedKeyUsage=clientAuth"
		openssl pkcs12 -export -name broker -in broker.pem -inkey broker.key -certfile ca.pem \
			-passout "pass:$pass" -out broker.p12
		# client.p12: the client certificate for Java tools (keystore of client-mtls.properties).
		openssl pkcs12 -export -name client -in client.pem -inkey client.key -certfile ca.pem \
			-passout "pass:$pass" -out client.p12
		"$KEYTOOL" -importcert -noprompt -alias windowd-kafka-local-ca -file ca.pem \
			-keystore truststore.p12 -storetype PKCS12 -storepass "$pass"
		chmod 644 ca.pem client.pem broker.pem
	) >"$log" 2>&1 &
	if ! wait "$!"; then
		rm -rf "$tmp"
		die "kafka: generating the security files failed, see $log"
	fi
	mv "$tmp" "$SECURITY_DIR"
	have_security_files || die "kafka: the generated security files in $SECURITY_DIR are incomplete, see $log"
	rm -f "$log"
}

# Java client settings for the security listeners, for Kafka's CLI tools.
write_client_props() {
	local pass
	pass="$(<"$SECURITY_DIR/store.password")"
	printf '%s\n' "# kafka-local.sh: Java client settings for SASL_SSL on $HOST:$SASL_SSL_PORT" \
		"# (add sasl.jaas.config with the password, see below)" \
		security.protocol=SASL_SSL sasl.mechanism=SCRAM-SHA-512 \
		ssl.truststore.type=PKCS12 "ssl.truststore.location=$SECURITY_DIR/truststore.p12" "ssl.truststore.password=$pass" \
		"# sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username=\"$SCRAM_USER\" password=\"...\";" \
		>"$SECURITY_DIR/client-sasl-ssl.properties"
	printf '%s\n' "# kafka-local.sh: Java client settings for mTLS on $HOST:$MTLS_PORT" \
		security.protocol=SSL \
		ssl.truststore.type=PKCS12 "ssl.truststore.location=$SECURITY_DIR/truststore.p12" "ssl.truststore.password=$pass" \
		ssl.keystore.type=PKCS12 "ssl.keystore.location=$SECURITY_DIR/client.p12" "ssl.keystore.password=$pass" \
		>"$SECURITY_DIR/client-mtls.properties"
}

# The security listeners answer a metadata request: SCRAM-SHA-512 over TLS
# with the configured password, and TLS with the client certificate. Retried
# until the start timeout (a loaded machine), except when the broker refuses
# the credentials or the certificate.
security_answering() {
	local sasl_props="$SECURITY_DIR/.check-sasl-ssl.properties" mtls_props="$SECURITY_DIR/.check-mtls.properties"
	local log="$DATA_DIR/security-check.log" deadline=$((SECONDS + START_TIMEOUT)) ok
	(
		umask 077
		grep -v '^#' "$SECURITY_DIR/client-sasl-ssl.properties" >"$sasl_props"
		printf '%s\n' "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username=\"$SCRAM_USER\" password=\"$SCRAM_PASSWORD\";" >>"$sasl_props"
		grep -v '^#' "$SECURITY_DIR/client-mtls.properties" >"$mtls_props"
		printf '%s\n' request.timeout.ms=10000 default.api.timeout.ms=20000 | tee -a "$sasl_props" >>"$mtls_props"
	)
	while :; do
		ok=0
		timeout 60 "${TOOL_CMD[@]}" org.apache.kafka.tools.TopicCommand --bootstrap-server "$HOST:$SASL_SSL_PORT" \
			--command-config "$sasl_props" --list >/dev/null 2>"$log" || ok=1
		if ((ok == 0)); then
			timeout 60 "${TOOL_CMD[@]}" org.apache.kafka.tools.TopicCommand --bootstrap-server "$HOST:$MTLS_PORT" \
				--command-config "$mtls_props" --list >/dev/null 2>>"$log" || ok=1
		fi
		((ok == 0)) && break
		grep -q 'AuthenticationException\|SSLHandshakeException' "$log" && break
		((SECONDS < deadline)) || break
		sleep 1
	done
	rm -f "$sasl_props" "$mtls_props"
	return "$ok"
}

print_security() {
	local pw="from WINDOWD_KAFKA_SCRAM_PASSWORD"
	[[ -n ${WINDOWD_KAFKA_SCRAM_PASSWORD:-} ]] || pw="windowd-secret (the default; set WINDOWD_KAFKA_SCRAM_PASSWORD)"
	echo "kafka: SASL_SSL on $HOST:$SASL_SSL_PORT (SCRAM-SHA-256, SCRAM-SHA-512), user $SCRAM_USER, password $pw"
	echo "kafka: SSL with required client certificates (mTLS) on $HOST:$MTLS_PORT"
	echo "kafka: PEM files in $SECURITY_DIR: ca.pem (CA of the broker certificate), client.pem and client.key (client certificate CN=$SCRAM_USER)"
	echo "kafka: Java tool settings: $SECURITY_DIR/client-sasl-ssl.properties, $SECURITY_DIR/client-mtls.properties"
}

cmd_start() {
	check_settings
	[[ -z $SECURITY ]] || check_security_settings
	take_lock
	check_java
	local pid
	if pid="$(running_pid)"; then
		wait_ready || {
			show_log_tail
			die "kafka: broker (pid $pid) is running but not answering on $HOST:$PORT"
		}
		if [[ -n $SECURITY ]] && ! grep -q "^listeners=.*SASL_SSL://$HOST:$SASL_SSL_PORT,SSL://$HOST:$MTLS_PORT" "$CONFIG_FILE" 2>/dev/null; then
			die "kafka: the running broker (pid $pid) has no security listeners on $SASL_SSL_PORT/$MTLS_PORT; run '$0 stop' first"
		fi
		echo "kafka: ready on $HOST:$PORT"
		[[ -z $SECURITY ]] || print_security
		return 0
	fi
	local p
	local -a ports=("$PORT" "$CONTROLLER_PORT")
	[[ -z $SECURITY ]] || ports+=("$SASL_SSL_PORT" "$MTLS_PORT")
	for p in "${ports[@]}"; do
		port_open "$p" && die "kafka: $HOST:$p is already in use by another process"
	done
	ensure_lib
	write_admin_props
	if [[ -n $KEEP_DATA && -f $MARKER_FILE && -f $CONFIG_FILE ]]; then
		# Restart on the existing log and metadata (outage tests).
		echo "kafka: restarting on the existing data in $DATA_DIR"
	else
		fresh_data_dir
		local -a format_args=()
		if [[ -n $SECURITY ]]; then
			ensure_security_files
			write_client_props
			for p in SCRAM-SHA-256 SCRAM-SHA-512; do
				format_args+=(--add-scram "$p=[name=$SCRAM_USER,password=\"$SCRAM_PASSWORD\"]")
			done
		fi
		render_config

		# A static quorum (VOTERS) is formatted without --standalone.
		local -a quorum_args=(--standalone)
		[[ -z $VOTERS ]] || quorum_args=()
		if ! kafka_tool kafka.tools.StorageTool format "${quorum_args[@]}" -t "$CLUSTER_ID" -c "$CONFIG_FILE" "${format_args[@]}" \
			>"$DATA_DIR/format.log" 2>&1; then
			die "kafka: storage format failed, see $DATA_DIR/format.log"
		fi
	fi

	local -a heap
	read -r -a heap <<<"$HEAP_OPTS"
	# The previous start's log stays as kafka.log.1: a test that stops and
	# starts the broker (the outage tests) would otherwise lose what the
	# broker logged up to the stop.
	[[ ! -s $LOG_FILE ]] || mv -f "$LOG_FILE" "$LOG_FILE.1"
	# fd 9 (the lock) is closed for the broker so that it does not hold the lock.
	nohup "$JAVA" "${heap[@]}" -server -XX:+UseG1GC -XX:MaxGCPauseMillis=20 \
		-XX:InitiatingHeapOccupancyPercent=35 -XX:+ExplicitGCInvokesConcurrent \
		-Djava.awt.headless=true "-Dkafka.logs.dir=$DATA_DIR" \
		"-Dlog4j2.configurationFile=$KAFKA_FILES/log4j2.properties" \
		-cp "$LIB_DIR/*" kafka.Kafka "$CONFIG_FILE" \
		</dev/null >"$LOG_FILE" 2>&1 9>&- &
	pid=$!
	echo "$pid" >"$PID_FILE"

	started "$pid" "kafka: broker failed to start on $HOST:$PORT"
	echo "kafka: ready on $HOST:$PORT"
	if [[ -n $SECURITY ]]; then
		if ! security_answering; then
			tail -n 20 "$DATA_DIR/security-check.log" >&2 || true
			show_log_tail
			kill_pid "$pid"
			rm -f "$PID_FILE"
			die "kafka: the security listeners on $HOST:$SASL_SSL_PORT/$MTLS_PORT do not answer, see $DATA_DIR/security-check.log"
		fi
		print_security
	fi
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
fetch)
	check_java
	ensure_lib
	;;
topics) cmd_topics "$@" ;;
-h | --help | help) usage ;;
*) usage ;;
esac
