package service

import (
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/windowd/windowd/watermark"
	"github.com/windowd/windowd/windowing"
)

// The status page (docs/OPERATIONS.md, Status page) reads snapshots, never
// the engine: the poll loop publishes one through an atomic pointer at most
// every snapshotInterval, after its metrics update (once per poll, not per
// record), and the pane writer copies each pane's
// identity into a small ring. A request costs the loop nothing.
const (
	snapshotInterval = 250 * time.Millisecond
	// rateInterval is the shortest span records/s and panes/s are measured over.
	rateInterval = time.Second
	// recentPanes is how many of the last panes the page shows.
	recentPanes = 50
	// lagRecords: a partition this many records or more behind its high
	// watermark is shown as lagging.
	lagRecords = 1000
)

// PipelineStatus is one pipeline in GET /api/status (docs/OPERATIONS.md).
type PipelineStatus struct {
	Name       string `json:"name"`
	InputTopic string `json:"input_topic"`
	// SnapshotMS is the wall clock when the pipeline last published this
	// snapshot (Unix ms); NowMS the wall clock of the response.
	SnapshotMS int64  `json:"snapshot_ms"`
	Ready      bool   `json:"ready"`
	NotReady   string `json:"not_ready,omitempty"`
	// FrontierMS is null before the first frontier (and at +infinity).
	FrontierMS         *int64   `json:"frontier_ms"`
	FrontierLagSeconds *float64 `json:"frontier_lag_seconds"`
	// Quiet: every partition is idle and the frontier moves with
	// processing time (docs/SEMANTICS.md, Quiet inputs).
	Quiet bool `json:"quiet"`

	RecordsPerSecond float64            `json:"records_per_second"`
	PanesPerSecond   map[string]float64 `json:"panes_per_second"` // by timing
	RecordsIn        int64              `json:"records_in"`
	DeadLetters      int64              `json:"dead_letters"`
	LateDropped      int64              `json:"late_dropped"`
	Filtered         int64              `json:"filtered"`
	Panes            map[string]int64   `json:"panes"` // by timing, retractions not counted
	OpenWindows      int64              `json:"open_windows"`
	CacheBytes       int64              `json:"cache_bytes"`
	StateBytes       int64              `json:"state_bytes"`

	LastCommit *CommitStatus  `json:"last_commit"` // null before the first
	Restore    *RestoreStatus `json:"restore"`     // null when no partition restores
	Standbys   []int32        `json:"standbys"`    // partitions of other members kept warm here
	Group      GroupStatus    `json:"group"`

	Partitions  []PartitionStatus `json:"partitions"`
	RecentPanes []PaneStatus      `json:"recent_panes"` // newest first
}

// CommitStatus is the last successful commit cycle.
type CommitStatus struct {
	AtMS      int64   `json:"at_ms"`
	LatencyMS float64 `json:"latency_ms"`
}

// RestoreStatus is the restores from the changelog under way, together.
type RestoreStatus struct {
	Partitions []int32 `json:"partitions"`
	Records    int64   `json:"records"` // changelog records read so far
	Total      int64   `json:"total"`   // changelog offsets to read (0 while not yet listed)
	Share      float64 `json:"share"`   // 0..1
	// Blocked: for each partition whose read has taken no record for a
	// while, why (the transactions holding it, restorewatch.go).
	Blocked []string `json:"blocked,omitempty"`
}

// restoreStatus sums up the restores under way; nil when none runs.
func (p *pipeline) restoreStatus() *RestoreStatus {
	jobs := p.rs.restoring()
	if len(jobs) == 0 {
		return nil
	}
	r := &RestoreStatus{}
	for _, j := range jobs {
		r.Partitions = append(r.Partitions, j.part)
		r.Records += j.records.Load()
		r.Total += j.total.Load()
		if why := j.blocked.Load(); why != nil {
			r.Blocked = append(r.Blocked, *why)
		}
	}
	if r.Total > 0 {
		r.Share = min(1, float64(r.Records)/float64(r.Total))
	}
	return r
}

// GroupStatus is the consumer-group membership.
type GroupStatus struct {
	ID         string  `json:"id"`
	MemberID   string  `json:"member_id"`
	Generation int32   `json:"generation"`
	Assigned   []int32 `json:"assigned"`
}

// PartitionStatus is one lane of the timeline: an assigned input partition.
type PartitionStatus struct {
	Partition int32 `json:"partition"`
	// Topic: with several inputs read co-partitioned, the partition's
	// input topic ("" otherwise).
	Topic       string `json:"topic,omitempty"`
	WatermarkMS *int64 `json:"watermark_ms"` // null before its first watermark
	Idle        bool   `json:"idle"`
	// HoldsFrontier: its watermark is the frontier.
	HoldsFrontier bool `json:"holds_frontier"`
	// LagRecords is null until the position and high watermark are known.
	LagRecords *int64 `json:"lag_records"`
	Lagging    bool   `json:"lagging"`
	// Paused: watermark alignment paused it, too far ahead of the
	// frontier (docs/SEMANTICS.md, Watermark alignment).
	Paused bool `json:"paused"`
	// WaitingForRegistry: paused until the schema registry answers for
	// its next record's schema (docs/SEMANTICS.md, Input formats).
	WaitingForRegistry bool  `json:"waiting_for_registry"`
	RecordsIn          int64 `json:"records_in"`
	DeadLetters        int64 `json:"dead_letters"`
	LateDropped        int64 `json:"late_dropped"`
}

