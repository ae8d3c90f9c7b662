#!/usr/bin/env bash
# bench/pgo.sh — regenerate cmd/windowd/default.pgo, the CPU profile that
# `go build ./cmd/windowd` uses for profile-guided optimization (Go's
# -pgo=auto picks up default.pgo in a main package's directory).
#
# The profile merges (go tool pprof -proto):
#   - windowd replay over speed.sh's 1M-record input for its four window
#     shapes (tumbling by record key; tumbling, hopping 60 s / 1 s and
#     sessions by value.country), one core, in one process (bench/pgo);
#   - with RUN=1 (the default), `windowd run --cpu-profile` draining
#     compare.sh's job (2M records of bench/gen, 10,000 a second of event
#     time, 10k keys, 4 partitions; tumbling 10 s by record key, count and
#     sum) once at_least_once and once exactly_once, so that run's own path
#     (fetching, decoding ahead, the pane writer, the changelog,
#     transactions) is optimized too. It starts the local broker
#     (scripts/kafka-local.sh start: a no-op when one runs; left running).
#     (docs/PERFORMANCE.md, "build profile", has what it gained.)
# Rerun it after changes to the engine, the decoder, replay's loop or
# run's: a stale profile still builds and runs correctly, it only
# optimizes less.
#
# Environment: INPUT=FILE as for speed.sh; RUN=0 leaves out the run
# profiles; RUN_RECORDS=2000000; WINDOWD_KAFKA_PORT=9092.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
script=pgo.sh
# shellcheck source=bench/lib.sh
. bench/lib.sh
out=bench/out
mkdir -p "$out"
in=$(speed_input)
go build -o "$out/pgo" ./bench/pgo
GOMAXPROCS=1 "$out/pgo" -input "$in" -o "$out/pgo-replay.pprof" \
	bench/tumbling.yaml bench/tumbling-10s-country.yaml \
	bench/hopping-60s-1s-country.yaml bench/session-30s-country.yaml ||
	die "profiling failed"
profiles=("$out/pgo-replay.pprof")

if [ "${RUN:-1}" = 1 ]; then
	records=${RUN_RECORDS:-2000000}
	broker=127.0.0.1:${WINDOWD_KAFKA_PORT:-9092}
	# compare.sh's job with its defaults (write_windowd_config reads them).
	window_s=10 grace_ms=2000 commit_ms=1000 eos_commit_ms=""
	bash scripts/kafka-local.sh start >&2 || die "could not start the local broker"
	need_broker
	tmp=$(mktemp -d)
	topic=pgo-$(date +%s)-$RANDOM
	topics=("$topic")
	pid=""
	cleanup() {
		[ -z "$pid" ] || kill -KILL "$pid" 2>/dev/null || true
		drop_topics "${topics[@]}"
		rm -rf "$tmp"
	}
	trap cleanup EXIT
	go build -o "$tmp/windowd" ./cmd/windowd
	go build -o "$tmp/gen" ./bench/gen
	split_input "$tmp/gen" "$tmp" p 10000 4 -records "$records" -rate 10000
	bash scripts/kafka-local.sh topics --create --topic "$topic" --partitions 4 --replication-factor 1 >/dev/null
	produce_input "$broker" "$tmp" p "$topic" 4
	[ "$(end_offsets "$broker" "$topic" 4)" = "$records" ] || die "producing the input topic $topic failed"
	for delivery in at_least_once exactly_once; do
		o=$topic-$delivery
		topics+=("$o" "$o-dlq" "$o-bench-changelog")
		bash scripts/kafka-local.sh topics --create --topic "$o" --partitions 4 --replication-factor 1 >/dev/null
		write_windowd_config "$tmp/$delivery.yaml" "$tmp/state-$delivery" "$o" "$o" "$delivery"
		log=$tmp/$delivery.log
		"$tmp/windowd" run --config "$tmp/$delivery.yaml" --cpu-profile "$out/pgo-run-$delivery.pprof" 2>"$log" &
		pid=$!
		addr=$(http_addr "$log" "$pid") || fail_with_log "windowd did not start its HTTP listener" "$log"
		t0=$SECONDS
		until curl -sf "http://$addr/metrics" >"$tmp/metrics" && [ "$(msum windowd_records_in_total "$tmp/metrics")" -ge "$records" ]; do
			kill -0 "$pid" 2>/dev/null || fail_with_log "windowd exited" "$log"
			[ $((SECONDS - t0)) -lt 300 ] || fail_with_log "windowd did not take the $records records in 300 s" "$log"
			sleep 0.2
		done
		sleep 1 # the last panes and commit cycle
		kill -TERM "$pid"
		wait "$pid" || fail_with_log "windowd run ($delivery) failed" "$log"
		pid=""
		profiles+=("$out/pgo-run-$delivery.pprof")
		echo "# profiled windowd run, $delivery: $records records in about $((SECONDS - t0)) s" >&2
	done
fi

go tool pprof -proto "${profiles[@]}" >"$out/default.pgo.tmp" 2>/dev/null || die "merging the profiles failed"
mv "$out/default.pgo.tmp" cmd/windowd/default.pgo
echo "# wrote cmd/windowd/default.pgo ($(wc -c <cmd/windowd/default.pgo) bytes) from ${profiles[*]}"
