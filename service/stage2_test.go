package service

import (
	"reflect"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/windowd/windowd/config"
	"github.com/windowd/windowd/repartition"
	"github.com/windowd/windowd/state"
	"github.com/windowd/windowd/watermark"
	"github.com/windowd/windowd/windowing"
)

func TestUpstreamStateRoundTrip(t *testing.T) {
	s := &stage2{layout: repartition.NewLayout([]int32{3}), ups: map[int32]*repartition.Table{}}
	u := s.upstream(4)
	u.Apply(repartition.Marker{Upstream: 0, Watermark: 100})
	u.Apply(repartition.Marker{Upstream: 2, Watermark: -7, Idle: true})
	u.SetNext(1, 1<<40)
	s.upstream(0).SetNext(2, 9)
	got := &stage2{layout: s.layout, ups: map[int32]*repartition.Table{}}
	if err := got.decode(s.encode(), nil); err != nil || !reflect.DeepEqual(got.ups, s.ups) {
		t.Fatalf("round trip: %+v, %v", got.ups, err)
	}
	m := marker{position: 5, gen: watermark.Generator{MaxTS: 9, Seen: 1, Watermark: 4}, upstream: u, layout: &s.layout}
	back, err := decodeMarker(encodeMarker(m))
	if err != nil || !reflect.DeepEqual(back, m) {
		t.Fatalf("marker round trip: %+v, %v", back, err)
	}
	b := encodeMarker(m)
	if _, err := decodeMarker(b[:len(b)-1]); err == nil {
		t.Errorf("a truncated upstream table was accepted")
	}
	// A table of another input count starts over.
	s.layout = repartition.NewLayout([]int32{5})
	if v := s.upstream(4); v.Inputs() != 5 || v.Next(1) != 0 {
		t.Errorf("table after the input grew: %d inputs, next %d", v.Inputs(), v.Next(1))
	}
}

// TestUpstreamTablesFollowTheLayout: views (4 partitions, then 6) and
// clicks (2): the upstream tables stored under the first layout, in local
// state and in a changelog marker, are read back under the second with
// each input partition's marker and next offset at its new number, so
// that a click stage 1 writes again after the restart is still dropped.
// Before, the tables started over: the click was processed twice.
func TestUpstreamTablesFollowTheLayout(t *testing.T) {
	before, after := repartition.NewLayout([]int32{4, 2}), repartition.NewLayout([]int32{6, 2})
	s := &stage2{layout: before, ups: map[int32]*repartition.Table{}}
	u := s.upstream(3)
	clicks0, _ := before.Upstream(repartition.Source{In: 1, P: 0})
	u.Apply(repartition.Marker{Upstream: clicks0, Watermark: 100})
	u.Apply(repartition.Marker{Upstream: 1, Watermark: 90, Idle: true})
	if !u.Accept(clicks0, 49) || !u.Accept(1, 7) {
		t.Fatal("first records refused")
	}
	check := func(how string, v *repartition.Table) {
		t.Helper()
		moved, _ := after.Upstream(repartition.Source{In: 1, P: 0})
		if v.Inputs() != 8 {
			t.Fatalf("%s: a table of %d input partitions, want 8", how, v.Inputs())
		}
		if wm, _, seen := v.Upstream(moved); !seen || wm != 100 {
			t.Errorf("%s: clicks[0]'s marker: %d (seen %v), want 100", how, wm, seen)
		}
		if wm, idle, seen := v.Upstream(1); !seen || !idle || wm != 90 {
			t.Errorf("%s: views[1]'s marker: %d idle %v seen %v", how, wm, idle, seen)
		}
		if _, _, seen := v.Upstream(4); seen {
			t.Errorf("%s: the new views[4] was heard from", how)
		}
		if v.Accept(moved, 49) || v.Accept(1, 7) {
			t.Errorf("%s: a record processed before the restart was taken again", how)
		}
		if !v.Accept(moved, 50) || !v.Accept(4, 0) {
			t.Errorf("%s: a new record was dropped", how)
		}
	}
	// Local state.
	got := &stage2{layout: after, ups: map[int32]*repartition.Table{}}
	from, err := decodeLayout(s.encodeLayout())
	if err != nil {
		t.Fatal(err)
	}
	if err := got.decode(s.encode(), from); err != nil {
		t.Fatal(err)
	}
	check("local state", got.upstream(3))
	// A changelog marker.
	mk, err := decodeMarker(encodeMarker(marker{position: 5, upstream: s.upstream(3), layout: &s.layout}))
	if err != nil || mk.layout == nil {
		t.Fatalf("marker: %+v, %v", mk, err)
	}
	got.ups[3] = got.adopt(mk.upstream, mk.layout)
	check("changelog marker", got.upstream(3))
}

