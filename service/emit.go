package service

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/windowd/windowd/config"
	"github.com/windowd/windowd/sink"
	"github.com/windowd/windowd/windowing"
)

// produceLocked sends an output, late or dead-letter record.
func (p *pipeline) produceLocked(r *kgo.Record) {
	p.mu.txnRecords = true
	p.guard.topic(p.orig.Name, r.Topic).check(r, p.now, p.log)
	p.prod.Produce(p.prodCtx, r)
}

// Pane implements windowing.Emitter: the pane goes to the pane writer,
// which produces it (writePane) in emission order. The engine is the
// loop's: Pane and Dropped run holding mu, like its …Locked methods.
func (p *pipeline) Pane(pn *windowing.Pane) error {
	p.mu.txnRecords = true
	p.mu.panes.add(pn)
	if !pn.Retraction {
		p.paneCounter(pn.Timing).Inc()
	}
	return nil
}

// writePane builds pn's output record and produces it (the pane writer's
// goroutine: besides its own state, p.w, it reads only what does not
// change once the pipeline is built).
func (p *pipeline) writePane(pn *windowing.Pane) {
	r := sink.PaneRecord(p.cfg.OutputTopic, pn, p.w.enc)
	if p.cfg.OutputTimestamp == config.EmitTime {
		r.Timestamp = time.Time{} // the producer stamps it with the time it is produced
	}
	p.outGuard.check(r, p.now, p.log)
	p.prod.Produce(p.prodCtx, r)
	p.st.ring.add(pn, r.Key, p.nowMS())
	if p.stdout != nil {
		if p.cfg.OutputFormat == config.JSON {
			p.stdout.writeLine(r.Value)
		} else {
			p.stdout.writeLine(windowing.AppendJSON(nil, pn, p.cfg.Spec.Aggregates))
		}
	}
}

// paneCounter returns the pane counter of timing t (under mu, as the
// engine calls Pane).
func (p *pipeline) paneCounter(t windowing.Timing) prometheus.Counter {
	if int(t) >= len(p.mu.paneCounters) {
		return p.m.panes.WithLabelValues(p.cfg.Name, t.String())
	}
	if p.mu.paneCounters[t] == nil {
		p.mu.paneCounters[t] = p.m.panes.WithLabelValues(p.cfg.Name, t.String())
	}
	return p.mu.paneCounters[t]
}

// Dropped implements windowing.Emitter: late records are counted and go to
// the late topic; a record with no representable window is a dead letter.
func (p *pipeline) Dropped(ev *windowing.Event, reason windowing.DropReason) error {
	part := p.mu.parts[ev.Partition]
	if reason == windowing.DropOutOfRange {
		if part != nil {
			part.dead.Inc()
		}
		if src, ok := ev.Source.(*kgo.Record); ok {
			p.produceLocked(sink.DivertedRecord(p.cfg.DeadLetterTopic, reason.String(), p.in.sourceRecord(src)))
		}
		return nil
	}
	if part != nil {
		part.late.Inc()
	}
	if src, ok := ev.Source.(*kgo.Record); ok && p.cfg.LateTopic != "" {
		p.produceLocked(sink.DivertedRecord(p.cfg.LateTopic, reason.String(), p.in.sourceRecord(src),
			kgo.RecordHeader{Key: sink.HeaderEventTime, Value: strconv.AppendInt(nil, ev.Time, 10)}))
	}
	return nil
}
