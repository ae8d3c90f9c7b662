package service

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/windowd/windowd/codec"
	"github.com/windowd/windowd/kafka"
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
	// upstream table (repartitioned pipelines, repartition.go).
	markerVersionUpstream = 2
)

var markerKey = []byte{'m'}

// marker is what the changelog holds of a partition beyond its keys.
type marker struct {
	position int64               // next input offset: the state covers every record before it
	gen      watermark.Generator // the partition's watermark generator
	frontier int64               // the writer's frontier (informational)
	upstream *upstreamState      // repartitioned pipelines: the markers and next upstream offsets
}

func encodeMarker(m marker) []byte {
	version := byte(markerVersion)
	if m.upstream != nil {
		version = markerVersionUpstream
	}
	w := codec.NewWriter(nil).Byte(version)
	w.Varint(m.position).Varint(m.gen.MaxTS).Varint(m.gen.Seen).Varint(m.gen.Watermark).Varint(m.frontier)
	if m.upstream != nil {
		m.upstream.encode(w)
	}
	return w.Bytes()
}

func decodeMarker(b []byte) (marker, error) {
	r := codec.NewReader(b, "changelog marker")
	version := r.Byte()
	if r.Err() == nil && version != markerVersion && version != markerVersionUpstream {
		return marker{}, errors.New("changelog: unknown marker version")
	}
	m := marker{position: r.Varint(), gen: watermark.Generator{MaxTS: r.Varint(), Seen: r.Varint(), Watermark: r.Varint()}, frontier: r.Varint()}
	if version == markerVersionUpstream {
		m.upstream = decodeUpstreamState(r)
	}
	if err := r.Done(); err != nil {
		return marker{}, err
	}
	return m, nil
}

// trackingStore is the engine's store with a record of the keys written
// since the last commit cycle, per partition: the changelog's next records.
type trackingStore struct {
	*state.DB
	off    bool // restoring or dropping: not a change to log
	dirty  map[int32]map[string]struct{}
	writes int64 // key writes since start, to report the coalescing ratio
}

func (s *trackingStore) mark(shard uint32, key string) {
	if s.off {
		return
	}
	s.writes++
	m := s.dirty[int32(shard)]
	if m == nil {
		m = map[string]struct{}{}
		s.dirty[int32(shard)] = m
	}
	m[key] = struct{}{}
}

// PutKey implements windowing.Store.
func (s *trackingStore) PutKey(shard uint32, key string, value []byte) error {
	s.mark(shard, key)
	return s.DB.PutKey(shard, key, value)
}

