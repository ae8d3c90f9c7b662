package replay

import (
	"strconv"

	"github.com/windowd/windowd/codec"
	"github.com/windowd/windowd/windowing"
)

// joinEmitter writes a join's rows on the output, one JSON object a line
// (docs/SEMANTICS.md, Joins), and its late and out-of-range records on the
// error stream as the emitter writes an engine's.
type joinEmitter struct {
	em *emitter
	j  *windowing.Joiner
	// sides: the members that start the left and the right record,
	// `,"<as>":`.
	sides [2][]byte
}

func newJoinEmitter(em *emitter) *joinEmitter {
	e := &joinEmitter{em: em}
	p := em.p
	for i, in := range []int32{p.Join.Left, p.Join.Right} {
		e.sides[i] = append(codec.AppendJSONString([]byte{','}, p.Inputs[in].As), ':')
	}
	return e
}

// Row implements windowing.JoinEmitter.
func (e *joinEmitter) Row(r *windowing.JoinRow) error {
	p := e.em.p
	b := append(e.em.buf[:0], `{"key":`...)
	b = codec.AppendJSONString(b, r.Key)
	for i, rec := range [2]*windowing.JoinRecord{r.Left, r.Right} {
		b = append(b, e.sides[i]...)
		if rec == nil {
			b = append(b, "null"...)
		} else {
			b = append(b, rec.Value...)
		}
	}
	if p.Join.Interval {
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
	b = append(b, "}\n"...)
	e.em.buf = b
	_, err := e.em.out.Write(b)
	return err
}

// Dropped implements windowing.JoinEmitter.
func (e *joinEmitter) Dropped(ev *windowing.Event, reason windowing.DropReason, missed windowing.Span) error {
	em := e.em
	if reason == windowing.DropOutOfRange {
		return em.deadLetter(reason.String(), ev.Partition, ev.Offset, em.cur)
	}
	span := "window"
	if em.p.Join.Interval {
		span = "interval"
	}
	return em.lateDropped(ev, "the record's last chance to match has passed", ev.Partition, span, missed, e.j.Frontier())
}
