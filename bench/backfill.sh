#!/usr/bin/env bash
# Watermark alignment on a backfill (docs/PERFORMANCE.md): a preloaded topic
# whose partition 0 holds an hour more event time than the other three is
# drained by one windowd process without and with watermark.max_drift: 1m;
# the test prints the peak of open windows, the peak RSS and the drain time
# of both, and checks that both give replay's final panes. Needs a Kafka
# broker: WINDOWD_KAFKA_BROKERS=127.0.0.1:9092 (scripts/kafka-local.sh start).
# Usage: bash bench/backfill.sh [REPETITIONS]
set -euo pipefail
cd "$(dirname "$0")/.."
: "${WINDOWD_KAFKA_BROKERS:?set WINDOWD_KAFKA_BROKERS (scripts/kafka-local.sh start)}"
export WINDOWD_KAFKA_BROKERS
go test -count="${1:-1}" -run '^TestWatermarkAlignmentBackfill$' -v ./integration/ | grep -E 'max_drift|^(ok|FAIL|---)'
