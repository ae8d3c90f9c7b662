package service

import (
	"context"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/windowd/windowd/config"
	"github.com/windowd/windowd/kafka"
	"github.com/windowd/windowd/sink"
)

// Progress records (docs/SEMANTICS.md, Progress records): every
// progress_interval, in a commit cycle, after the panes the engine emitted
// before it, one record on every partition of the output topic saying
// through which event time this instance's panes of its partitions are
// complete. The pane writer has produced every pane emitted so far when a
// commit cycle runs (panes.sync), and the producer keeps the order of one
// partition's records, so a pane emitted before a progress record is
// before it in its partition; under exactly_once both are in the same
// transaction.

// progressTimeout bounds the topic listing a progress round needs.
const progressTimeout = 5 * time.Second

// writeProgressLocked produces the progress records when they are due (
// force: the shutdown cycle writes them whenever they are on).
func (p *pipeline) writeProgressLocked(ctx context.Context, force bool) {
	if p.cfg.ProgressInterval <= 0 {
		return
	}
	now := p.now()
	if !force && now.Before(p.mu.progressDue) {
		return
	}
	parts := make([]int32, 0, len(p.mu.parts))
	for part := range p.mu.parts {
		if part >= coStride {
			continue // a follower: its lead's number is its input partition's (coinputs.go)
		}
		parts = append(parts, part)
	}
	if len(parts) == 0 {
		return
	}
	slices.Sort(parts)
	complete, ok := p.mu.eng.Complete(parts)
	if !ok {
		return // a partition's windows wait, or no frontier yet
	}
	// The partition counts are listed each round: a consumer combines
	// progress over every input partition (docs/SEMANTICS.md), so the
	// count must not lag behind a grown topic.
	lctx, cancel := context.WithTimeout(ctx, progressTimeout)
	counts, err := kafka.PartitionCounts(lctx, p.adm, p.cfg.OutputTopic, p.cfg.Input.Topic)
	cancel()
	interval := time.Duration(p.cfg.ProgressInterval) * time.Millisecond
	if err != nil {
		// Tried again (and logged) at most every errLogInterval while
		// the listing fails: a broker outage fails it every cycle.
		p.log.Warn("progress records skipped: could not list the topics' partitions", zap.Error(err))
		p.mu.progressDue = now.Add(max(interval, errLogInterval))
		return
	}
	outputs, inputs := counts[p.cfg.OutputTopic], counts[p.cfg.Input.Topic]
	pr := sink.Progress{Pipeline: p.orig.Name, Frontier: complete, FinalThrough: sink.FinalThrough(complete, p.cfg.Spec.AllowedLateness),
		Partitions: parts, InputPartitions: max(inputs, parts[len(parts)-1]+1)}
	for k := int32(0); k < outputs; k++ {
		r := sink.ProgressRecord(p.cfg.OutputTopic, k, &pr)
		if p.cfg.OutputTimestamp == config.EmitTime {
			r.Timestamp = time.Time{} // as the panes: stamped when produced
		}
		p.produceLocked(r)
	}
	p.m.progress.WithLabelValues(p.cfg.Name).Add(float64(outputs))
	p.m.finalThrough.WithLabelValues(p.cfg.Name).Set(float64(pr.FinalThrough))
	p.mu.progressDue = now.Add(interval)
}
