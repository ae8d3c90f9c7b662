package service

import (
	"errors"
	"os"
	"strconv"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/windowd/windowd/codec"
	"github.com/windowd/windowd/kafka"
	"github.com/windowd/windowd/repartition"
	"github.com/windowd/windowd/state"
	"github.com/windowd/windowd/watermark"
)

// State follows partitions (docs/SEMANTICS.md, State follows partitions).
// Every commit cycle writes the latest value of each key that changed in
// input partition p to partition p of the pipeline's compacted changelog
// topic, then a marker record for p (its consumer position, generator and the
// frontier), and only then commits input offsets. A new owner of p restores
// p's keys from the changelog before it processes any record of p.
//
// Changelog records:
//
//	key 'k'+group key  value: the key's windows (windowing's encoding), or
//	                   a tombstone once its last window expired; header
//	                   "covers": the input offset below which the value
//	                   holds every record of the key.
//	key 'm'            the partition marker (encodeMarker).
//	key 'd'            the pipeline's definition (definition.go): what
//	                   the key values mean.
//
// A cycle's records can be written only in part (a crash before its marker):
// compaction may then have removed a key's previous value, so the restored
// value is newer than the marker's position. The "covers" header makes that
// safe: a record of the key below its covers offset is already in the value
// and is skipped (its watermark still counts), so nothing is counted twice.

const (
	metaChangelog = "changelog" // next changelog offset per partition that local state holds
	metaSkip      = "skip"      // covers offsets of restored keys not yet reached
	headerCovers  = "covers"
	markerVersion = 1
	// markerVersionUpstream: version 1 followed by the partition's
	// upstream table (repartitioned pipelines, stage2.go).
	markerVersionUpstream = 2
	// markerVersionLayout: version 2 followed by the layout the table is
	// numbered in.
	markerVersionLayout = 3
	// markerVersionInputs: version 1 followed by the position and
	// generator of each partition that follows this one (co-partitioned
	// inputs, coinputs.go).
	markerVersionInputs = 4
)

var markerKey = []byte{'m'}

// marker is what the changelog holds of a partition beyond its keys.
type marker struct {
	position int64               // next input offset: the state covers every record before it
	gen      watermark.Generator // the partition's watermark generator
	frontier int64               // the writer's frontier (informational)
	upstream *repartition.Table  // repartitioned pipelines: the markers and next upstream offsets
	layout   *repartition.Layout // the layout upstream is numbered in (nil: unknown, version 2)
	// follow: co-partitioned inputs, of each input after the first its
	// partition's position (-1: none yet) and generator.
	follow []followMark
}

// followMark is what a marker holds of a partition that follows its lead.
type followMark struct {
	position int64
	gen      watermark.Generator
}

func encodeMarker(m marker) []byte {
	version := byte(markerVersion)
	switch {
	case m.upstream != nil && m.layout != nil:
		version = markerVersionLayout
	case m.upstream != nil:
		version = markerVersionUpstream
	case m.follow != nil:
		version = markerVersionInputs
	}
	w := codec.NewWriter(nil).Byte(version)
	w.Varint(m.position).Varint(m.gen.MaxTS).Varint(m.gen.Seen).Varint(m.gen.Watermark).Varint(m.frontier)
	if version == markerVersionInputs {
		w.Uvarint(uint64(len(m.follow)))
		for _, f := range m.follow {
			w.Varint(f.position).Varint(f.gen.MaxTS).Varint(f.gen.Seen).Varint(f.gen.Watermark)
		}
	}
	if m.upstream != nil {
		m.upstream.Encode(w)
		if m.layout != nil {
			m.layout.Encode(w)
		}
	}
	return w.Bytes()
}

func decodeMarker(b []byte) (marker, error) {
	r := codec.NewReader(b, "changelog marker")
	version := r.Byte()
	if r.Err() == nil && (version < markerVersion || version > markerVersionInputs) {
		return marker{}, errors.New("changelog: unknown marker version")
	}
	m := marker{position: r.Varint(), gen: watermark.Generator{MaxTS: r.Varint(), Seen: r.Varint(), Watermark: r.Varint()}, frontier: r.Varint()}
	if version == markerVersionInputs {
		for n := r.Count(); n > 0 && r.Err() == nil; n-- {
			m.follow = append(m.follow, followMark{position: r.Varint(), gen: watermark.Generator{MaxTS: r.Varint(), Seen: r.Varint(), Watermark: r.Varint()}})
		}
	} else if version >= markerVersionUpstream {
		m.upstream = repartition.DecodeTable(r)
	}
	if version == markerVersionLayout {
		if l, ok := repartition.DecodeLayout(r); ok {
			m.layout = &l
		}
	}
	if err := r.Done(); err != nil {
		return marker{}, err
	}
	return m, nil
}

