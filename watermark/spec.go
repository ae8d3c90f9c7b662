package watermark

import "fmt"

// Strategy names a watermark generator.
type Strategy uint8

// Generator strategies.
const (
	BoundedOutOfOrderness Strategy = iota
	Monotonic
)

// String returns the configuration name of the strategy.
func (s Strategy) String() string {
	switch s {
	case BoundedOutOfOrderness:
		return "bounded_out_of_orderness"
	case Monotonic:
		return "monotonic"
	}
	return fmt.Sprintf("Strategy(%d)", uint8(s))
}

// Spec configures the per-partition generators and idleness of a pipeline.
// Durations are milliseconds.
type Spec struct {
	Strategy    Strategy
	MaxDelay    int64 // bounded_out_of_orderness only
	Every       int64 // emit the watermark after every N-th record (>= 1)
	IdleTimeout int64 // processing time without records before a partition is idle (0: never)
	// MaxDrift: pause consuming a partition whose watermark is ahead of the
	// frontier by more than this (ms; 0: off; docs/SEMANTICS.md, Watermark
	// alignment). The service acts on it; replay reads in order and ignores it.
	MaxDrift int64
	// QuietAdvance: when every assigned partition is idle and caught up,
	// the frontier moves on with processing time (docs/SEMANTICS.md, Quiet
	// inputs). Needs IdleTimeout.
	QuietAdvance bool
	// Marked: partition watermarks are set by Frontier.Mark (from the markers
	// of upstream partitions, docs/SEMANTICS.md, Repartitioning), not by the
	// event times of the partition's records. Not part of the YAML.
	Marked bool
}
