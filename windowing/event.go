package windowing

// Event is one decoded input record, ready for window assignment.
type Event struct {
	Partition int32
	Offset    int64   // position in the partition (Kafka offset, or replay sequence)
	Key       string  // group key; may point into the record's buffers (the engine copies the keys it keeps)
	Time      int64   // event time, Unix ms UTC
	Inputs    []Input // one per aggregate, aligned with Spec.Aggregates
	// Ends: whether the record closes or discards its transaction window
	// (transaction.go); 0 in every other pipeline.
	Ends Ending
	// Input is the index of the input topic the record came from
	// (a pipeline with several inputs; 0 with one).
	Input int32
	// Value is the record's value as JSON text, for joins (it may point
	// into the record's buffers: the joiner copies what it keeps); empty
	// in other pipelines.
	Value string
	// Source is what the event was read from (a Kafka record in run),
	// opaque to the engine: Emitter.Dropped gets it back with the event.
	Source any
}

// Input is the value one aggregate reads from an event.
type Input struct {
	Num  float64 // sum, min, max, avg: the numeric field
	Hash uint64  // distinct_approx: 64-bit hash of the field's text
	// top_k: the field's text (its string value, or the JSON text of any
	// other value); it may point into the record's buffers (the engine
	// copies the values it keeps).
	Text string
	// Skip: the record does not feed this aggregate (an aggregate of
	// another input of a pipeline with several, docs/SEMANTICS.md,
	// Several inputs): the aggregate neither counts nor reads it.
	Skip bool
}
