package service

import (
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/windowd/windowd/schema"
	"github.com/windowd/windowd/sink"
	"github.com/windowd/windowd/source"
)

func (p *pipeline) partitionStateLocked(part int32) *partition {
	if st, ok := p.mu.parts[part]; ok {
		return st
	}
	label := p.in.label(part)
	st := newPartition(p.m.recordsIn.WithLabelValues(p.cfg.Name, label), p.m.deadLetters.WithLabelValues(p.cfg.Name, label),
		p.m.lateDropped.WithLabelValues(p.cfg.Name, label), p.m.filtered.WithLabelValues(p.cfg.Name, label))
	p.mu.parts[part] = st
	return st
}

// handleLocked processes one input record.
func (p *pipeline) handleLocked(r *kgo.Record, now int64) error {
	return p.handleDecodedLocked(r, nil, now)
}

// handleDecodedLocked is handleLocked with r's decoding done already (step's, decoded
// ahead), or done here when d is nil.
func (p *pipeline) handleDecodedLocked(r *kgo.Record, d *decoded, now int64) error {
	part := p.mu.parts[r.Partition] // assigned: step skips the others
	if r.Attrs.IsControl() {
		// A transaction's commit or abort marker (kafka.GroupOpts keeps
		// them): not data, but the position passes it.
		p.advancePositionLocked(part, r)
		return nil
	}
	marker := false
	if p.mu.rp != nil {
		marker, _ = repartitionHeaders(r)
	}
	if !marker {
		if d == nil {
			d = &p.mu.inline
			decodeRecord(p.mu.dec.of(r), r, d, now)
		}
		// Before anything takes the record in (stage 2's duplicate
		// check included): it comes again (registrywait.go).
		if un := registryDown(d.err); un != nil {
			return &registryUnavailable{un}
		}
	}
	if p.mu.rp != nil {
		done, err := p.stage2RecordLocked(r, now)
		if err != nil {
			return err
		}
		if done {
			// A marker, or a record processed already: not data.
			p.advancePositionLocked(part, r)
			return nil
		}
	}
	part.in.Inc()
	p.mu.cycleRecords++
	ev := &d.ev
	ev.Source = r // for Dropped (emit.go)
	if p.cfg.Join != nil {
		ev.Input = p.mu.dec.input(r) // the join's side
	}
	skip := p.mu.skip[r.Partition] // nil unless restored keys are ahead of this partition
	if d.err == source.ErrFiltered {
		part.filtered.Inc()
	} else if err := d.err; err != nil {
		var de *source.DecodeError
		if !errors.As(err, &de) {
			return err
		}
		part.dead.Inc()
		p.produceLocked(sink.DivertedRecord(p.cfg.DeadLetterTopic, de.Reason, p.in.sourceRecord(r)))
		p.mu.deadSinceLog++
		if t := p.now(); t.Sub(p.mu.lastDeadLog) >= time.Second {
			p.log.Info("records dead-lettered", zap.String("topic", p.cfg.DeadLetterTopic), zap.Int("count", p.mu.deadSinceLog),
				zap.String("last_reason", de.Reason), zap.Int32("partition", r.Partition), zap.Int64("offset", r.Offset))
			p.mu.lastDeadLog, p.mu.deadSinceLog = t, 0
		}
	} else if skip != nil && r.Offset < skip.keys[ev.Key] {
		// A restored value of the key already holds this record.
		if err := p.mu.eng.Skip(ev, now); err != nil {
			return fmt.Errorf("engine: %w", err)
		}
	} else {
		if p.mu.split != nil && p.mu.split.see(ev.Key, lead(r.Partition)) {
			p.warnSplitLocked(r.Partition, ev.Key)
		}
		if err := p.mu.eng.Record(ev, now); err != nil {
			return fmt.Errorf("engine: %w", err)
		}
	}
	ev.Source = nil
	p.advancePositionLocked(part, r)
	return nil
}

// advancePositionLocked moves part past r.
func (p *pipeline) advancePositionLocked(part *partition, r *kgo.Record) {
	if part.position < 0 && part.first < 0 {
		part.first = r.Offset
	}
	part.position = r.Offset + 1
	if skip := p.mu.skip[r.Partition]; skip != nil && part.position >= skip.max {
		delete(p.mu.skip, r.Partition)
	}
}

// warnSplitLocked logs, at most once a minute, that a key arrived on two input
// partitions (split.go).
func (p *pipeline) warnSplitLocked(part int32, key string) {
	if t := p.now(); t.Sub(p.mu.split.lastLog) >= time.Minute {
		p.mu.split.lastLog = t
		p.log.Warn("key seen on two input partitions: without repartition: true its windows are split between the partitions' states and each emits its own panes",
			zap.String("key_from", p.cfg.Key.String()), zap.String("key", key), zap.Int32("partition", part),
			zap.String("fix", "set repartition: true on the pipeline, or key the input topic by "+p.cfg.Key.String()+" (and add partitions to it only with repartition: true)"))
	}
}

// registryDown returns the schema registry's unavailability err wraps, or
// nil. A separate function, so that the variable errors.As needs is on the
// heap only for a record with an error, not for every record.
func registryDown(err error) *schema.Unavailable {
	if err == nil {
		return nil
	}
	var un *schema.Unavailable
	if errors.As(err, &un) {
		return un
	}
	return nil
}
