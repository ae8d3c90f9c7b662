package windowing

import (
	"math"
	"strconv"
	"time"

	"github.com/windowd/windowd/codec"
)

// Timing says where a pane stands relative to the frontier and the window end.
type Timing uint8

// Pane timings.
const (
	Early Timing = iota
	OnTime
	Late
)

// String returns the wire name of the timing.
func (t Timing) String() string {
	switch t {
	case Early:
		return "EARLY"
	case OnTime:
		return "ON_TIME"
	case Late:
		return "LATE"
	}
	return "Timing(" + strconv.Itoa(int(t)) + ")"
}

// Pane is one emitted window result, or the retraction of an earlier one.
// Values are aligned with Spec.Aggregates. An Emitter must not keep a Pane
// or its Values after returning: the engine reuses them.
type Pane struct {
	Key        string
	Start, End int64
	Timing     Timing
	Index      uint32
	Final      bool
	Mode       Mode
	Retraction bool
	Values     []Value
	// Zone is the time zone of a calendar window (nil for other windows):
	// its pane also shows the window's local bounds.
	Zone *time.Location
	// Partial: bit i set when aggregate i was added to the pipeline after
	// the window opened, so its value covers only the records since
	// (docs/OPERATIONS.md, Changing a deployed pipeline).
	Partial uint64
	// Partition, when HasPartition, is the input partition whose state
	// emitted the pane: a partition added to the input
	// (Options.PartitionIDsFrom). It is part of the pane id and shown
	// in the pane object.
	HasPartition bool
	Partition    int32
	// Records: the pane is a count window's (count.go): Start and End
	// count the key's records (it holds records Start+1 … End), and
	// FirstTime and LastTime are its first and last records' event times.
	Records             bool
	FirstTime, LastTime int64
	// Quiet: the pane's on-time step was reached by the quiet advance
	// (docs/SEMANTICS.md, Quiet inputs), not by the partitions'
	// watermarks. Shown as "quiet": true in the pane object.
	Quiet bool
	// TimedOut: the pane is a transaction window's that no record closed,
	// after its timeout (transaction.go): "timeout": true in the pane
	// object.
	TimedOut bool
}

// ID is the pane id `<key>/<start>/<end>/<index>` a consumer can drop
// duplicates by, with `@<partition>` when the pane has a Partition.
func (p *Pane) ID() string {
	return string(p.AppendID(make([]byte, 0, len(p.Key)+48)))
}

// AppendID appends the pane's ID (see ID) to b.
func (p *Pane) AppendID(b []byte) []byte {
	b = append(b, p.Key...)
	b = append(b, '/')
	b = strconv.AppendInt(b, p.Start, 10)
	b = append(b, '/')
	b = strconv.AppendInt(b, p.End, 10)
	b = append(b, '/')
	b = strconv.AppendUint(b, uint64(p.Index), 10)
	if p.HasPartition {
		b = append(b, '@')
		b = strconv.AppendInt(b, int64(p.Partition), 10)
	}
	return b
}

// AppendJSON appends the pane as the JSON object of docs/SEMANTICS.md,
// Output, with aggregates named by specs, in spec order.
func AppendJSON(b []byte, p *Pane, specs []AggSpec) []byte {
	b = append(b, `{"key":`...)
	b = codec.AppendJSONString(b, p.Key)
	b = appendWindowPart(b, p)
	b = appendPaneFields(b, p)
	b = appendAggregates(b, p, specs)
	return appendPartial(b, p.Partial, specs)
}

// appendAggregates appends the pane's aggregates, named by specs, in spec
// order, as `"name":value` pairs.
func appendAggregates(b []byte, p *Pane, specs []AggSpec) []byte {
	for i := range specs {
		if i > 0 {
			b = append(b, ',')
		}
		b = codec.AppendJSONString(b, specs[i].Name)
		b = append(b, ':')
		b = AppendValue(b, p.value(i))
	}
	return b
}