// trackingStore is the engine's store with the keys written since the last
// commit cycle, per partition, and each one's last value: the changelog's next
// records. Keeping the value as the engine writes it spares the cycle a read
// of every changed key back from Pebble, which costs more than the write
// (a memtable full of the cycle's deletes to step over).
type trackingStore struct {
	*state.DB
	off bool // restoring or dropping: not a change to log
	// dirty: per partition, each changed key's last value (nil: deleted).
	// The values are copies in slab, which the next cycle does not reuse:
	// the producer may still hold this cycle's records.
	dirty  map[int32]map[string][]byte
	slab   []byte
	writes int64 // key writes since start, to report the coalescing ratio
}

func (s *trackingStore) mark(shard uint32, key string, value []byte) {
	if s.off {
		return
	}
	s.writes++
	m := s.dirty[int32(shard)]
	if m == nil {
		m = map[string][]byte{}
		s.dirty[int32(shard)] = m
	}
	if value != nil {
		if cap(s.slab)-len(s.slab) < len(value) {
			s.slab = make([]byte, 0, max(64<<10, len(value)))
		}
		n := len(s.slab)
		s.slab = append(s.slab, value...)
		value = s.slab[n:len(s.slab):len(s.slab)]
	}
	m[key] = value
}

// forget drops the changes recorded so far (logged, or rolled back).
func (s *trackingStore) forget() {
	clear(s.dirty)
	s.slab = nil
}

// PutKey implements windowing.Store.
func (s *trackingStore) PutKey(shard uint32, key string, value []byte) error {
	s.mark(shard, key, value)
	return s.DB.PutKey(shard, key, value)
}

// DeleteKey implements windowing.Store.
func (s *trackingStore) DeleteKey(shard uint32, key string) error {
	s.mark(shard, key, nil)
	return s.DB.DeleteKey(shard, key)
}

// untracked runs f with change tracking off.
func (s *trackingStore) untracked(f func() error) error {
	s.off = true
	defer func() { s.off = false }()
	return f()
}

// skipSet holds, for one partition, the covers offset of every restored key
// whose value is ahead of the partition's position.
type skipSet struct {
	keys map[string]int64
	max  int64
}

// isMarker selects a partition's marker among the changelog's records:
// its offset is what local state holds after the cycle.
func isMarker(r *kgo.Record) bool { return len(r.Key) == 1 && r.Key[0] == markerKey[0] }

// writeChangelogLocked produces the cycle's changelog records (engine
// flushed): the latest value of every key written since the last cycle and
// a marker for every partition whose position or keys changed. It returns
// the acks to wait for (the caller flushes the producer).
func (p *pipeline) writeChangelogLocked() *kafka.Batch {
	acks := kafka.NewBatch("changelog", isMarker)
	for part, keys := range p.mu.store.dirty {
		if _, assigned := p.mu.parts[part]; !assigned {
			continue // released: its state is not this instance's to log
		}
		p.logDefinitionLocked(part, acks)
		covers := []byte("-1")
		if st := p.mu.parts[part]; st != nil && st.position >= 0 {
			covers = strconv.AppendInt(nil, st.position, 10)
		}
		headers := []kgo.RecordHeader{{Key: headerCovers, Value: covers}}
		for i, f := range p.in.followers(part) {
			if st := p.mu.parts[f]; st != nil && st.position >= 0 {
				headers = append(headers, kgo.RecordHeader{Key: coversHeader(i + 1), Value: strconv.AppendInt(nil, st.position, 10)})
			}
		}
		for key, v := range keys {
			r := &kgo.Record{Topic: p.clTopic, Partition: part, Key: append([]byte{'k'}, key...), Value: v, Headers: headers}
			p.prod.ProduceIn(p.prodCtx, r, acks)
			p.m.changelogRecords.WithLabelValues(p.cfg.Name).Inc()
			p.m.changelogBytes.WithLabelValues(p.cfg.Name).Add(float64(len(r.Key) + len(v)))
		}
	}
	if len(p.mu.store.dirty) > 0 && p.mu.faultAfter > 0 {
		if p.mu.faultAfter--; p.mu.faultAfter == 0 {
			err := p.prod.Flush(p.prodCtx)
			p.log.Error("fault injection: exiting after the changelog's key records, before its markers and the checkpoint",
				zap.NamedError("flush", err))
			_ = p.log.Sync()
			os.Exit(FaultExitCode)
		}
	}
	for part, st := range p.mu.parts {
		if part >= coStride {
			continue // a follower: in its lead's marker
		}
		follow, moved := p.followMarksLocked(part)
		if (st.position < 0 && follow == nil) || (st.position == st.marked && !moved && len(p.mu.store.dirty[part]) == 0) {
			continue
		}
		p.logDefinitionLocked(part, acks)
		gen, _ := p.mu.eng.Watermarks().Generator(part)
		mk := marker{position: st.position, gen: gen, frontier: p.mu.eng.Frontier(), follow: follow}
		if p.mu.rp != nil {
			mk.upstream, mk.layout = p.mu.rp.upstream(part), &p.mu.rp.layout
		}
		r := &kgo.Record{Topic: p.clTopic, Partition: part, Key: markerKey, Value: encodeMarker(mk)}
		p.prod.ProduceIn(p.prodCtx, r, acks)
		p.m.changelogRecords.WithLabelValues(p.cfg.Name).Inc()
	}
	return acks
}

