// Package source turns input records into engine events. Decoder extracts
// the group key, the event time (normalised to Unix milliseconds UTC) and
// the inputs of each aggregate from a record's JSON value, without
// reflection. A record that cannot be decoded yields a *DecodeError whose
// reason goes to the dead-letter path; it never stops the pipeline.
//
// It is pure: `windowd run` feeds it records its consumer-group member
// polled (kafka/member.go, service/poll.go), `windowd replay` JSON lines.
package source