// appendPartial closes a pane's aggregates and the pane, with the names of
// the aggregates in the partial mask first: `},"partial":["s"]}`.
func appendPartial(b []byte, partial uint64, specs []AggSpec) []byte {
	if partial == 0 {
		return append(b, "}}"...)
	}
	b = append(b, `},"partial":[`...)
	for i, name := range partialNames(nil, partial, specs) {
		if i > 0 {
			b = append(b, ',')
		}
		b = codec.AppendJSONString(b, name)
	}
	return append(b, "]}"...)
}

// appendWindowPart appends what follows a pane's key up to its timing:
// the window, and the opening of the pane object. A calendar window
// (Zone != nil) also shows its zone and local bounds, a count window its
// first and last records' event times.
func appendWindowPart(b []byte, p *Pane) []byte {
	b = appendWindow(append(b, ','), p)
	return append(b, `,"pane":{"timing":"`...)
}

// appendWindow appends the pane's `"window":{…}` member.
func appendWindow(b []byte, p *Pane) []byte {
	start, end, zone := p.Start, p.End, p.Zone
	b = append(b, `"window":{"start":`...)
	b = strconv.AppendInt(b, start, 10)
	b = append(b, `,"end":`...)
	b = strconv.AppendInt(b, end, 10)
	if p.Records {
		b = append(b, `,"first_time":`...)
		b = strconv.AppendInt(b, p.FirstTime, 10)
		b = append(b, `,"last_time":`...)
		b = strconv.AppendInt(b, p.LastTime, 10)
	}
	if zone != nil {
		b = append(b, `,"time_zone":`...)
		b = codec.AppendJSONString(b, zone.String())
		b = append(b, `,"local_start":"`...)
		b = AppendLocal(b, start, zone)
		b = append(b, `","local_end":"`...)
		b = AppendLocal(b, end, zone)
		b = append(b, '"')
	}
	return append(b, '}')
}

// AppendLocal appends the instant ms as a local RFC 3339 time in zone,
// with its offset, and milliseconds only when it has some:
// 2026-03-29T00:00:00+01:00.
func AppendLocal(b []byte, ms int64, zone *time.Location) []byte {
	return time.UnixMilli(ms).In(zone).AppendFormat(b, "2006-01-02T15:04:05.999Z07:00")
}

// appendPaneFields appends the pane's fields from its timing to the
// opening of the aggregates object.
func appendPaneFields(b []byte, p *Pane) []byte {
	b = append(b, p.Timing.String()...)
	b = append(b, `","index":`...)
	b = strconv.AppendUint(b, uint64(p.Index), 10)
	b = append(b, `,"final":`...)
	b = strconv.AppendBool(b, p.Final)
	b = append(b, `,"mode":"`...)
	b = append(b, p.Mode.String()...)
	b = append(b, '"')
	if p.HasPartition {
		b = append(b, `,"partition":`...)
		b = strconv.AppendInt(b, int64(p.Partition), 10)
	}
	if p.Quiet {
		b = append(b, `,"quiet":true`...)
	}
	if p.TimedOut {
		b = append(b, `,"timeout":true`...)
	}
	b = append(b, `},"retraction":`...)
	b = strconv.AppendBool(b, p.Retraction)
	return append(b, `,"aggregates":{`...)
}

// PartialNames appends to dst the names of the aggregates of specs whose
// values cover only part of the window (Partial), as the pane JSON's
// "partial" lists them.
func (p *Pane) PartialNames(dst []string, specs []AggSpec) []string {
	return partialNames(dst, p.Partial, specs)
}

// value is the pane's value of aggregate i: none past its Values.
func (p *Pane) value(i int) Value {
	if i < len(p.Values) {
		return p.Values[i]
	}
	return Value{}
}

// PaneJSON writes panes as AppendJSON does, for one pipeline's
// aggregates, with less work per pane: the aggregate names are quoted
// once, and the text from the window to the aggregates' opening brace is
// kept from the pane before and formatted again only when the window or
// a pane field differs (a frontier step fires one pane per key, all of
// one window, timing, index and mode).
type PaneJSON struct {
	specs []AggSpec
	names [][]byte // each aggregate's `"name":`, after a comma but the first
	head  []byte   // the window part and the pane fields of the last pane written
	last  paneHead // what head was formatted from; valid when head != nil
}

