# service-lib.sh: what scripts/kafka-local.sh and scripts/schema-registry.sh
# share to run one background Java service: process checks, readiness
# waiting, stopping, the log tail on failure. Sourced, not run.
#
# The sourcing script sets SERVICE (the prefix of its messages), WHERE (where
# the service answers, for messages: "on host:port", "at URL"), HOST,
# PID_FILE, LOG_FILE, START_TIMEOUT (s), STOP_TIMEOUT (s), READY_WAIT (s
# between readiness checks), and defines pid_alive PID (the process is
# alive and is this service), answering (the service answers a request),
# check_settings and take_lock (the script's own checks and lock).

die() {
	echo "$*" >&2
	exit 1
}

# The process exists and is not a zombie. Right after the script starts the
# service in the background, the child may still be the script's forked
# shell (the exec of java has not happened yet).
process_exists() {
	local pid="$1" state
	kill -0 "$pid" 2>/dev/null || return 1
	if [[ -r /proc/$pid/stat ]]; then
		state="$(sed 's/^.*) \(.\).*/\1/' "/proc/$pid/stat" 2>/dev/null)" || return 1
		[[ $state != Z ]] || return 1
	fi
	return 0
}

# Prints the pid and succeeds iff the service started by the script is alive
# (a pid file can outlive its process, and the pid be reused: pid_alive).
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

show_log_tail() {
	if [[ -f $LOG_FILE ]]; then
		echo "$SERVICE: last lines of $LOG_FILE:" >&2
		tail -n 40 "$LOG_FILE" >&2
	fi
}

# Wait until the service answers on PORT; fail early if the process the
# script started dies.
wait_ready() {
	local deadline=$((SECONDS + START_TIMEOUT)) pid
	while ((SECONDS < deadline)); do
		pid=""
		[[ -f $PID_FILE ]] && pid="$(cat "$PID_FILE" 2>/dev/null || true)"
		# Not pid_alive: until the fork has exec'd java, its command line
		# is the script's, and a loaded machine can take a while.
		if [[ $pid =~ ^[0-9]+$ ]] && ! process_exists "$pid"; then
			echo "$SERVICE: process $pid exited during startup" >&2
			return 1
		fi
		if port_open "$PORT" && answering; then
			return 0
		fi
		sleep "$READY_WAIT"
	done
	echo "$SERVICE: not ready on $HOST:$PORT after ${START_TIMEOUT}s" >&2
	return 1
}

# SIGTERM, then SIGKILL after STOP_TIMEOUT seconds.
kill_pid() {
	local pid="$1" i
	kill -TERM "$pid" 2>/dev/null || return 0
	for ((i = 0; i < STOP_TIMEOUT * 5; i++)); do
		process_exists "$pid" || return 0
		sleep 0.2
	done
	echo "$SERVICE: pid $pid did not stop within ${STOP_TIMEOUT}s, killing" >&2
	kill -KILL "$pid" 2>/dev/null || true
	for ((i = 0; i < 25; i++)); do
		process_exists "$pid" || return 0
		sleep 0.2
	done
}

# started PID WHAT: wait until the service the script just started as PID
# answers; if it does not, show the log's tail, stop it and die with WHAT.
started() {
	if ! wait_ready; then
		show_log_tail
		kill_pid "$1"
		rm -f "$PID_FILE"
		die "$2, see $LOG_FILE"
	fi
}

cmd_stop() {
	check_settings
	take_lock
	local pid
	if ! pid="$(running_pid)"; then
		rm -f "$PID_FILE"
		echo "$SERVICE: not running"
		return 0
	fi
	kill_pid "$pid"
	if pid_alive "$pid"; then
		die "$SERVICE: could not stop pid $pid"
	fi
	rm -f "$PID_FILE"
	echo "$SERVICE: stopped (pid $pid)"
}

cmd_status() {
	check_settings
	local pid
	if ! pid="$(running_pid)"; then
		echo "$SERVICE: not running"
		return 1
	fi
	if answering; then
		echo "$SERVICE: running (pid $pid) $WHERE"
		return 0
	fi
	echo "$SERVICE: pid $pid is running but not answering $WHERE"
	return 1
}