// DeleteKey implements windowing.Store.
func (s *trackingStore) DeleteKey(shard uint32, key string) error {
	s.mark(shard, key)
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

// changelogAcks collects the outcome of changelog records produced in one cycle.
type changelogAcks struct {
	mu      sync.Mutex
	err     error
	markers map[int32]int64 // offset of the cycle's marker per partition
}

func (a *changelogAcks) done(r *kgo.Record, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err != nil {
		if a.err == nil {
			a.err = fmt.Errorf("changelog %s[%d]: %w", r.Topic, r.Partition, err)
		}
		return
	}
	if len(r.Key) == 1 && r.Key[0] == markerKey[0] {
		a.markers[r.Partition] = r.Offset
	}
}

// writeChangelog produces the cycle's changelog records (mu held, engine
// flushed): the latest value of every key written since the last cycle and
// a marker for every partition whose position or keys changed. It returns
// the acks to wait for (the caller flushes the producer).
func (p *pipeline) writeChangelog() *changelogAcks {
	acks := &changelogAcks{markers: map[int32]int64{}}
	for part, keys := range p.store.dirty {
		if _, assigned := p.parts[part]; !assigned {
			continue // released: its state is not this instance's to log
		}
		covers := []byte("-1")
		if st := p.parts[part]; st != nil && st.position >= 0 {
			covers = strconv.AppendInt(nil, st.position, 10)
		}
		for key := range keys {
			v, err := p.eng.KeyState(part, key)
			if err != nil {
				acks.err = err
				return acks
			}
			r := &kgo.Record{Topic: p.clTopic, Partition: part, Key: append([]byte{'k'}, key...), Value: v,
				Headers: []kgo.RecordHeader{{Key: headerCovers, Value: covers}}}
			p.cl.Produce(p.prodCtx, r, acks.done)
			p.m.changelogRecords.WithLabelValues(p.cfg.Name).Inc()
			p.m.changelogBytes.WithLabelValues(p.cfg.Name).Add(float64(len(r.Key) + len(v)))
		}
	}
	if len(p.store.dirty) > 0 && p.faultAfter > 0 {
		if p.faultAfter--; p.faultAfter == 0 {
			err := p.cl.Flush(p.prodCtx)
			p.log.Error("fault injection: exiting after the changelog's key records, before its markers and the checkpoint",
				zap.NamedError("flush", err))
			_ = p.log.Sync()
			os.Exit(FaultExitCode)
		}
	}
	for part, st := range p.parts {
		if st.position < 0 || (st.position == st.marked && len(p.store.dirty[part]) == 0) {
			continue
		}
		gen, _ := p.eng.Watermarks().Generator(part)
		mk := marker{position: st.position, gen: gen, frontier: p.eng.Frontier()}
		if p.rp != nil {
			mk.upstream = p.rp.upstream(part)
		}
		r := &kgo.Record{Topic: p.clTopic, Partition: part, Key: markerKey, Value: encodeMarker(mk)}
		p.cl.Produce(p.prodCtx, r, acks.done)
		p.m.changelogRecords.WithLabelValues(p.cfg.Name).Inc()
	}
	return acks
}

// changelogWritten records a cycle whose changelog records were all
// acknowledged: its markers' offsets are what local state now holds.
func (p *pipeline) changelogWritten(acks *changelogAcks) {
	p.m.stateWrites.WithLabelValues(p.cfg.Name).Add(float64(p.store.writes - p.loggedWrites))
	p.loggedWrites = p.store.writes
	for part, off := range acks.markers {
		p.clNext[part] = off + 1
		if st := p.parts[part]; st != nil {
			st.marked = st.position
		}
	}
	clear(p.store.dirty)
}

// putLocalMeta writes the offsets, changelog positions and skip sets into
// the store's pending batch (the next engine checkpoint commits them).
func (p *pipeline) putLocalMeta(offsets map[int32]int64) error {
	if err := p.db.PutMeta(metaOffsets, encodeOffsets(offsets)); err != nil {
		return err
	}
	if err := p.db.PutMeta(metaChangelog, encodeOffsets(p.clNext)); err != nil {
		return err
	}
	if p.rp != nil {
		if err := p.db.PutMeta(metaUpstream, p.rp.encode()); err != nil {
			return err
		}
	}
	return p.db.PutMeta(metaSkip, encodeSkip(p.skip))
}

func encodeSkip(m map[int32]*skipSet) []byte {
	w := codec.NewWriter(nil).Uvarint(uint64(len(m)))
	for part, s := range m {
		w.Varint(int64(part)).Uvarint(uint64(len(s.keys)))
		for k, off := range s.keys {
			w.String(k).Varint(off)
		}
	}
	return w.Bytes()
}

func decodeSkip(b []byte) (map[int32]*skipSet, error) {
	out := map[int32]*skipSet{}
	if b == nil {
		return out, nil
	}
	r := codec.NewReader(b, "skip sets in local state")
	for n := r.Count(); n > 0 && r.Err() == nil; n-- {
		part := r.Varint()
		cnt := r.Count()
		s := &skipSet{keys: make(map[string]int64, cnt)}
		for ; cnt > 0 && r.Err() == nil; cnt-- {
			key := r.String()
			off := r.Varint()
			s.keys[key] = off
			s.max = max(s.max, off)
		}
		out[int32(part)] = s
	}
	if err := r.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// changelogBounds returns the log start and end offsets of changelog partition part.
func (p *pipeline) changelogBounds(ctx context.Context, part int32) (lo, hi int64, err error) {
	for backoff := 250 * time.Millisecond; ; backoff = min(2*backoff, 5*time.Second) {
		lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		starts, err1 := p.adm.ListStartOffsets(lctx, p.clTopic)
		ends, err2 := p.adm.ListEndOffsets(lctx, p.clTopic)
		cancel()
		err = errors.Join(err1, err2)
		if err == nil {
			s, ok1 := starts.Lookup(p.clTopic, part)
			e, ok2 := ends.Lookup(p.clTopic, part)
			switch {
			case !ok1 || !ok2:
				err = fmt.Errorf("changelog %s has no partition %d", p.clTopic, part)
			case s.Err != nil || e.Err != nil:
				err = errors.Join(s.Err, e.Err)
			case s.Offset < 0 || e.Offset < s.Offset:
				// Not an answer (a broker that does not know the
				// partition's offsets yet): reading nothing here would
				// restore an empty state.
				err = fmt.Errorf("changelog %s[%d] listed as [%d, %d)", p.clTopic, part, s.Offset, e.Offset)
			default:
				return s.Offset, e.Offset, nil
			}
		}
		if ctx.Err() != nil {
			return 0, 0, ctx.Err()
		}
		p.log.Warn("listing changelog offsets failed (retrying)", zap.Int32("partition", part), zap.Error(err))
		kafka.RefreshTopicMetadata(ctx, p.cl, p.clTopic)
		select {
		case <-ctx.Done():
			return 0, 0, ctx.Err()
		case <-time.After(backoff):
		}
	}
}

// growChangelog adds partitions to the changelog topic when the input has
// grown past it (partitions added while running: partition p's state is
// logged to changelog partition p), so that every partition in parts has
// its changelog partition before it is restored.
func (p *pipeline) growChangelog(ctx context.Context, parts []int32) error {
	need := int32(0)
	for _, part := range parts {
		need = max(need, part+1)
	}
	if need == 0 {
		return nil
	}
	if err := kafka.GrowTopic(ctx, p.adm, p.cl, p.clTopic, need, p.log); err != nil {
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

// restore brings partition part's state up to the end of its changelog
// (mu held, nothing of part processed yet): from the changelog offset the
// local state holds when it holds one, else from the start after dropping
// whatever local state part had.
func (p *pipeline) restore(ctx context.Context, part int32) (restoreStats, error) {
	start := p.now()
	var rs restoreStats
	p.restoring.Store(int64(part))
	defer p.restoring.Store(-1)
	p.restoredRecords.Store(0)
	lo, hi, err := p.changelogBounds(ctx, part)
	if err != nil {
		return rs, err
	}
	rs.from, rs.to = lo, hi
	if c, ok := p.clNext[part]; ok && c >= lo && c <= hi {
		rs.from = c
	} else if !ok && lo == hi {
		// Nothing logged yet: local state, if any, is the only copy
		// (written before the changelog existed).
		rs.from = hi
	} else {
		rs.cold = true
		if err := p.dropPartition(part); err != nil {
			return rs, err
		}
		// The drop and the changelog positions without part commit
		// together: a crash mid-restore then restarts it from scratch.
		if err := p.putLocalMeta(p.offsetsToStore()); err != nil {
			return rs, err
		}
	}
	var mk *marker
	covers := map[string]int64{}
	if rs.from < hi {
		opts := append(append([]kgo.Opt(nil), p.baseOpts...),
			kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{p.clTopic: {part: kgo.NewOffset().At(rs.from)}}),
			kgo.FetchIsolationLevel(kgo.ReadCommitted()),
			// exactly_once: aborted records are not returned, but the
			// abort and commit markers after them are, so the read
			// reaches the end offset (the end of the last transaction).
			kgo.KeepControlRecords(),
			kgo.FetchMaxBytes(32<<20),
		)
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			return rs, err
		}
		defer cl.Close()
		next := rs.from
		for next < hi {
			fs := cl.PollFetches(ctx)
			if ctx.Err() != nil {
				return rs, ctx.Err()
			}
			var ferr error
			fs.EachError(func(_ string, _ int32, err error) { ferr = err })
			if ferr != nil {
				p.log.Warn("reading the changelog failed (retrying)", zap.Int32("partition", part), zap.Error(ferr))
			}
			var aerr error
			fs.EachPartition(func(fp kgo.FetchTopicPartition) {
				for _, r := range fp.Records {
					if aerr != nil {
						return
					}
					next = r.Offset + 1
					if r.Attrs.IsControl() {
						continue // a transaction's commit or abort marker
					}
					aerr = p.applyChangelog(part, r, &mk, covers)
					rs.records++
					rs.bytes += int64(len(r.Key) + len(r.Value))
				}
				// Offsets past the last stable offset hold no data
				// record (transaction markers).
				if len(fp.Records) == 0 && fp.LastStableOffset >= hi && fp.Err == nil {
					next = max(next, hi)
				}
			})
			if aerr != nil {
				return rs, aerr
			}
			p.restoredRecords.Store(rs.records)
			if p.db.PendingBytes() >= 64<<20 {
				// Only restore writes are pending (the cycle before the
				// restore committed the rest): safe to commit alone.
				if err := p.db.Commit(false); err != nil {
					return rs, err
				}
			}
		}
	}
	if mk != nil {
		p.offMu.Lock()
		p.stored[part] = mk.position
		p.offMu.Unlock()
		p.eng.Watermarks().RestoreGenerator(part, mk.gen)
		if p.rp != nil && mk.upstream != nil {
			p.rp.ups[part] = mk.upstream
		}
	}
	p.offMu.Lock()
	resume, known := p.stored[part]
	p.offMu.Unlock()
	s := p.skip[part]
	for k, c := range covers {
		if known && c <= resume {
			continue
		}
		if s == nil {
			s = &skipSet{keys: map[string]int64{}}
			p.skip[part] = s
		}
		s.keys[k] = max(s.keys[k], c)
		s.max = max(s.max, c)
	}
	p.clNext[part] = hi
	rs.took = p.now().Sub(start)
	return rs, nil
}

// applyChangelog applies one changelog record of part (mu held).
func (p *pipeline) applyChangelog(part int32, r *kgo.Record, mk **marker, covers map[string]int64) error {
	if len(r.Key) == 1 && r.Key[0] == markerKey[0] {
		m, err := decodeMarker(r.Value)
		if err != nil {
			return fmt.Errorf("changelog %s[%d] offset %d: %w", p.clTopic, part, r.Offset, err)
		}
		*mk = &m
		// Marker positions never decrease along the log (each owner
		// resumes from the last one), so a key covered up to this
		// marker's position cannot be ahead of the final one.
		for k, c := range covers {
			if c <= m.position {
				delete(covers, k)
			}
		}
		return nil
	}
	if len(r.Key) == 0 || r.Key[0] != 'k' {
		return fmt.Errorf("changelog %s[%d] offset %d: unknown record key %q", p.clTopic, part, r.Offset, r.Key)
	}
	key := string(r.Key[1:])
	for _, h := range r.Headers {
		if h.Key == headerCovers {
			if c, err := strconv.ParseInt(string(h.Value), 10, 64); err == nil && c >= 0 {
				covers[key] = c
			}
		}
	}
	return p.store.untracked(func() error { return p.eng.RestoreKey(part, key, r.Value) })
}

// dropPartition removes part's local state and what the pipeline knew of
// it: its windows now live in the changelog and with its next owner.
func (p *pipeline) dropPartition(part int32) error {
	// Other partitions' cached changes are written (and logged) first.
	if err := p.eng.Flush(); err != nil {
		return err
	}
	if err := p.store.untracked(func() error { return p.eng.DropShard(part) }); err != nil {
		return err
	}
	p.offMu.Lock()
	delete(p.stored, part)
	p.offMu.Unlock()
	delete(p.clNext, part)
	delete(p.skip, part)
	delete(p.store.dirty, part)
	if p.rp != nil {
		delete(p.rp.ups, part)
	}
	return nil
}

// dropExpiredHolds drops the local state of partitions of the last
// checkpoint that were not assigned back before their restart hold ended
// (mu held): they moved to another instance, which restores them from the
// changelog. The drop commits with the next cycle.
func (p *pipeline) dropExpiredHolds() error {
	held := map[int32]bool{}
	for _, s := range p.eng.Watermarks().Status() {
		if s.Held {
			held[s.Partition] = true
		}
	}
	var dropped []int32
	for part := range p.clNext {
		if _, assigned := p.parts[part]; assigned || held[part] {
			continue
		}
		if err := p.dropPartition(part); err != nil {
			return err
		}
		dropped = append(dropped, part)
	}
	if len(dropped) > 0 {
		sort.Slice(dropped, func(i, j int) bool { return dropped[i] < dropped[j] })
		p.log.Info("dropped local state of partitions not assigned back within the restart hold", zap.Int32s("partitions", dropped))
	}
	return nil
}
