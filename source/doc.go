// Package source turns input records into engine events. Decoder extracts
// the group key, the event time (normalised to Unix milliseconds UTC) and
// the inputs of each aggregate from a record's JSON value, without
// reflection. A record that cannot be decoded yields a *DecodeError whose
// reason goes to the dead-letter path; it never stops the pipeline.
//
// The Kafka consumer that feeds it (consumer group, dead-letter producer)
// belongs here too; replay feeds it from JSON lines.
package source
