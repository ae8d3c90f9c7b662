// Package integration holds end-to-end tests of `windowd run` against a
// Kafka broker: the real one named by WINDOWD_KAFKA_BROKERS (CI starts it
// with scripts/kafka-local.sh), or else an in-process kfake cluster so that
// `go test ./...` passes anywhere. The tests compare what the service writes
// to Kafka with what `windowd replay` computes for the same records.
package integration
