package service

import (
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/windowd/windowd/watermark"
)

// Watermark alignment (docs/SEMANTICS.md, Watermark alignment): after each
// poll, a partition whose watermark runs more than watermark.max_drift
// ahead of the frontier stops being fetched until the frontier is back
// within max_drift of it, so that a partition far ahead (a backfill, the
// others behind after an outage) does not open windows that wait in state
// for the slowest partition. The watermark package decides (Frontier.Align);
// this file applies it to the consumer (franz-go drops what it buffered of
// a paused partition and fetches it again on resume) and counts it.

// alignFetchMaxWait is how long the broker may hold a fetch that finds no
// data when alignment is on (franz-go's default is 5 s). A fetch goes out
// only once the one before it returns, so with every partition that has
// data paused, a resumed partition waited for the fetch in flight over
// partitions at their end: 5 s each time, which made a backfill drain
// 3 times slower than without alignment.
const alignFetchMaxWait = 100 * time.Millisecond

// aligner pauses and resumes one consumer's partitions, of one topic or
// of several (topics: the frontier's partitions and the consumer's).
type aligner struct {
	cl       *kgo.Client
	topics   partitionMap
	pipeline string
	m        *metrics
	since    map[int32]time.Time // paused partitions: when last counted
	wait     *registryWait       // its pauses are its own; nil: none
}

// partitionMap names a frontier's partitions in the consumer's topics
// (inputTopics, stage 1's layoutTopics) and back, and in metrics.
type partitionMap interface {
	toKafka(parts []int32) map[string][]int32
	fromKafka(m map[string][]int32) []int32
	label(part int32) string
}

func newAligner(cl *kgo.Client, topics partitionMap, pipeline string, m *metrics) *aligner {
	return &aligner{cl: cl, topics: topics, pipeline: pipeline, m: m, since: map[int32]time.Time{}}
}

// step applies wm's alignment at now.
func (a *aligner) step(wm *watermark.Frontier, now time.Time) {
	pause, resume := wm.Align(now.UnixMilli())
	// A partition the frontier forgot while paused resumes too: the
	// client keeps a pause until it is lifted.
	for _, part := range a.topics.fromKafka(a.cl.PauseFetchPartitions(nil)) {
		if !wm.Paused(part) && !wm.Restoring(part) && !slices.Contains(resume, part) && !a.wait.waiting(part) {
			resume = append(resume, part)
		}
	}
	if len(pause) > 0 {
		a.cl.PauseFetchPartitions(a.topics.toKafka(pause))
	}
	if len(resume) > 0 {
		a.cl.ResumeFetchPartitions(a.topics.toKafka(resume))
	}
	for _, part := range pause {
		a.since[part] = now
		a.m.paused.WithLabelValues(a.pipeline, a.topics.label(part)).Set(1)
	}
	for part, t := range a.since {
		a.m.pausedSeconds.WithLabelValues(a.pipeline, a.topics.label(part)).Add(now.Sub(t).Seconds())
		a.since[part] = now
	}
	for _, part := range resume {
		delete(a.since, part)
		a.m.paused.WithLabelValues(a.pipeline, a.topics.label(part)).Set(0)
	}
}
