package service

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"go.uber.org/zap"

	"github.com/windowd/windowd/evolve"
	"github.com/windowd/windowd/kafka"
	"github.com/windowd/windowd/state"
	"github.com/windowd/windowd/watermark"
)

// The pipeline's definition (package evolve) is stored with its state: in
// the state directory's metadata, and as record 'd' of every changelog
// partition, written once per assignment before the partition's first
// marker (changelog.go). A start compares it with the configuration and
// refuses a change the state cannot follow (docs/OPERATIONS.md, Changing a
// deployed pipeline); a restore compares the changelog's.
const (
	metaDefinition  = "definition"
	metaChangelogID = "changelog_id" // the topic id of the changelog the local state was logged to
)

var definitionKey = []byte{'d'}

// partitionCountTimeout bounds the metadata request of grewInputLocked.
const partitionCountTimeout = 5 * time.Second

// planState plans the start on the state directory's definition (after
// loadMeta): it sets p.mu.def and the engine's Evolution, or refuses.
func (p *pipeline) planState(inputs, logged int32, dir string) error {
	parts := inputs
	if p.orig.Repartition != nil {
		parts = 0 // state is keyed by the repartition topic's partitions
	}
	cur := evolve.Of(p.orig, parts)
	stored, err := p.db.GetMeta(metaDefinition)
	if err != nil {
		return err
	}
	stored = bytes.Clone(stored)
	shards, err := p.db.Shards()
	if err != nil {
		return err
	}
	plan, next, ev, err := evolve.Start(stored, len(shards) > 0 || len(p.off.stored) > 0, logged, cur, "state directory "+dir)
	if err != nil {
		return err
	}
	if plan != nil && len(plan.Changes) > 0 {
		p.log.Warn("the pipeline's configuration changed since its state was written; applying:\n"+plan.Text(), zap.Int("changes", len(plan.Changes)))
	}
	p.mu.def, p.mu.defBytes = next, nil
	p.engOpts.Evolve = ev
	p.engOpts.PartitionIDsFrom = next.PaneIDPartitionsFrom()
	return nil
}

// storeDefinitionLocked puts the definition, with the engine's sealed bound, in
// the state's pending writes (committed with the next checkpoint).
func (p *pipeline) storeDefinitionLocked() error {
	p.mu.def.Seal(p.mu.eng.Sealed())
	p.mu.defBytes = p.mu.def.Encode()
	p.mu.defSeq++
	return p.db.PutMeta(metaDefinition, p.mu.defBytes)
}

// adoptDefinitionLocked continues the state restored into part from a changelog
// written under stored: refused as a start would be, or its
// layouts and sealed bound taken in. Written under another
// allowed_lateness (a fresh state directory after the change), what had
// expired at the writer's frontier of the last marker mk (nil: none) is
// sealed and the restored windows take the current lateness, as a start
// on the state directory does (Definition.Evolution's Rearm).
func (p *pipeline) adoptDefinitionLocked(part int32, stored []byte, mk *marker) error {
	if bytes.Equal(stored, p.mu.defBytes) {
		return nil
	}
	r, err := evolve.Decode(stored)
	if err != nil {
		return fmt.Errorf("changelog %s[%d]: %w", p.clTopic, part, err)
	}
	plan, ls, err := p.mu.def.Adopt(r, fmt.Sprintf("changelog %s[%d]", p.clTopic, part))
	if err != nil {
		return err
	}
	if len(plan.Changes) > 0 {
		if text := plan.Text(); text != p.mu.adoptedPlan {
			p.log.Warn("the pipeline's configuration changed since the restored state was written; applying:\n"+text,
				zap.Int32("partition", part), zap.Int("changes", len(plan.Changes)))
			p.mu.adoptedPlan = text
		} else {
			p.log.Debug("the restored state was written under the configuration logged before; applying the same plan",
				zap.Int32("partition", part))
		}
	}
	if err := p.mu.eng.AddLayouts(ls); err != nil {
		return err
	}
	if from := p.mu.def.PaneIDPartitionsFrom(); from != p.engOpts.PartitionIDsFrom {
		p.engOpts.PartitionIDsFrom = from
		p.mu.eng.SetPartitionIDsFrom(from)
	}
	if r.Sealed != nil {
		p.mu.eng.Seal(*r.Sealed)
	}
	if r.Lateness != p.mu.def.Lateness {
		f := watermark.MinTime
		if mk != nil {
			f = mk.frontier
		}
		if err := p.mu.eng.Rearm(r.Lateness, f); err != nil {
			return err
		}
	}
	if p.mu.def.GrewFrom > 0 && p.mu.rp == nil {
		p.startSplitDetectorLocked() // another instance saw the input grow
	}
	return p.storeDefinitionLocked()
}

