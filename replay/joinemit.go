package replay

import (
	"github.com/windowd/windowd/sink"
	"github.com/windowd/windowd/windowing"
)

// joinEmitter writes a join's rows on the output, one JSON object a line
// (docs/SEMANTICS.md, Joins), and its late and out-of-range records on the
// error stream as the emitter writes an engine's.
type joinEmitter struct {
	em   *emitter
	j    *windowing.Joiner
	rows *sink.JoinRows
}

func newJoinEmitter(em *emitter) *joinEmitter {
	p := em.p
	return &joinEmitter{em: em, rows: sink.NewJoinRows(p.Inputs[p.Join.Left].As, p.Inputs[p.Join.Right].As, p.Join.Interval)}
}

// Row implements windowing.JoinEmitter.
func (e *joinEmitter) Row(r *windowing.JoinRow) error {
	b := append(e.rows.Append(e.em.buf[:0], r), '\n')
	e.em.buf = b
	_, err := e.em.out.Write(b)
	return err
}

// Dropped implements windowing.JoinEmitter.
func (e *joinEmitter) Dropped(ev *windowing.Event, reason windowing.DropReason, missed windowing.Span) error {
	em := e.em
	part := em.inputPartition(ev)
	if reason == windowing.DropOutOfRange {
		return em.deadLetter(reason.String(), part, ev.Offset, em.cur)
	}
	span := "window"
	if em.p.Join.Interval {
		span = "interval"
	}
	return em.lateDropped(ev, "the record's last chance to match has passed", part, span, missed, e.j.Frontier())
}
