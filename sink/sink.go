// Package sink builds the records windowd writes: panes (docs/SEMANTICS.md,
// Output) for the output topic, undecodable records for the dead-letter
// topic and records dropped as expired for the late topic. It is pure:
// kafka.Producer writes them.
package sink

import (
	"math"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/windowd/windowd/codec"
	"github.com/windowd/windowd/windowing"
)

// Header names written on pane records.
const (
	HeaderWindowStart = "window_start"
	HeaderWindowEnd   = "window_end"
	HeaderTiming      = "timing"
	HeaderIndex       = "index"
	HeaderFinal       = "final"
	HeaderMode        = "mode"
	HeaderRetraction  = "retraction"
	HeaderPaneID      = "pane_id"
	HeaderTimeZone    = "time_zone"  // calendar windows only
	HeaderQuiet       = "quiet"      // "true", on panes reached by the quiet advance only
	HeaderTimeout     = "timeout"    // "true", on a transaction window's panes after its timeout only
	HeaderFirstTime   = "first_time" // count windows only: the first record's event time
	HeaderLastTime    = "last_time"  // count windows only: the last record's event time
	// HeaderMessageType names the value's message in its registered
	// Protobuf schema (output.format: protobuf): "Pane", for deserializers
	// that take the message from a header (Apicurio's).
	HeaderMessageType = "message_type"
)

// Header names written on dead-letter and late records.
const (
	HeaderError           = "error"
	HeaderSourceTopic     = "source_topic"
	HeaderSourcePartition = "source_partition"
	HeaderSourceOffset    = "source_offset"
	HeaderEventTime       = "event_time"
)

// paneRecord is a pane's output record and its headers, allocated together.
type paneRecord struct {
	kgo.Record
	headers [10]kgo.RecordHeader
}

// PaneEncoder appends a pane's record value: the pane JSON
// (*windowing.PaneJSON), or a binary format's (AvroPanes, ProtoPanes,
// JSONSchemaPanes). One goroutine at a time uses an encoder.
type PaneEncoder interface {
	Append(b []byte, p *windowing.Pane) []byte
}

// PaneRecord builds the output record of a pane: key the group key,
// timestamp end-1 (a count window's: its last record's event time), value
// the pane as enc writes it, headers repeating the pane fields.
// The record and its headers are one allocation, and the value, the key
// and the header values are slices of one buffer (the record is produced
// once and never changed, so they can share it): two allocations per pane
// where there were thirteen.
func PaneRecord(topic string, p *windowing.Pane, enc PaneEncoder) *kgo.Record {
	buf := make([]byte, 0, 320+3*len(p.Key))
	// cut returns what was appended to buf since from, full (an append to
	// it copies instead of overwriting the next field).
	cut := func(from int) []byte { return buf[from:len(buf):len(buf)] }
	r := &paneRecord{}
	r.Topic = topic
	r.Timestamp = time.UnixMilli(p.End - 1)
	if p.Records {
		r.Timestamp = time.UnixMilli(p.LastTime) // a count window's bounds are not times
	}
	buf = enc.Append(buf, p)
	r.Value = cut(0)
	n := len(buf)
	buf = append(buf, p.Key...)
	r.Key = cut(n)
	h := &r.headers
	n = len(buf)
	buf = strconv.AppendInt(buf, p.Start, 10)
	h[0] = kgo.RecordHeader{Key: HeaderWindowStart, Value: cut(n)}
	n = len(buf)
	buf = strconv.AppendInt(buf, p.End, 10)
	h[1] = kgo.RecordHeader{Key: HeaderWindowEnd, Value: cut(n)}
	n = len(buf)
	buf = append(buf, p.Timing.String()...)
	h[2] = kgo.RecordHeader{Key: HeaderTiming, Value: cut(n)}
	n = len(buf)
	buf = strconv.AppendUint(buf, uint64(p.Index), 10)
	h[3] = kgo.RecordHeader{Key: HeaderIndex, Value: cut(n)}
	n = len(buf)
	buf = strconv.AppendBool(buf, p.Final)
	h[4] = kgo.RecordHeader{Key: HeaderFinal, Value: cut(n)}
	n = len(buf)
	buf = append(buf, p.Mode.String()...)
	h[5] = kgo.RecordHeader{Key: HeaderMode, Value: cut(n)}
	n = len(buf)
	buf = strconv.AppendBool(buf, p.Retraction)
	h[6] = kgo.RecordHeader{Key: HeaderRetraction, Value: cut(n)}
	n = len(buf)
	buf = p.AppendID(buf)
	h[7] = kgo.RecordHeader{Key: HeaderPaneID, Value: cut(n)}
	r.Headers = h[:8]
	if p.Zone != nil {
		n = len(buf)
		buf = append(buf, p.Zone.String()...)
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: HeaderTimeZone, Value: cut(n)})
	}
	if p.Quiet {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: HeaderQuiet, Value: []byte("true")})
	}
	if p.TimedOut {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: HeaderTimeout, Value: []byte("true")})
	}
	if p.Records {
		n = len(buf)
		buf = strconv.AppendInt(buf, p.FirstTime, 10)
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: HeaderFirstTime, Value: cut(n)})
		n = len(buf)
		buf = strconv.AppendInt(buf, p.LastTime, 10)
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: HeaderLastTime, Value: cut(n)})
	}
	if h, ok := enc.(headered); ok {
		r.Headers = append(r.Headers, h.headers()...)
	}
	return &r.Record
}

