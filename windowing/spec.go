package windowing

import "fmt"

// WindowKind names a window assignment strategy.
type WindowKind uint8

// Window kinds.
const (
	Tumbling WindowKind = iota + 1
	Hopping
	Session
	Calendar
	Cumulate
	Sliding
	// CountWindow: windows of a key's records in read order, not of
	// time (count.go); Size and Hop count records.
	CountWindow
	// Transaction: windows of a key's records in event-time order that a
	// record closes (Event.Ends), or a silence of Gap ends
	// (transaction.go).
	Transaction
)

// String returns the configuration name of the kind.
func (k WindowKind) String() string {
	switch k {
	case Tumbling:
		return "tumbling"
	case Hopping:
		return "hopping"
	case Session:
		return "session"
	case Calendar:
		return "calendar"
	case Cumulate:
		return "cumulate"
	case Sliding:
		return "sliding"
	case CountWindow:
		return "count"
	case Transaction:
		return "transaction"
	}
	return fmt.Sprintf("WindowKind(%d)", uint8(k))
}

// WindowSpec describes how events are assigned to windows. All lengths are
// milliseconds of event time, but for count windows, whose Size and Hop
// are numbers of records. Tumbling windows have Hop == Size.
type WindowSpec struct {
	Kind     WindowKind
	Size     int64         // tumbling, hopping, sliding and fixed cumulate (the period)
	Hop      int64         // hopping (equal to Size for tumbling)
	Gap      int64         // session; transaction: its timeout
	Offset   int64         // tumbling, hopping and fixed cumulate
	Step     int64         // cumulate: between two window ends (cumulate.go)
	Calendar *CalendarSpec // calendar; calendar cumulate: the period's unit (calendar.go)
}

// ClosingPolicy says what happens when a window expires after its on-time step.
type ClosingPolicy uint8

// Closing policies.
const (
	ClosingAlways ClosingPolicy = iota
	ClosingIfChanged
	ClosingNever
)

// String returns the configuration name of the policy.
func (c ClosingPolicy) String() string {
	switch c {
	case ClosingAlways:
		return "always"
	case ClosingIfChanged:
		return "if_changed"
	case ClosingNever:
		return "never"
	}
	return fmt.Sprintf("ClosingPolicy(%d)", uint8(c))
}

// TriggerSpec describes when panes fire. It is a description only; the
// engine evaluates it with per-window trigger state kept in the store.
type TriggerSpec struct {
	EarlyCount int64 // fire an EARLY pane after this many records since the last pane (0: off)
	EarlyEvery int64 // fire an EARLY pane this many ms of processing time after the first unpaned record (0: off)
	OnTime     bool  // fire an ON_TIME pane when the frontier passes the window end
	Late       bool  // fire LATE panes for late records
	LateEvery  int64 // with Late: 0 fires after each late record, d fires d ms after the first of them
	Closing    ClosingPolicy
}

// Mode is the accumulation mode of panes.
type Mode uint8

// Accumulation modes.
const (
	Accumulating Mode = iota
	Discarding
	Retracting
)

// String returns the configuration name of the mode.
func (m Mode) String() string {
	switch m {
	case Accumulating:
		return "accumulating"
	case Discarding:
		return "discarding"
	case Retracting:
		return "retracting"
	}
	return fmt.Sprintf("Mode(%d)", uint8(m))
}

// AggOp is an aggregate operation.
type AggOp uint8

// Aggregate operations.
const (
	Count AggOp = iota + 1
	Sum
	Min
	Max
	Avg
	DistinctApprox
	Quantiles
	TopK
	// Ratio is derived: the value of aggregate Of over aggregate To's, in
	// the same pane (AggSpec.Of, To); it keeps no state of its own.
	Ratio
)

// String returns the configuration name of the operation.
func (o AggOp) String() string {
	switch o {
	case Count:
		return "count"
	case Sum:
		return "sum"
	case Min:
		return "min"
	case Max:
		return "max"
	case Avg:
		return "avg"
	case DistinctApprox:
		return "distinct_approx"
	case Quantiles:
		return "quantiles"
	case TopK:
		return "top_k"
	case Ratio:
		return "ratio"
	}
	return fmt.Sprintf("AggOp(%d)", uint8(o))
}

// NeedsNumber reports whether the operation reads a numeric field.
func (o AggOp) NeedsNumber() bool {
	return o == Sum || o == Min || o == Max || o == Avg || o == Quantiles
}

// Numeric reports whether the operation's value is one number (or null):
// what a ratio may divide.
func (o AggOp) Numeric() bool {
	return o == Count || o == Sum || o == Min || o == Max || o == Avg || o == DistinctApprox
}

// NeedsText reports whether the operation reads a field as text: its
// string value, or the JSON text of any other value.
func (o AggOp) NeedsText() bool { return o == DistinctApprox || o == TopK }

// DefaultPrecision is the HyperLogLog precision of distinct_approx when none is configured.
const DefaultPrecision = 14

// Defaults of the sketch aggregates (docs/SEMANTICS.md, Aggregates).
const (
	DefaultRelativeAccuracy = 0.01 // quantiles
	DefaultMaxBuckets       = 2048 // quantiles
)

// DefaultCapacity is top_k's capacity when none is configured: max(100, 10·k).
func DefaultCapacity(k int) int { return max(100, 10*k) }

// Quantile is one requested quantile q of a quantiles aggregate: the
// text it is written as in the configuration (the pane's member name),
// and its value as the fraction Num/Den (0 <= Num <= Den, Den > 0), exact
// for the decimal written, so the rank ⌊q·(n−1)⌋ is computed exactly.
type Quantile struct {
	Text     string
	Num, Den uint64
}

// AggSpec describes one named aggregate of a pipeline.
type AggSpec struct {
	Name      string
	Op        AggOp
	Field     string // dotted path of the input field; empty for count
	Precision uint8  // distinct_approx only: 4..18

	// quantiles only: the quantiles in configuration order, the relative
	// accuracy α (MinRelativeAccuracy <= α < 0.5) and the largest number
	// of non-empty buckets kept.
	Quantiles        []Quantile
	RelativeAccuracy float64
	MaxBuckets       int

	// top_k only: how many values a pane lists (K >= 1) and how many
	// counters the summary keeps (Capacity >= K).
	K, Capacity int

	// ratio only: the indexes in Spec.Aggregates of the aggregates it
	// divides, Of / To (each a count, sum, min, max, avg or
	// distinct_approx).
	Of, To int

	qmap *logMapping // quantiles: set by Engine.New; nil: computed when needed
}

// Spec is everything the engine needs to know about one pipeline's windowing.
type Spec struct {
	Window          WindowSpec
	AllowedLateness int64 // ms
	Trigger         TriggerSpec
	Mode            Mode
	Aggregates      []AggSpec
}
