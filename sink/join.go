package sink

import (
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/windowd/windowd/codec"
	"github.com/windowd/windowd/watermark"
	"github.com/windowd/windowd/windowing"
)

// HeaderRowID is written on a join row's record: what the row is about,
// the same for the row whenever it is emitted again (docs/SEMANTICS.md,
// Joins), for consumers that drop the repeats an at_least_once restart
// can write.
const HeaderRowID = "row_id"

// JoinRows writes a join's rows (docs/SEMANTICS.md, Joins): one JSON
// object a row, each side under its input's as: the record's JSON value,
// with any byte that is not valid UTF-8 escaped as in keys.
type JoinRows struct {
	sides    [2][]byte // `,"<as>":` of the left and the right input
	interval bool
}

// NewJoinRows returns the writer of rows whose sides are named left and
// right; interval: an interval join's (else a window join's).
func NewJoinRows(left, right string, interval bool) *JoinRows {
	w := &JoinRows{interval: interval}
	for i, as := range []string{left, right} {
		w.sides[i] = append(codec.AppendJSONString([]byte{','}, as), ':')
	}
	return w
}

// Append appends r's JSON object (no newline) to b.
func (w *JoinRows) Append(b []byte, r *windowing.JoinRow) []byte {
	b = append(b, `{"key":`...)
	b = codec.AppendJSONString(b, r.Key)
	for i, rec := range [2]*windowing.JoinRecord{r.Left, r.Right} {
		b = append(b, w.sides[i]...)
		if rec == nil {
			b = append(b, "null"...)
		} else {
			b = codec.AppendJSONText(b, rec.Value)
		}
	}
	if w.interval {
		b = append(b, `,"interval":{"start":`...)
	} else {
		b = append(b, `,"window":{"start":`...)
	}
	b = strconv.AppendInt(b, r.Start, 10)
	b = append(b, `,"end":`...)
	b = strconv.AppendInt(b, r.End, 10)
	b = append(b, `},"pane":{"timing":"`...)
	b = append(b, r.Timing.String()...)
	b = append(b, `","final":`...)
	b = strconv.AppendBool(b, r.Final)
	b = append(b, `},"matched":`...)
	b = strconv.AppendBool(b, r.Left != nil && r.Right != nil)
	b = append(b, `,"retraction":`...)
	b = strconv.AppendBool(b, r.Retraction)
	return append(b, '}')
}

// Record builds r's output record: key the join key, value its JSON
// object, timestamp its end - 1 (clamped to the times Kafka takes),
// headers the row's timing, finality, retraction and id.
func (w *JoinRows) Record(topic string, r *windowing.JoinRow) *kgo.Record {
	rec := &kgo.Record{Topic: topic, Key: []byte(r.Key), Value: w.Append(nil, r)}
	rec.Timestamp = time.UnixMilli(max(0, min(r.End, watermark.MaxTime)-1))
	rec.Headers = []kgo.RecordHeader{
		{Key: HeaderTiming, Value: []byte(r.Timing.String())},
		{Key: HeaderFinal, Value: strconv.AppendBool(nil, r.Final)},
		{Key: HeaderRetraction, Value: strconv.AppendBool(nil, r.Retraction)},
		{Key: HeaderRowID, Value: AppendRowID(nil, r)},
	}
	return rec
}

// AppendRowID appends r's id: each side's record as partition:offset of
// the topic the join read it from ("-" for no record), the window's start
// for a window join, and what the row is: "match", or, for an unmatched
// row, "early", "retraction" or "final".
func AppendRowID(b []byte, r *windowing.JoinRow) []byte {
	for i, rec := range [2]*windowing.JoinRecord{r.Left, r.Right} {
		if i > 0 {
			b = append(b, '/')
		}
		if rec == nil {
			b = append(b, '-')
			continue
		}
		b = strconv.AppendInt(b, int64(rec.Partition), 10)
		b = append(b, ':')
		b = strconv.AppendInt(b, rec.Offset, 10)
	}
	b = append(b, '/')
	b = strconv.AppendInt(b, r.Start, 10)
	switch {
	case r.Left != nil && r.Right != nil:
		return append(b, "/match"...)
	case r.Retraction:
		return append(b, "/retraction"...)
	case r.Final:
		return append(b, "/final"...)
	}
	return append(b, "/early"...)
}
