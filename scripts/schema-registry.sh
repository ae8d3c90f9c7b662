#!/usr/bin/env bash
# Local Confluent-compatible schema registry for development and CI: Apicurio
# Registry 3 with in-memory storage (H2), serving the Confluent Schema Registry
# API under /apis/ccompat/v7.
#
#   scripts/schema-registry.sh start    fetch Apicurio Registry if needed, start an empty registry, wait until ready
#   scripts/schema-registry.sh stop     stop the registry (no-op when not running)
#   scripts/schema-registry.sh status   exit 0 iff the registry is running and answering
#   scripts/schema-registry.sh url      print the Confluent-compatible base URL
#
# Clients use http://127.0.0.1:$WINDOWD_SR_PORT/apis/ccompat/v7 (what `url` prints).
# Storage is in memory: every start begins with an empty registry (start on a
# registry that is already running leaves it, and its schemas, alone).
#
# Apicurio is not built here: Maven Central carries the release's ready-to-run
# Quarkus distribution, io.apicurio:apicurio-registry-app:VERSION:tar.gz:all
# (quarkus-run.jar + lib/, already augmented). mvn fetches it once into
# $WINDOWD_SR_DIR, where it is unpacked and kept, so only the first start needs
# the network. Apicurio 3 needs Java 21+: the script takes the first of
# $WINDOWD_SR_JAVA_HOME, $JAVA_HOME, java on PATH and /usr/lib/jvm/* that is 21
# or newer (Java 17 alone is not enough). A class-data-sharing archive is kept
# next to the unpacked app and halves the startup time after the first run.
#
# Environment (all optional):
#   WINDOWD_SR_DIR            cache and run files  (default /tmp/windowd-registry)
#   WINDOWD_SR_PORT           HTTP port on 127.0.0.1 (default 8081)
#   WINDOWD_SR_VERSION        Apicurio Registry version (default 3.3.3)
#   WINDOWD_SR_START_TIMEOUT  seconds to wait for readiness (default 120)
#   WINDOWD_SR_COMPATIBILITY  global compatibility level (default BACKWARD, as Confluent's;
#                             empty: Apicurio's own default, NONE)
#   WINDOWD_SR_HEAP_OPTS      heap flags           (default "-Xms64m -Xmx512m")
#   WINDOWD_SR_JVM_OPTS       other JVM flags      (default "-XX:+UseSerialGC -XX:TieredStopAtLevel=1")
#   WINDOWD_SR_JAVA_HOME      JDK 21+ to run it with (default: searched, see above)
#   WINDOWD_SR_M2_REPO        Maven local repository for the fetch (default $WINDOWD_SR_DIR/m2)
#
# The management interface (/health, /metrics) listens on 127.0.0.1 on a
# random port (see the log); readiness is checked on the Confluent API itself.
set -euo pipefail

HOST=127.0.0.1
SR_DIR="${WINDOWD_SR_DIR:-/tmp/windowd-registry}"
PORT="${WINDOWD_SR_PORT:-8081}"
VERSION="${WINDOWD_SR_VERSION:-3.3.3}"
START_TIMEOUT="${WINDOWD_SR_START_TIMEOUT:-120}"
COMPATIBILITY="${WINDOWD_SR_COMPATIBILITY-BACKWARD}"
HEAP_OPTS="${WINDOWD_SR_HEAP_OPTS:--Xms64m -Xmx512m}"
JVM_OPTS="${WINDOWD_SR_JVM_OPTS:--XX:+UseSerialGC -XX:TieredStopAtLevel=1}"
MIN_JAVA=21
# Pinned so that the fetch does not depend on Maven's default plugin version.
DEPENDENCY_PLUGIN=org.apache.maven.plugins:maven-dependency-plugin:3.8.1

SR_DIR="${SR_DIR%/}"
M2_REPO="${WINDOWD_SR_M2_REPO:-$SR_DIR/m2}"
ARTIFACT="io.apicurio:apicurio-registry-app:$VERSION:tar.gz:all"
APP_DIR="$SR_DIR/apicurio-registry-$VERSION"
APP_DONE="$APP_DIR/.complete"
CDS_ARCHIVE="$APP_DIR/cds-$PORT.jsa"
MVN_LOG="$SR_DIR/mvn.log"
PID_FILE="$SR_DIR/registry-$PORT.pid"
LOG_FILE="$SR_DIR/registry-$PORT.log"
MARKER_FILE="$SR_DIR/.windowd-schema-registry"
LOCK_FILE="$SR_DIR/.lock"
BASE_URL="http://$HOST:$PORT/apis/ccompat/v7"
# On the java command line, to recognise our process (pid files outlive processes).
TAG="-Dwindowd.schema-registry.port=$PORT"