// headered is a PaneEncoder whose values come with headers of their own.
type headered interface {
	headers() []kgo.RecordHeader
}

// DivertedRecord builds a dead-letter or late record: the original key,
// value and headers, plus the reason and where the record came from.
func DivertedRecord(topic, reason string, src *kgo.Record, extra ...kgo.RecordHeader) *kgo.Record {
	headers := make([]kgo.RecordHeader, 0, len(src.Headers)+4+len(extra))
	headers = append(headers, src.Headers...)
	headers = append(headers,
		kgo.RecordHeader{Key: HeaderError, Value: []byte(reason)},
		kgo.RecordHeader{Key: HeaderSourceTopic, Value: []byte(src.Topic)},
		kgo.RecordHeader{Key: HeaderSourcePartition, Value: strconv.AppendInt(nil, int64(src.Partition), 10)},
		kgo.RecordHeader{Key: HeaderSourceOffset, Value: strconv.AppendInt(nil, src.Offset, 10)},
	)
	headers = append(headers, extra...)
	return &kgo.Record{Topic: topic, Key: src.Key, Value: src.Value, Timestamp: src.Timestamp, Headers: headers}
}

// HeaderProgress marks a progress record on the output topic
// (docs/SEMANTICS.md, Progress records); consumers of panes skip records
// that carry it.
const HeaderProgress = "windowd-progress"

// Progress is what one progress record says: pipeline's panes of windows
// of the input partitions Partitions (of InputPartitions) are complete
// through Frontier (every pane of a window with end <= Frontier that fired
// is before the record) and final through FinalThrough (every final pane
// of a window with end <= FinalThrough is before it).
type Progress struct {
	Pipeline        string
	Frontier        int64
	FinalThrough    int64
	Partitions      []int32
	InputPartitions int32
}

// FinalThrough is a progress record's final_through at frontier f:
// f - allowed lateness, saturated at the int64 minimum, and +infinity
// (MaxInt64) once the frontier is.
func FinalThrough(f, lateness int64) int64 {
	switch {
	case f == math.MaxInt64:
		return f
	case f < math.MinInt64+lateness:
		return math.MinInt64
	}
	return f - lateness
}

// ProgressRecord builds the progress record for output partition part:
// no key, the header windowd-progress: 1, value
// {"progress":{"pipeline":..,"frontier":..,"final_through":..,"partitions":[..],"input_partitions":..}}.
func ProgressRecord(topic string, part int32, pr *Progress) *kgo.Record {
	b := AppendProgressJSON(make([]byte, 0, 128+len(pr.Pipeline)+6*len(pr.Partitions)), pr)
	return &kgo.Record{Topic: topic, Partition: part, Value: b, Timestamp: time.UnixMilli(max(pr.Frontier, 0)),
		Headers: []kgo.RecordHeader{{Key: HeaderProgress, Value: []byte("1")}}}
}

// AppendProgressJSON appends a progress record's value (ProgressRecord;
// replay --progress prints the same line).
func AppendProgressJSON(b []byte, pr *Progress) []byte {
	b = append(b, `{"progress":{"pipeline":`...)
	b = codec.AppendJSONString(b, pr.Pipeline)
	b = append(b, `,"frontier":`...)
	b = strconv.AppendInt(b, pr.Frontier, 10)
	b = append(b, `,"final_through":`...)
	b = strconv.AppendInt(b, pr.FinalThrough, 10)
	b = append(b, `,"partitions":[`...)
	for i, p := range pr.Partitions {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, int64(p), 10)
	}
	b = append(b, `],"input_partitions":`...)
	b = strconv.AppendInt(b, int64(pr.InputPartitions), 10)
	return append(b, "}}"...)
}