// paneHead is what PaneJSON.head is formatted from: the pane without its
// key and values.
type paneHead struct {
	start, end int64
	index      uint32
	timing     Timing
	final      bool
	mode       Mode
	retraction bool
	quiet      bool
	timedOut   bool
	records    bool
	first      int64
	last       int64
	zone       *time.Location
	partition  int32 // -1: none
}

// NewPaneJSON returns a PaneJSON for panes of the aggregates specs.
func NewPaneJSON(specs []AggSpec) *PaneJSON {
	e := &PaneJSON{specs: specs}
	for i := range specs {
		var name []byte
		if i > 0 {
			name = append(name, ',')
		}
		name = codec.AppendJSONString(name, specs[i].Name)
		e.names = append(e.names, append(name, ':'))
	}
	return e
}

// Append appends the pane as AppendJSON(b, p, specs) does.
func (e *PaneJSON) Append(b []byte, p *Pane) []byte {
	b = append(b, `{"key":`...)
	b = codec.AppendJSONString(b, p.Key)
	h := paneHead{start: p.Start, end: p.End, index: p.Index, timing: p.Timing, final: p.Final, mode: p.Mode, retraction: p.Retraction, quiet: p.Quiet, timedOut: p.TimedOut, records: p.Records, first: p.FirstTime, last: p.LastTime, zone: p.Zone, partition: -1}
	if p.HasPartition {
		h.partition = p.Partition
	}
	if e.head == nil || h != e.last {
		e.head = appendPaneFields(appendWindowPart(e.head[:0], p), p)
		e.last = h
	}
	b = append(b, e.head...)
	for i, name := range e.names {
		b = append(b, name...)
		b = AppendValue(b, p.value(i))
	}
	return appendPartial(b, p.Partial, e.specs)
}

// AppendValue appends v as a JSON value: integers as integers, numbers in
// the shortest form that round-trips (as encoding/json does), null for no
// value and for non-finite numbers, raw JSON as it is.
func AppendValue(b []byte, v Value) []byte {
	switch v.Kind {
	case RawValue:
		return append(b, v.Raw...)
	case IntValue:
		return strconv.AppendInt(b, v.Int, 10)
	case NumValue:
		f := v.Num
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return append(b, "null"...)
		}
		abs := math.Abs(f)
		if b, ok := appendFewDecimals(b, f, abs); ok {
			return b
		}
		format := byte('f')
		if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
			format = 'e'
		}
		b = strconv.AppendFloat(b, f, format, -1, 64)
		if format == 'e' {
			// clean up e-09 to e-9, as encoding/json does
			n := len(b)
			if n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
				b[n-2] = b[n-1]
				b = b[:n-1]
			}
		}
		return b
	}
	return append(b, "null"...)
}

// decimalScale are the powers of ten appendFewDecimals tries.
var decimalScale = [...]float64{1, 1e1, 1e2, 1e3, 1e4}

// appendFewDecimals appends f (abs is |f|) as strconv.AppendFloat(b, f,
// 'f', -1, 64) does when f is below 1e9 and is the nearest float64 to a
// decimal of at most four fraction digits (sums of prices and amounts),
// and reports false, appending nothing, otherwise.
//
// For the fewest fraction digits k that give such a decimal m/10^k, that
// decimal is the shortest that round-trips: m and 10^k are exact (m <
// 1e13 < 2^53), so the division is the correctly rounded value of the
// decimal, which is what parsing it gives; and below 1e9 the float's
// neighbours are closer than 1e-7, so no other decimal of at most four
// fraction digits round-trips, and one of fewer significant digits would
// have fewer fraction digits.
func appendFewDecimals(b []byte, f, abs float64) ([]byte, bool) {
	if !(abs < 1e9) {
		return b, false
	}
	for k, scale := range decimalScale {
		m := math.Round(abs * scale)
		if m/scale != abs {
			continue
		}
		if math.Signbit(f) {
			b = append(b, '-')
		}
		n := uint64(m)
		div := uint64(scale)
		b = strconv.AppendUint(b, n/div, 10)
		if k > 0 {
			b = append(b, '.')
			frac := n % div
			for div /= 10; div > 0; div /= 10 {
				b = append(b, byte('0'+frac/div%10))
			}
		}
		return b, true
	}
	return b, false
}
