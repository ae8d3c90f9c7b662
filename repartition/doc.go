// Package repartition is the pure logic of a pipeline with
// `repartition: true` (docs/SEMANTICS.md, Repartitioning), shared by
// `windowd run` (over the internal Kafka topic) and `windowd replay` (in
// one process), so that both compute the same frontier.
//
// Stage 1 decodes each input record, sends it to repartition partition
// KeyPartition(group key) with an upstream header (input partition and
// offset), and keeps a watermark generator per input partition (Stage1).
// It broadcasts a Marker of an input partition to every repartition
// partition whenever that partition's watermark or idleness changed, and
// all of them periodically. Stage 2 keeps, per repartition partition, a
// Table of the input partitions: their last markers, whose minimum is the
// repartition partition's watermark (markers are never data), and the next
// upstream offset not yet processed, below which a record is a duplicate
// of one processed already (a stage 1 restart writes again from its last
// commit).
//
// Invariants: a marker only raises an input partition's watermark; a
// Table's watermark is watermark.MinTime until every input partition has
// been heard from (or is idle); the encodings (wire.go, Table.Encode) are
// stable, as they are on topics and in local state.
package repartition