// TestStage2Records feeds a stage-2 pipeline the records stage 1 writes:
// markers move the partition's watermark only once every input partition
// was heard from and are never data; a record below the next upstream
// offset of its input partition (stage 1 wrote it again) is dropped.
func TestStage2Records(t *testing.T) {
	cfg, err := config.Parse("r.yaml", []byte(`kafka: {brokers: embedded}
pipelines:
  - name: r
    input: {topic: in}
    key: {field: user}
    timestamp: {field: ts}
    window: {type: tumbling, size: 1h}
    aggregates: [{name: n, op: count}]
    output: {topic: out}
    repartition: true
`))
	if err != nil {
		t.Fatal(err)
	}
	db, err := state.Open("s", state.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	pc := stage2Config(&cfg.Pipelines[0])
	if pc.Input.Topic != "windowd-r-r-repartition" || pc.Input.Group != pc.Input.Topic || !pc.Watermark.Marked {
		t.Fatalf("stage 2 config: %+v", pc.Input)
	}
	p := &pipeline{setup: setup{cfg: pc, log: zap.NewNop(), m: newMetrics(prometheus.NewRegistry()), now: time.Now}}
	p.mu.rp, p.mu.dec = &stage2{layout: repartition.NewLayout([]int32{2}), ups: map[int32]*repartition.Table{}}, newDecoders(pc)
	p.mu.parts = map[int32]*partition{}
	p.mu.eng, err = windowing.New(pc.Spec, pc.Watermark, db, p, windowing.Options{ShardByPartition: true})
	if err != nil {
		t.Fatal(err)
	}
	const q = 1
	st := p.partitionStateLocked(q)
	p.mu.eng.Assign(q, 0, true)
	var off int64
	marker := func(up int32, wm int64, idle bool) *kgo.Record {
		off++
		return &kgo.Record{Partition: q, Offset: off, Value: repartition.AppendMarker(nil, repartition.Source{P: up}, repartition.Marker{Watermark: wm, Idle: idle}),
			Headers: []kgo.RecordHeader{{Key: repartition.HeaderMarker}}}
	}
	data := func(up int32, upOff int64, ts string) *kgo.Record {
		off++
		return &kgo.Record{Partition: q, Offset: off, Key: []byte("u1"), Value: []byte(`{"user":"u1","ts":` + ts + `}`),
			Headers: []kgo.RecordHeader{{Key: "h", Value: []byte("x")}, {Key: repartition.HeaderUpstream, Value: repartition.AppendUpstream(nil, repartition.Source{P: up}, upOff)}}}
	}
	steps := []struct {
		r        *kgo.Record
		frontier int64
		records  int64 // engine records so far
	}{
		{marker(0, 1000, false), watermark.MinTime, 0}, // input 1 not heard from yet
		{data(0, 10, "1500"), watermark.MinTime, 1},
		{marker(1, 2000, false), 1000, 1},
		{data(1, 5, "2500"), 1000, 2},
		{data(0, 11, "1600"), 1000, 3},
		{data(0, 10, "1500"), 1000, 3}, // stage 1 wrote it again: dropped
		{data(0, 11, "1600"), 1000, 3}, //
		{data(0, 12, "1700"), 1000, 4}, // new again
		// Of an input partition added since the start (stage 1 of an
		// instance started later): processed as it is, never dropped.
		{data(2, 0, "1750"), 1000, 5},
		{marker(2, 9000, false), 1000, 5}, // ignored
		{marker(0, 3000, true), 2000, 5},
		{marker(1, 2500, true), 3000, 5}, // all idle: the largest
		{marker(1, 100, false), 3000, 5}, // a lower marker never moves it back
	}
	for i, s := range steps {
		if err := p.handleLocked(s.r, 0); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if f := p.mu.eng.Frontier(); f != s.frontier {
			t.Errorf("step %d: frontier %d, want %d", i, f, s.frontier)
		}
		if n := p.mu.eng.Stats().Records; n != s.records {
			t.Errorf("step %d: engine saw %d records, want %d", i, n, s.records)
		}
		if st.position != s.r.Offset+1 {
			t.Errorf("step %d: position %d, want %d", i, st.position, s.r.Offset+1)
		}
	}
	if got := testutil.ToFloat64(st.in); got != 5 {
		t.Errorf("records_in counted %v, want the 5 data records", got)
	}
	if got := testutil.ToFloat64(p.m.duplicates.WithLabelValues("r")); got != 2 {
		t.Errorf("duplicates %v, want 2", got)
	}
	// Under exactly_once a duplicate counts when its transaction commits:
	// a rollback would process it, and drop it, again.
	p.eos = true
	if err := p.handleLocked(data(0, 11, "1600"), 0); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(p.m.duplicates.WithLabelValues("r")); got != 2 || p.mu.txnDuplicates != 1 {
		t.Errorf("exactly_once: duplicates %v and %d in the open transaction, want 2 and 1", got, p.mu.txnDuplicates)
	}
	p.countCommittedDuplicatesLocked()
	if got := testutil.ToFloat64(p.m.duplicates.WithLabelValues("r")); got != 3 || p.mu.txnDuplicates != 0 {
		t.Errorf("exactly_once, committed: duplicates %v and %d in the open transaction, want 3 and 0", got, p.mu.txnDuplicates)
	}
	if got := testutil.ToFloat64(p.m.upstreamWatermark.WithLabelValues("r", "1")); got != 2500 {
		t.Errorf("upstream 1 watermark gauge %v, want 2500", got)
	}
}

func TestSplitDetector(t *testing.T) {
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "x"})
	d := newSplitDetector(c)
	for i, s := range []struct {
		key   string
		part  int32
		split bool
	}{{"a", 0, false}, {"a", 0, false}, {"b", 1, false}, {"a", 1, true}, {"a", 1, false}, {"b", 0, true}} {
		if got := d.see(s.key, s.part); got != s.split {
			t.Errorf("step %d: see(%q, %d) = %v, want %v", i, s.key, s.part, got, s.split)
		}
	}
	if testutil.ToFloat64(c) != 2 {
		t.Errorf("counter %v, want 2", testutil.ToFloat64(c))
	}
}
