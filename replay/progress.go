package replay

import (
	"github.com/windowd/windowd/sink"
	"github.com/windowd/windowd/watermark"
	"github.com/windowd/windowd/windowing"
)

// progress prints, with Options.Progress, a progress line on the output
// after the panes of each frontier step that emitted some, and one at the
// end: the line a progress record of `run` holds (docs/SEMANTICS.md,
// Progress records), over every partition of the input.
// f and st are the frontier and the engines' counts after the panes
// written so far.
func (r *runner) progress(f int64, st windowing.Stats) error {
	panes := st.Panes[0] + st.Panes[1] + st.Panes[2] + st.Retractions
	if f == r.progressAt || f == watermark.MinTime || panes == r.progressPanes && f != watermark.MaxTime {
		return nil
	}
	r.progressAt, r.progressPanes = f, panes
	parts := make([]int32, r.opts.Partitions)
	for i := range parts {
		parts[i] = int32(i)
	}
	pr := sink.Progress{Pipeline: r.opts.Pipeline.Name, Frontier: f, FinalThrough: sink.FinalThrough(f, r.opts.Pipeline.Spec.AllowedLateness),
		Partitions: parts, InputPartitions: int32(r.opts.Partitions)}
	r.buf = append(sink.AppendProgressJSON(r.buf[:0], &pr), '\n')
	_, err := r.out.Write(r.buf)
	return err
}