// followMarksLocked returns what lead's marker holds of its followers (nil
// without any, or while none has a position), and whether one of them
// moved since its last marker.
func (p *pipeline) followMarksLocked(lead int32) (follow []followMark, moved bool) {
	known := false
	for _, f := range p.in.followers(lead) {
		fm := followMark{position: -1}
		if st := p.mu.parts[f]; st != nil {
			fm.position = st.position
			known = known || st.position >= 0
			moved = moved || st.position != st.marked
			fm.gen, _ = p.mu.eng.Watermarks().Generator(f)
		} else if at, ok := p.mu.restoredFollow[f]; ok {
			// Not assigned here since the state's restore: where that
			// put it, for the next restore of this state too.
			fm.position, fm.gen = at.position, at.gen
			known = known || at.position >= 0
		} else {
			fm.gen, _ = p.mu.eng.Watermarks().Generator(f)
		}
		follow = append(follow, fm)
	}
	if !known {
		return nil, false
	}
	return follow, moved
}

// coversHeader is the covers header of input i's partition (coinputs.go):
// "covers" for the first input, "covers.i" for the others.
func coversHeader(i int) string {
	if i == 0 {
		return headerCovers
	}
	return headerCovers + "." + strconv.Itoa(i)
}

// logDefinitionLocked writes the pipeline's definition to part's changelog once
// per assignment, and again when it changed (definition.go), ahead of the
// partition's key records.
func (p *pipeline) logDefinitionLocked(part int32, acks *kafka.Batch) {
	if p.mu.defLogged[part] == p.mu.defSeq {
		return
	}
	p.mu.defLogged[part] = p.mu.defSeq
	r := &kgo.Record{Topic: p.clTopic, Partition: part, Key: definitionKey, Value: p.mu.defBytes}
	p.prod.ProduceIn(p.prodCtx, r, acks)
	p.m.changelogRecords.WithLabelValues(p.cfg.Name).Inc()
}

// changelogWrittenLocked records a cycle whose changelog records were all
// acknowledged: its markers' offsets are what local state now holds.
//
// Unless another instance wrote to the partition since this one's last
// cycle: at least once, a member paused past its session (a stopped
// process, a long GC) finds on waking that its partitions went to another
// member, but the cycle it was in still sends its records, after the other
// member's. Local state then lacks the other member's changes, so it no
// longer counts as the changelog's up to any offset: the partition is
// restored from the whole changelog when it is next assigned here.
// exactly_once fences such a writer, and its transaction markers take
// offsets of their own.
func (p *pipeline) changelogWrittenLocked(acks *kafka.Batch) {
	p.m.stateWrites.WithLabelValues(p.cfg.Name).Add(float64(p.mu.store.writes - p.mu.loggedWrites))
	p.mu.loggedWrites = p.mu.store.writes
	for part, off := range acks.Offsets() {
		prev, known := p.mu.clNext[part]
		if first, ok := acks.First(part); ok && known && !p.eos && first > prev {
			delete(p.mu.clNext, part)
			p.log.Warn("another instance wrote this partition's changelog since this one's last commit cycle (it had lost the partition while paused): its local state is dropped when the partition is next assigned here, and restored from the whole changelog",
				zap.Int32("partition", part), zap.Int64("expected_offset", prev), zap.Int64("first_offset", first))
			continue
		}
		p.mu.clNext[part] = off + 1
		if st := p.mu.parts[part]; st != nil {
			st.marked = st.position
		}
		for _, f := range p.in.followers(part) {
			if st := p.mu.parts[f]; st != nil {
				st.marked = st.position
			}
		}
	}
	p.mu.store.forget()
}