SERVICE=registry STOP_TIMEOUT=30 READY_WAIT=0.2 # Generous STOP_TIMEOUT: on exit the JVM writes its class-data-sharing archive.
WHERE="at $BASE_URL" # where the service answers, for messages
# shellcheck source=scripts/service-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/service-lib.sh"
JAVA=""

usage() {
	echo "usage: $0 start|stop|status|url" >&2
	exit 2
}

check_settings() {
	local v
	for v in PORT START_TIMEOUT; do
		[[ ${!v} =~ ^[0-9]+$ ]] || die "registry: $v must be a number, got '${!v}'"
	done
	[[ $VERSION =~ ^[0-9A-Za-z._-]+$ ]] || die "registry: WINDOWD_SR_VERSION is not a version: '$VERSION'"
	case "$COMPATIBILITY" in
	"" | NONE | BACKWARD | BACKWARD_TRANSITIVE | FORWARD | FORWARD_TRANSITIVE | FULL | FULL_TRANSITIVE) ;;
	*) die "registry: WINDOWD_SR_COMPATIBILITY must be NONE, BACKWARD, FORWARD, FULL (or *_TRANSITIVE), got '$COMPATIBILITY'" ;;
	esac
	case "$SR_DIR" in
	/?*) ;;
	*) die "registry: WINDOWD_SR_DIR must be an absolute path other than /, got '$SR_DIR'" ;;
	esac
	# Only ever write into a folder that this script created.
	if [[ -d $SR_DIR && ! -f $MARKER_FILE ]] && [[ -n "$(ls -A "$SR_DIR")" ]]; then
		die "registry: refusing to use $SR_DIR (not created by schema-registry.sh); remove it or set WINDOWD_SR_DIR"
	fi
}

make_dir() {
	mkdir -p "$SR_DIR"
	: >>"$MARKER_FILE"
}

# Serialise start/stop between concurrent callers (e.g. parallel CI steps).
take_lock() {
	command -v flock >/dev/null 2>&1 || return 0
	make_dir
	exec 9>"$LOCK_FILE"
	flock -w 900 9 || die "registry: could not lock $LOCK_FILE"
}