// PaneStatus is one pane emitted, as the pane writer produced it.
type PaneStatus struct {
	EmittedMS  int64  `json:"emitted_ms"`
	Key        string `json:"key"`
	StartMS    int64  `json:"start_ms"`
	EndMS      int64  `json:"end_ms"`
	Timing     string `json:"timing"`
	Index      uint32 `json:"index"`
	Final      bool   `json:"final"`
	Retraction bool   `json:"retraction"`
}

// snapshot is what the poll loop publishes.
type snapshot struct {
	PipelineStatus
	frontier int64 // engine frontier, watermark.MinTime before the first
}

// statusState is what the pipeline publishes for the status page: the
// snapshot (the loop stores it, requests load it) and the pane ring (the
// pane writer fills it under its own lock).
type statusState struct {
	cur  atomic.Pointer[snapshot]
	ring paneRing
}

// statusRates is what the loop keeps to build snapshots (loopState).
type statusRates struct {
	last      time.Time // when the last snapshot was built
	rateAt    time.Time // start of the current rate span
	rateIn    int64
	ratePanes map[string]int64
	in        float64
	panes     map[string]float64
}

// paneRing holds the last recentPanes panes. It is written by the pane
// writer only (one goroutine, or the loop when inline); the lock is
// uncontended except against a status request.
type paneRing struct {
	mu  sync.Mutex
	buf [recentPanes]ringPane
	n   uint64
}

// ringPane is a pane's identity; key references the output record's key
// bytes, which nothing writes once the record is built.
type ringPane struct {
	emitted    int64
	key        []byte
	start, end int64
	timing     windowing.Timing
	index      uint32
	final      bool
	retraction bool
}

func (r *paneRing) add(pn *windowing.Pane, key []byte, now int64) {
	r.mu.Lock()
	e := &r.buf[r.n%recentPanes]
	*e = ringPane{emitted: now, key: key, start: pn.Start, end: pn.End, timing: pn.Timing, index: pn.Index, final: pn.Final, retraction: pn.Retraction}
	if pn.Records {
		// A count window's bounds count records: the page shows its
		// first and last records' times.
		e.start, e.end = pn.FirstTime, pn.LastTime
	}
	r.n++
	r.mu.Unlock()
}

// recent returns the panes held, newest first.
func (r *paneRing) recent() []PaneStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := min(r.n, recentPanes)
	out := make([]PaneStatus, 0, n)
	for i := uint64(0); i < n; i++ {
		e := &r.buf[(r.n-1-i)%recentPanes]
		out = append(out, PaneStatus{EmittedMS: e.emitted, Key: string(e.key), StartMS: e.start, EndMS: e.end,
			Timing: e.timing.String(), Index: e.index, Final: e.final, Retraction: e.retraction})
	}
	return out
}

func counterValue(c prometheus.Counter) int64 {
	if c == nil {
		return 0
	}
	var m dto.Metric
	if err := c.Write(&m); err != nil || m.Counter == nil {
		return 0
	}
	return int64(m.Counter.GetValue())
}

func gaugeValue(g prometheus.Gauge) int64 {
	var m dto.Metric
	if err := g.Write(&m); err != nil || m.Gauge == nil {
		return 0
	}
	return int64(m.Gauge.GetValue())
}

func optInt(v int64) *int64 {
	if v == watermark.MinTime || v == watermark.MaxTime {
		return nil
	}
	return &v
}

// publishStatusLocked builds and publishes a snapshot when the last one is
// older than snapshotInterval (called after updateMetrics, whose watermark
// status it is given).
func (p *pipeline) publishStatusLocked(status []watermark.PartitionStatus, minActive int64) {
	s := &p.mu.status
	now := p.now()
	if now.Sub(s.last) < snapshotInterval && p.st.cur.Load() != nil {
		return
	}
	s.last = now
	f := p.mu.eng.Frontier()
	ps := PipelineStatus{
		Name:        p.cfg.Name,
		InputTopic:  p.inputTopic(),
		SnapshotMS:  now.UnixMilli(),
		FrontierMS:  optInt(f),
		Quiet:       p.mu.eng.Watermarks().Quiet(),
		OpenWindows: p.mu.eng.OpenWindows(),
		CacheBytes:  int64(p.mu.eng.CacheBytes()),
		StateBytes:  gaugeValue(p.m.stateBytes.WithLabelValues(p.cfg.Name)),
		Panes:       map[string]int64{},
		Group:       GroupStatus{ID: p.cfg.Input.Group, Assigned: []int32{}},
		Partitions:  []PartitionStatus{},
	}
	ps.Ready, ps.NotReady = p.ready()
	for t := windowing.Early; t <= windowing.Late; t++ {
		ps.Panes[t.String()] = counterValue(p.mu.paneCounters[t])
	}
	if p.cl != nil {
		ps.Group.MemberID, ps.Group.Generation = p.cl.GroupMetadata()
	}
	if last := p.lastCommitOK.Load(); last > 0 {
		c := &CommitStatus{AtMS: last / int64(time.Millisecond)}
		if d := time.Unix(0, last).Sub(p.mu.lastCommit); d >= 0 {
			c.LatencyMS = float64(d.Microseconds()) / 1000
		}
		ps.LastCommit = c
	}
	p.partitionsStatusLocked(&ps, status, minActive, f)
	s.rate(&ps, now)
	p.st.cur.Store(&snapshot{PipelineStatus: ps, frontier: f})
}

