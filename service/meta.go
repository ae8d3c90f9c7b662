package service

import "github.com/windowd/windowd/codec"

// loadMetaLocked reads what the last checkpoint holds beyond window state: the
// next input offset and the next changelog offset per partition, and the
// skip sets of restored keys.
func (p *pipeline) loadMetaLocked() error {
	var err error
	for name, dst := range map[string]map[int32]int64{metaOffsets: p.off.stored, metaChangelog: p.mu.clNext} {
		var b []byte
		if b, err = p.db.GetMeta(name); err != nil {
			return err
		}
		if err = decodeOffsets(b, dst); err != nil {
			return err
		}
	}
	if p.mu.rp != nil {
		b, err := p.db.GetMeta(metaUpstreamLayout)
		if err != nil {
			return err
		}
		from, err := decodeLayout(b)
		if err != nil {
			return err
		}
		if b, err = p.db.GetMeta(metaUpstream); err != nil {
			return err
		}
		if err := p.mu.rp.decode(b, from); err != nil {
			return err
		}
	}
	b, err := p.db.GetMeta(metaSkip)
	if err != nil {
		return err
	}
	p.mu.skip, err = decodeSkip(b)
	p.publishWarmLocked()
	return err
}

// decodeOffsets reads what encodeOffsets wrote into dst.
func decodeOffsets(b []byte, dst map[int32]int64) error {
	if b == nil {
		return nil
	}
	r := codec.NewReader(b, "offsets in local state")
	r.Offsets(dst)
	return r.Done()
}

// encodeOffsets encodes a next offset per partition (input offsets,
// changelog positions).
func encodeOffsets(m map[int32]int64) []byte { return codec.NewWriter(nil).Offsets(m).Bytes() }

// putLocalMeta writes the offsets, changelog positions and skip sets into
// the store's pending batch (the next engine checkpoint commits them).
func (p *pipeline) putLocalMeta(offsets map[int32]int64) error {
	if err := p.db.PutMeta(metaOffsets, encodeOffsets(offsets)); err != nil {
		return err
	}
	if err := p.db.PutMeta(metaChangelog, encodeOffsets(p.mu.clNext)); err != nil {
		return err
	}
	if p.mu.rp != nil {
		if err := p.db.PutMeta(metaUpstream, p.mu.rp.encode()); err != nil {
			return err
		}
		if err := p.db.PutMeta(metaUpstreamLayout, p.mu.rp.encodeLayout()); err != nil {
			return err
		}
	}
	return p.db.PutMeta(metaSkip, encodeSkip(p.mu.skip))
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
