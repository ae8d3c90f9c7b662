// Package kafka is everything of windowd that talks to a Kafka cluster and
// does not know about windows: client options (brokers, compression, TLS,
// SASL) and the errors a cluster's security refusals turn into, the
// topics a pipeline needs (creating, checking and growing them), the
// consumer-group member's poll loop that a pipeline and a repartition
// stage share, committing positions, listing partition bounds, and the
// partitioner that keeps partition p's state on changelog partition p.
//
// What records mean (decoding, panes, the changelog's records, markers)
// belongs to source, sink and service; this package moves them.
package kafka