// partitionsStatusLocked adds the assigned partitions to ps, with their sums.
func (p *pipeline) partitionsStatusLocked(ps *PipelineStatus, status []watermark.PartitionStatus, minActive, f int64) {
	for _, st := range status {
		part := p.mu.parts[st.Partition]
		if part == nil || !st.Assigned {
			continue
		}
		q := PartitionStatus{
			Partition:          lead(st.Partition),
			WatermarkMS:        optInt(st.Watermark),
			Idle:               st.Idle,
			Paused:             st.Paused,
			WaitingForRegistry: p.mu.wait.waiting(st.Partition),
			HoldsFrontier:      !st.Idle && st.Watermark == minActive && f < watermark.MaxTime,
			RecordsIn:          counterValue(part.in),
			DeadLetters:        counterValue(part.dead),
			LateDropped:        counterValue(part.late),
		}
		if p.in.co() {
			q.Topic, _ = p.in.kafka(st.Partition)
		}
		if c := part.consumed(); part.end >= 0 && c >= 0 {
			lag := max(0, part.end-c)
			q.LagRecords, q.Lagging = &lag, lag >= lagRecords
		}
		ps.RecordsIn += q.RecordsIn
		ps.DeadLetters += q.DeadLetters
		ps.LateDropped += q.LateDropped
		ps.Filtered += counterValue(part.filtered)
		ps.Partitions = append(ps.Partitions, q)
	}
	for part := range p.mu.parts {
		if part < coStride { // co-partitioned inputs: partition p of each
			ps.Group.Assigned = append(ps.Group.Assigned, part)
		}
	}
	sort.Slice(ps.Group.Assigned, func(i, j int) bool { return ps.Group.Assigned[i] < ps.Group.Assigned[j] })
}

// rate sets ps's rates, over at least rateInterval; a rebalance that drops
// a partition's counters restarts the span.
func (s *statusRates) rate(ps *PipelineStatus, now time.Time) {
	if s.rateAt.IsZero() || ps.RecordsIn < s.rateIn {
		s.rateAt, s.rateIn, s.ratePanes = now, ps.RecordsIn, ps.Panes
		s.panes = map[string]float64{}
	} else if d := now.Sub(s.rateAt); d >= rateInterval {
		sec := d.Seconds()
		s.in = float64(ps.RecordsIn-s.rateIn) / sec
		s.panes = map[string]float64{}
		for t, n := range ps.Panes {
			s.panes[t] = float64(n-s.ratePanes[t]) / sec
		}
		s.rateAt, s.rateIn, s.ratePanes = now, ps.RecordsIn, ps.Panes
	}
	ps.RecordsPerSecond = s.in
	ps.PanesPerSecond = s.panes
}

// inputTopic is the configured input topic (stage 2 of a repartitioned
// pipeline reads the internal topic; the page names the one configured).
func (p *pipeline) inputTopic() string {
	if p.orig != nil {
		return p.orig.Input.Topic
	}
	return p.cfg.Input.Topic
}

// statusNow is the pipeline's last snapshot completed with what changes
// between snapshots: frontier lag at now, restore progress, recent panes.
func (p *pipeline) statusNow(now time.Time) PipelineStatus {
	sn := p.st.cur.Load()
	var ps PipelineStatus
	if sn == nil {
		ps = PipelineStatus{Name: p.cfg.Name, InputTopic: p.inputTopic(), Panes: map[string]int64{}, PanesPerSecond: map[string]float64{},
			Group: GroupStatus{ID: p.cfg.Input.Group, Assigned: []int32{}}, Partitions: []PartitionStatus{}}
		ps.Ready, ps.NotReady = p.ready()
	} else {
		ps = sn.PipelineStatus
		if ps.FrontierMS != nil {
			lag := float64(now.UnixMilli()-*ps.FrontierMS) / 1000
			ps.FrontierLagSeconds = &lag
		}
	}
	if r := p.restoreStatus(); r != nil {
		ps.Restore = r
		ps.Ready, ps.NotReady = p.ready()
	}
	ps.Standbys = []int32{}
	for _, j := range p.rs.list() {
		if j.standby.Load() {
			ps.Standbys = append(ps.Standbys, j.part)
		}
	}
	ps.RecentPanes = p.st.ring.recent()
	return ps
}