java_major() {
	local line major
	line="$("$1" -version 2>&1 | head -n 1)" || return 1
	major="$(sed -n 's/.*version "\([0-9]*\)[."].*/\1/p' <<<"$line")"
	[[ $major == 1 ]] && major="$(sed -n 's/.*version "1\.\([0-9]*\).*/\1/p' <<<"$line")"
	[[ $major =~ ^[0-9]+$ ]] || return 1
	echo "$major"
}

# Sets JAVA to a java that is $MIN_JAVA or newer.
find_java() {
	local c major
	local -a candidates=() seen=()
	if [[ -n ${WINDOWD_SR_JAVA_HOME:-} ]]; then
		c="$WINDOWD_SR_JAVA_HOME/bin/java"
		[[ -x $c ]] || die "registry: no java in WINDOWD_SR_JAVA_HOME ($c)"
		major="$(java_major "$c")" || die "registry: $c -version failed"
		((major >= MIN_JAVA)) || die "registry: Apicurio Registry $VERSION needs Java $MIN_JAVA+, WINDOWD_SR_JAVA_HOME has Java $major"
		JAVA="$c"
		return 0
	fi
	[[ -n ${JAVA_HOME:-} ]] && candidates+=("$JAVA_HOME/bin/java")
	c="$(command -v java 2>/dev/null)" && candidates+=("$c")
	while IFS= read -r c; do
		candidates+=("$c")
	done < <(compgen -G '/usr/lib/jvm/*/bin/java' | sort -V -r)
	for c in "${candidates[@]}"; do
		[[ -x $c ]] || continue
		major="$(java_major "$c")" || continue
		seen+=("$c: $major")
		if ((major >= MIN_JAVA)); then
			JAVA="$c"
			return 0
		fi
	done
	die "registry: Apicurio Registry $VERSION needs Java $MIN_JAVA+; found only: ${seen[*]:-no java}. Set WINDOWD_SR_JAVA_HOME."
}

have_app() {
	[[ -f $APP_DONE && -f $APP_DIR/quarkus-run.jar ]]
}

# Fetch the ready-to-run distribution with mvn and unpack it into $APP_DIR.
ensure_app() {
	have_app && return 0
	command -v mvn >/dev/null 2>&1 || die "registry: mvn not found (needed once to fetch Apicurio Registry into $SR_DIR)"
	command -v tar >/dev/null 2>&1 || die "registry: tar not found"
	make_dir
	local tmp="$APP_DIR.tmp.$$"
	local tarball="$M2_REPO/io/apicurio/apicurio-registry-app/$VERSION/apicurio-registry-app-$VERSION-all.tar.gz"
	echo "registry: fetching Apicurio Registry $VERSION ($ARTIFACT, ~160 MB) with mvn..." >&2
	# In $SR_DIR so that mvn leaves nothing in the caller's folder.
	if ! (cd "$SR_DIR" && mvn -B -Dstyle.color=never "-Dmaven.repo.local=$M2_REPO" \
		"$DEPENDENCY_PLUGIN:get" "-Dartifact=$ARTIFACT" -Dtransitive=false) >"$MVN_LOG" 2>&1 ||
		[[ ! -f $tarball ]]; then
		tail -n 20 "$MVN_LOG" >&2 || true
		die "registry: mvn could not fetch $ARTIFACT, see $MVN_LOG"
	fi
	rm -rf "$tmp"
	mkdir -p "$tmp"
	if ! tar -xzf "$tarball" -C "$tmp" || [[ ! -f $tmp/quarkus-run.jar ]]; then
		rm -rf "$tmp"
		die "registry: $tarball did not unpack to a quarkus-run.jar"
	fi
	rm -rf "$APP_DIR"
	mv "$tmp" "$APP_DIR"
	: >"$APP_DONE"
	# The unpacked copy is what is kept; do not hold the tarball twice, unless
	# it is in a Maven repository of someone else's.
	[[ -n ${WINDOWD_SR_M2_REPO:-} ]] || rm -f "$tarball" "$tarball.sha1"
}

# The process is alive and is our registry.
pid_alive() {
	local pid="$1"
	process_exists "$pid" || return 1
	if [[ -r /proc/$pid/cmdline ]]; then
		tr '\0' '\n' <"/proc/$pid/cmdline" | grep -qxF -- "$TAG" || return 1
	fi
	return 0
}

# The Confluent API answers (it reads the storage, so this is real readiness).
answering() {
	curl -sf -o /dev/null --max-time 5 "$BASE_URL/subjects"
}

cmd_start() {
	check_settings
	command -v curl >/dev/null 2>&1 || die "registry: curl not found (used to check readiness)"
	take_lock
	local pid
	if pid="$(running_pid)"; then
		wait_ready || {
			show_log_tail
			die "registry: pid $pid is running but not answering at $BASE_URL"
		}
		echo "registry: ready at $BASE_URL (already running, pid $pid)"
		return 0
	fi
	rm -f "$PID_FILE"
	port_open "$PORT" && die "registry: $HOST:$PORT is already in use by another process"
	find_java
	ensure_app

	local -a heap jvm props
	read -r -a heap <<<"$HEAP_OPTS"
	read -r -a jvm <<<"$JVM_OPTS"
	props=(
		"-Dquarkus.http.host=$HOST" "-Dquarkus.http.port=$PORT"
		# Health and metrics: loopback only, any free port (Apicurio's default is 0.0.0.0:9000).
		"-Dquarkus.management.host=$HOST" -Dquarkus.management.port=0
		# Apicurio 3's defaults, spelled out: SQL storage on an in-memory H2 database.
		-Dapicurio.storage.kind=sql -Dapicurio.storage.sql.kind=h2
		"-Dapicurio.datasource.url=jdbc:h2:mem:windowd_registry_$PORT"
	)
	[[ -z $COMPATIBILITY ]] || props+=("-Dapicurio.rules.global.compatibility=$COMPATIBILITY")
	echo "registry: starting Apicurio Registry $VERSION on $HOST:$PORT ($JAVA)" >&2
	# fd 9 (the lock) is closed for the registry so that it does not hold the lock.
	(cd "$APP_DIR" && exec nohup "$JAVA" "$TAG" "${heap[@]}" "${jvm[@]}" \
		-XX:+AutoCreateSharedArchive "-XX:SharedArchiveFile=$CDS_ARCHIVE" \
		-Djava.awt.headless=true "${props[@]}" -jar quarkus-run.jar \
		</dev/null >"$LOG_FILE" 2>&1 9>&-) &
	pid=$!
	echo "$pid" >"$PID_FILE"

	started "$pid" "registry: failed to start at $BASE_URL"
	echo "registry: ready at $BASE_URL (pid $pid)"
}


[[ $# -eq 1 ]] || usage
case "$1" in
start) cmd_start ;;
stop) cmd_stop ;;
status) cmd_status ;;
url) echo "$BASE_URL" ;;
*) usage ;;
esac
