package replay

import (
	"io"
	"strconv"

	"github.com/windowd/windowd/codec"
	"github.com/windowd/windowd/config"
	"github.com/windowd/windowd/repartition"
	"github.com/windowd/windowd/windowing"
)

// emitter writes what an engine emits: its panes on the output, its late
// and out-of-range records on the error stream, and the input's dead
// letters. A replay has one; with workers (workers.go), each worker has its
// own, writing into the buffers of the chunk it runs.
type emitter struct {
	p     *config.Pipeline
	out   io.Writer
	errs  io.Writer
	panes *windowing.PaneJSON
	buf   []byte
	eng   *windowing.Engine
	// windows: the fixed windows a late record missed (nil for sessions,
	// transaction and count windows).
	windows windowing.Assigner
	spans   []windowing.Span
	rp      *repartitioner // nil unless the pipeline repartitions
	// topics: with several inputs, their topics, and layout the
	// upstream partitions they are numbered as (layoutOf).
	topics []string
	layout repartition.Layout
	// line and cur: the number and text of the input line being handled.
	line int64
	cur  []byte
	// lineAt and lineSize: where a line too long to keep starts and its
	// length, for its dead letter (lineSize 0: the line is whole).
	lineAt, lineSize int64
}

func newEmitter(p *config.Pipeline, partitions int) emitter {
	e := emitter{p: p, panes: windowing.NewPaneJSON(p.Spec.Aggregates), layout: layoutOf(p, partitions)}
	if p.Inputs != nil {
		e.topics = p.InputTopics()
	}
	if k := p.Spec.Window.Kind; p.Join == nil && k != windowing.Session && k != windowing.Transaction && k != windowing.CountWindow { // count windows drop nothing as late
		e.windows = windowing.NewAssigner(p.Spec.Window)
	}
	return e
}

// Pane implements windowing.Emitter.
func (e *emitter) Pane(p *windowing.Pane) error {
	e.buf = e.panes.Append(e.buf[:0], p)
	e.buf = append(e.buf, '\n')
	_, err := e.out.Write(e.buf)
	return err
}

// inputPartition is the input partition ev was read from: when the
// pipeline repartitions, the engine sees the repartition partition.
func (e *emitter) inputPartition(ev *windowing.Event) int32 {
	if e.rp != nil {
		return e.rp.input
	}
	return ev.Partition
}

// Dropped implements windowing.Emitter: a record with no representable
// window is a dead letter; a late one is reported on the error stream,
// with or without a late_topic, with the window it missed and the frontier
// that expired it (docs/SEMANTICS.md, Replay: nothing is dropped unseen).
func (e *emitter) Dropped(ev *windowing.Event, reason windowing.DropReason) error {
	part := e.inputPartition(ev)
	if reason == windowing.DropOutOfRange {
		return e.deadLetter(reason.String(), part, ev.Offset, e.cur)
	}
	// The window it missed: its session [t, t+gap) (a transaction window's
	// [t, t+timeout)), or the latest of its fixed windows (the last to
	// expire).
	var missed windowing.Span
	if w := e.p.Spec.Window; w.Kind == windowing.Session || w.Kind == windowing.Transaction {
		missed = windowing.Span{Start: ev.Time, End: ev.Time + w.Gap} // Dropped only sees representable windows
	} else if e.spans = e.windows.Windows(e.spans[:0], ev.Time); len(e.spans) > 0 {
		missed = e.spans[len(e.spans)-1]
	}
	return e.lateDropped(ev, reason.String(), part, "window", missed, e.eng.Frontier())
}

// lateDropped reports late record ev of partition part on the error
// stream: why, the window (or a join's interval: span names it) it missed
// and the frontier that expired it.
func (e *emitter) lateDropped(ev *windowing.Event, reason string, part int32, span string, missed windowing.Span, frontier int64) error {
	b := append(e.buf[:0], `{"late_dropped":{"reason":`...)
	b = codec.AppendJSONString(b, reason)
	b = append(b, `,"line":`...)
	b = strconv.AppendInt(b, e.line, 10)
	b = e.appendPartition(b, part)
	b = append(b, `,"offset":`...)
	b = strconv.AppendInt(b, ev.Offset, 10)
	b = append(b, `,"key":`...)
	b = codec.AppendJSONString(b, ev.Key)
	b = append(b, `,"timestamp":`...)
	b = strconv.AppendInt(b, ev.Time, 10)
	b = append(b, `,"`...)
	b = append(b, span...)
	b = append(b, `":{"start":`...)
	b = strconv.AppendInt(b, missed.Start, 10)
	b = append(b, `,"end":`...)
	b = strconv.AppendInt(b, missed.End, 10)
	b = append(b, `},"frontier":`...)
	b = strconv.AppendInt(b, frontier, 10)
	b = append(b, "}}\n"...)
	e.buf = b
	_, err := e.errs.Write(b)
	return err
}

// deadLetter reports a bad line or record on the error stream (partition
// -1: the line names none).
func (e *emitter) deadLetter(reason string, partition int32, offset int64, raw []byte) error {
	b := append(e.buf[:0], `{"dead_letter":{"error":`...)
	b = codec.AppendJSONString(b, reason)
	b = append(b, `,"line":`...)
	b = strconv.AppendInt(b, e.line, 10)
	if partition >= 0 {
		b = e.appendPartition(b, partition)
		b = append(b, `,"offset":`...)
		b = strconv.AppendInt(b, offset, 10)
	}
	size := int64(len(raw))
	if e.lineSize > 0 {
		size = e.lineSize // raw is the start of a line too long to keep
		b = append(b, `,"byte":`...)
		b = strconv.AppendInt(b, e.lineAt, 10)
	}
	b = append(b, `,"input":`...)
	b = codec.AppendJSONString(b, string(raw[:min(len(raw), MaxEchoBytes)]))
	if size > MaxEchoBytes {
		b = append(b, `,"input_bytes":`...)
		b = strconv.AppendInt(b, size, 10)
	}
	b = append(b, "}}\n"...)
	e.buf = b
	_, err := e.errs.Write(b)
	return err
}

// appendPartition appends the members that name partition part: its
// "partition", and with several inputs its "topic" first (part is then
// an upstream partition).
func (e *emitter) appendPartition(b []byte, part int32) []byte {
	if len(e.topics) > 0 {
		var i int
		i, part = e.layout.Input(part)
		b = append(b, `,"topic":`...)
		b = codec.AppendJSONString(b, e.topics[i])
	}
	b = append(b, `,"partition":`...)
	return strconv.AppendInt(b, int64(part), 10)
}
