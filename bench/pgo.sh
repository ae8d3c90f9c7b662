#!/usr/bin/env bash
# bench/pgo.sh — regenerate cmd/windowd/default.pgo, the CPU profile that
# `go build ./cmd/windowd` uses for profile-guided optimization (Go's
# -pgo=auto picks up default.pgo in a main package's directory).
#
# The profile is windowd replay over speed.sh's 1M-record input for its four
# window shapes (tumbling by record key; tumbling, hopping 60 s / 1 s and
# sessions by value.country), one core, in one process (bench/pgo). Rerun it
# after changes to the engine, the decoder or replay's loop: a stale
# profile still builds and runs correctly, it only optimizes less.
#
# Environment: INPUT=FILE as for speed.sh.
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
GOMAXPROCS=1 "$out/pgo" -input "$in" -o "$out/default.pgo.tmp" \
	bench/tumbling.yaml bench/tumbling-10s-country.yaml \
	bench/hopping-60s-1s-country.yaml bench/session-30s-country.yaml ||
	die "profiling failed"
mv "$out/default.pgo.tmp" cmd/windowd/default.pgo
echo "# wrote cmd/windowd/default.pgo ($(wc -c <cmd/windowd/default.pgo) bytes)"
