package service

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/windowd/windowd/kafka"
)

// growChangelog adds partitions to the changelog topic when the input has
// grown past it (partitions added while running: partition p's state is
// logged to changelog partition p), so that every partition in parts has
// its changelog partition before it is restored.
func (p *pipeline) growChangelog(ctx context.Context, parts []int32) error {
	need := int32(0)
	for _, part := range parts {
		need = max(need, lead(part)+1)
	}
	if need == 0 {
		return nil
	}
	if _, err := kafka.GrowTopic(ctx, p.adm, p.cl, p.clTopic, need, p.log); err != nil {
		return err
	}
	return kafka.ProducerSees(ctx, p.cl, p.clTopic, need)
}

// restoreStats are what one partition's restore did, for logs and metrics.
type restoreStats struct {
	from, to int64
	records  int64
	bytes    int64
	cold     bool
	took     time.Duration
}

// restoreLatestLocked applies a batch of latest values to part.
func (p *pipeline) restoreLatestLocked(part int32, entries []restoreEntry) error {
	return p.mu.store.untracked(func() error {
		for _, e := range entries {
			restore := p.mu.eng.RestoreKey
			if e.fresh {
				restore = p.mu.eng.RestoreNewKey
			}
			if err := restore(part, e.key, e.value); err != nil {
				return err
			}
		}
		return nil
	})
}

// applyChangelog reads one changelog record of part into the restore's
// state: a marker, or a key's latest value into latest (the restore's
// reader; it touches nothing of the pipeline's).
func (p *pipeline) applyChangelog(part int32, r *kgo.Record, mk **marker, def *[]byte, covers *coverLogs, latest *latestValues) error {
	if len(r.Key) == 1 && r.Key[0] == markerKey[0] {
		m, err := decodeMarker(r.Value)
		if err != nil {
			return fmt.Errorf("changelog %s[%d] offset %d: %w", p.clTopic, part, r.Offset, err)
		}
		*mk = &m
		covers.marked(&m)
		return nil
	}
	if len(r.Key) == 1 && r.Key[0] == definitionKey[0] {
		*def = bytes.Clone(r.Value)
		return nil
	}
	if len(r.Key) == 0 || r.Key[0] != 'k' {
		return fmt.Errorf("changelog %s[%d] offset %d: unknown record key %q", p.clTopic, part, r.Offset, r.Key)
	}
	kb := latest.keep(r.Key[1:])
	key := unsafe.String(unsafe.SliceData(kb), len(kb))
	for _, h := range r.Headers {
		if i, ok := coversInput(h.Key); ok {
			if c, err := strconv.ParseInt(string(h.Value), 10, 64); err == nil && c >= 0 {
				covers.add(i, key, c)
			}
		}
	}
	if old, ok := latest.values[key]; ok {
		latest.bytes -= len(key) + len(old)
	}
	var value []byte // nil: a tombstone
	if r.Value != nil {
		value = latest.keep(r.Value)
	}
	latest.values[key] = value
	latest.bytes += len(key) + len(value)
	return nil
}

// coversInput reports whether header is a covers header (coversHeader),
// and of which input.
func coversInput(header string) (int, bool) {
	if header == headerCovers {
		return 0, true
	}
	rest, ok := strings.CutPrefix(header, headerCovers+".")
	if !ok {
		return 0, false
	}
	i, err := strconv.Atoi(rest)
	return i, err == nil && i > 0
}

// dropPartitionLocked removes part's local state and what the pipeline knew of
// it: its windows now live in the changelog and with its next owner.
func (p *pipeline) dropPartitionLocked(part int32) error {
	// Other partitions' cached changes are written (and logged) first.
	if err := p.mu.eng.Flush(); err != nil {
		return err
	}
	if err := p.mu.store.untracked(func() error { return p.mu.eng.DropShard(part) }); err != nil {
		return err
	}
	p.off.Lock()
	delete(p.off.stored, part)
	p.off.Unlock()
	delete(p.mu.clNext, part)
	delete(p.mu.skip, part)
	delete(p.mu.restoredFollow, part)
	for _, f := range p.in.followers(part) { // where the dropped state put them
		delete(p.mu.restoredFollow, f)
	}
	delete(p.mu.defLogged, part)
	delete(p.mu.store.dirty, part)
	if p.mu.rp != nil {
		delete(p.mu.rp.ups, part)
	}
	return nil
}

// dropExpiredHoldsLocked drops the local state of partitions of the last
// checkpoint that were not assigned back before their restart hold ended:
// they moved to another instance, which restores them from the changelog.
// The drop commits with the next cycle.
func (p *pipeline) dropExpiredHoldsLocked() error {
	held := map[int32]bool{}
	for _, s := range p.mu.eng.Watermarks().Status() {
		if s.Held {
			held[s.Partition] = true
		}
	}
	var dropped []int32
	for part := range p.mu.clNext {
		if held[part] || p.keepsStateLocked(part) {
			continue
		}
		delete(p.mu.keptLost, part)
		if err := p.dropPartitionLocked(part); err != nil {
			return err
		}
		for _, f := range p.in.followers(part) { // their offsets and generators went with the state
			if _, assigned := p.mu.parts[f]; !assigned && !p.mu.following[f] {
				if err := p.dropPartitionLocked(f); err != nil {
					return err
				}
			}
		}
		dropped = append(dropped, part)
	}
	if len(dropped) > 0 {
		sort.Slice(dropped, func(i, j int) bool { return dropped[i] < dropped[j] })
		p.log.Info("dropped local state of partitions not assigned back within the restart hold or after a loss", zap.Int32s("partitions", dropped))
	}
	return nil
}
