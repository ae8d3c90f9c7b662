// Package schema reads record values in the Confluent wire format (a zero
// magic byte, a 4-byte big-endian schema id, for Protobuf the message
// indexes, then the Avro or Protobuf payload) with their schemas from a
// Schema Registry, and writes each one as the JSON object the rest of
// windowd reads: field paths, keys, timestamps, filters and aggregates work
// on Avro and Protobuf records exactly as on JSON ones (docs/SEMANTICS.md,
// Input formats, has the mapping table).
//
// Invariants:
//   - A value's JSON depends only on its bytes and its schema: a record
//     decodes the same in run and replay, on every instance.
//   - A record that cannot be decoded (no magic byte, an id the registry
//     does not know, a payload its schema does not read) is a *BadRecord,
//     which the caller dead-letters; a registry that cannot be reached or
//     answers with a server error is an *Unavailable, which the caller
//     waits out without dead-lettering anything.
//   - Schemas are fetched once per id and kept in a bounded cache; the
//     compiled form of a schema belongs to one Decoder, which is not safe
//     for concurrent use, while a Registry is shared by all.
package schema
