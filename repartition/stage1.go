package repartition

import "github.com/windowd/windowd/watermark"

// Stage1 is stage 1's watermark side: a generator and idleness per input
// partition, and the last marker sent of each.
type Stage1 struct {
	wm   *watermark.Frontier
	sent map[int32]Marker
}

// NewStage1 keeps the input partitions' watermarks by spec.
func NewStage1(spec watermark.Spec) *Stage1 {
	return &Stage1{wm: watermark.NewFrontier(spec), sent: map[int32]Marker{}}
}

// DownstreamSpec is stage 2's watermark spec for a pipeline's spec: a
// repartition partition's watermark comes only from markers (records never
// move it), and it is never idle itself: idleness is the input
// partitions', and travels in the markers.
func DownstreamSpec(s watermark.Spec) watermark.Spec {
	// Stage 1 aligns the input partitions (max_drift); the internal
	// partitions' watermarks follow theirs.
	s.Marked, s.IdleTimeout, s.MaxDrift = true, 0, 0
	return s
}

// Watermarks are the input partitions' generators: Assign, Observe, Tick
// and SetCaughtUp go there.
func (s *Stage1) Watermarks() *watermark.Frontier { return s.wm }

// Forget drops an input partition that this stage no longer reads; its
// next assignment broadcasts its marker again.
func (s *Stage1) Forget(part int32) {
	s.wm.Forget(part)
	delete(s.sent, part)
}

// Markers appends to dst the markers to broadcast at processing time now
// (Unix ms): of every assigned input partition whose watermark or idleness
// changed since its last marker, or, when all, of every assigned one.
// While the input partitions are quiet (watermark.Spec.QuietAdvance), an
// idle partition's marker carries the quiet advance's frontier: stage 2
// takes it only when every input partition, of every instance, is idle.
func (s *Stage1) Markers(dst []Marker, now int64, all bool) []Marker {
	quiet := s.wm.QuietValue()
	for _, st := range s.wm.Status() {
		if !st.Assigned {
			continue
		}
		m := Marker{Upstream: st.Partition, Watermark: st.Watermark, Idle: st.Idle, Time: now, Base: st.Watermark}
		if st.Idle && quiet > st.Watermark {
			m.Watermark, m.Quiet = quiet, true
		}
		last, sent := s.sent[st.Partition]
		if !all && sent && last.Watermark == m.Watermark && last.Idle == m.Idle && last.Base == m.Base {
			continue
		}
		s.sent[st.Partition] = m
		dst = append(dst, m)
	}
	return dst
}
