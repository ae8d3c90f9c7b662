package service

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/windowd/windowd/kafka"
	"github.com/windowd/windowd/watermark"
)

// refreshEndsLocked lists the partitions' high watermarks so that a partition that
// delivers nothing can still be known caught up (and so may become idle).
func (p *pipeline) refreshEndsLocked(ctx context.Context) {
	if !p.in.co() {
		topic := p.cfg.Input.Topic
		refreshEnds(ctx, p.adm, topic, p.cl.CommittedOffsets()[topic], p.mu.parts, p.mu.eng.Watermarks(), nil)
		return
	}
	committed := p.cl.CommittedOffsets()
	for i, topic := range p.in.topics {
		parts := map[int32]*partition{}
		for part, st := range p.mu.parts {
			if p.in.input(part) == i {
				parts[lead(part)] = st
			}
		}
		id := func(kp int32) int32 { part, _ := p.in.id(topic, kp); return part }
		refreshEnds(ctx, p.adm, topic, committed[topic], parts, p.mu.eng.Watermarks(), id)
	}
}

// refreshEnds lists the high watermarks of topic's partitions in parts and
// tells wm which of them are caught up (id: the frontier's number of a
// partition of topic, nil: the same). A partition whose position is not
// known yet (nothing processed, stored or committed by this instance) is
// caught up when where its consumption begins is the end: its offset in
// committed (the group's committed offsets, as the consumer knows them),
// else its log start. That offset is only compared, never committed: the
// group's offset stays where it is until a record is processed.
func refreshEnds(ctx context.Context, adm *kadm.Client, topic string, committed map[int32]kgo.EpochOffset, parts map[int32]*partition, wm *watermark.Frontier, id func(int32) int32) {
	if len(parts) == 0 {
		return
	}
	lctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	ends, err := kafka.EndOffsets(lctx, adm, topic)
	if err != nil {
		return
	}
	var starts map[int32]int64
	for part, st := range parts {
		if e, ok := ends[part]; ok && e > st.end {
			st.end = e
		}
		if st.position < 0 {
			if eo, ok := committed[part]; ok && eo.Offset >= 0 {
				st.start = eo.Offset
			} else if st.start < 0 {
				if starts == nil {
					if starts, err = kafka.StartOffsets(lctx, adm, topic); err != nil {
						return
					}
				}
				if s, ok := starts[part]; ok {
					st.start = s
				}
			}
		}
		if id != nil {
			wm.SetCaughtUp(id(part), st.caughtUp())
		} else {
			wm.SetCaughtUp(part, st.caughtUp())
		}
	}
}

// consumed is the offset the partition has been consumed to: its position,
// or while that is unknown where its consumption begins; -1 when neither is
// known.
func (st *partition) consumed() int64 {
	if st.position >= 0 {
		return st.position
	}
	return st.start
}

// caughtUp reports whether the partition has been consumed to its last
// known end.
func (st *partition) caughtUp() bool {
	c := st.consumed()
	return c >= 0 && st.end >= 0 && c >= st.end
}