// readoptDefinitionLocked gives eng, an engine made again by a rollback,
// what the definition took in since the start (adoptDefinitionLocked): the
// layouts and sealed bound of changelogs restored since, which the engine
// options (the start's) lack. The restored state itself stays: exactly_once
// checkpoints a restore at once.
func (p *pipeline) readoptDefinitionLocked(eng engine) error {
	if len(p.mu.def.Layouts) > 0 {
		ls, err := evolve.Layouts(p.mu.def)
		if err != nil {
			return err
		}
		if err := eng.AddLayouts(ls); err != nil {
			return err
		}
	}
	if p.mu.def.Sealed != nil {
		eng.Seal(*p.mu.def.Sealed)
	}
	return nil
}

// grewInputLocked checks, at every assignment, whether partitions were added to
// the input while running (between polls). They are consumed, and
// applied by evolve's rule: the stored count follows, so that the next
// start does not take the growth for a change made while stopped, and the
// split-key detector starts (record.go), since keys the producer's
// partitioner moves to the added partitions have their windows split. A
// count the rule refuses stops the pipeline, as a start would refuse it.
func (p *pipeline) grewInputLocked(ctx context.Context, parts []int32) error {
	if p.mu.rp != nil || p.mu.def.Partitions == 0 {
		return nil
	}
	n := p.mu.def.Partitions
	for _, part := range parts {
		n = max(n, lead(part)+1)
	}
	// Bounded: a broker outage must not hold the group's callback (the
	// next assignment reads the count again).
	mctx, cancel := context.WithTimeout(ctx, partitionCountTimeout)
	defer cancel()
	if counts, err := kafka.PartitionCounts(mctx, p.adm, p.in.topics...); err != nil {
		p.log.Warn("reading the input's partition count failed: an added partition is noticed when it is assigned", zap.Error(err))
	} else {
		n = max(n, counts[p.cfg.Input.Topic])
		if p.in.co() {
			// Partitions added to one input and not the others: a key's
			// records would no longer meet (checked at the start too).
			var each []int32
			for _, topic := range p.in.topics {
				each = append(each, counts[topic])
			}
			if err := kafka.CoPartitioned(p.cfg, each); err != nil {
				return err
			}
		}
	}
	if n == p.mu.def.Partitions {
		return nil
	}
	from := p.mu.def.Partitions
	if err := p.mu.def.Grow(n); err != nil {
		return fmt.Errorf("pipeline %s: partitions were added to its input (seen at an assignment, after the start had read the old count): %w", p.cfg.Name, err)
	}
	p.log.Warn("the input grew while running: "+evolve.GrowthRule,
		zap.Int32("from_partitions", from), zap.Int32("to_partitions", n), zap.Int32("pane_ids_with_partition_from", p.mu.def.PaneIDPartitionsFrom()))
	p.startSplitDetectorLocked()
	return p.storeDefinitionLocked()
}

// openState opens the pipeline's state directory, first emptying it when
// its state was logged to a changelog that has been deleted since (a fresh
// start: `windowd reset`, or the topic deleted by hand): that state would
// continue windows the pipeline no longer has.
func (p *pipeline) openState(dir string, opts state.Options, changelogID [16]byte) (*state.DB, error) {
	db, err := state.Open(dir, opts)
	if err != nil {
		return nil, err
	}
	had, err := db.GetMeta(metaChangelogID)
	if err == nil && had != nil && !bytes.Equal(had, changelogID[:]) {
		p.log.Warn("the changelog was deleted and created again since the local state was written (a fresh start): the local state is discarded",
			zap.String("changelog", p.clTopic), zap.String("dir", dir))
		if err = db.Close(); err == nil {
			if err = removeState(opts.FS, dir); err == nil {
				db, err = state.Open(dir, opts)
				if err != nil {
					return nil, err
				}
			}
		}
	}
	if err == nil {
		err = db.PutMeta(metaChangelogID, changelogID[:])
	}
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("pipeline %s: state %s: %w", p.cfg.Name, dir, err)
	}
	return db, nil
}

// removeState deletes a state directory in fs (nil: the OS's).
func removeState(fs vfs.FS, dir string) error {
	if fs == nil {
		return os.RemoveAll(dir)
	}
	return fs.RemoveAll(dir)
}
