package service

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/windowd/windowd/config"
	"github.com/windowd/windowd/source"
	"github.com/windowd/windowd/state"
	"github.com/windowd/windowd/windowing"
)

// statusPipeline is a pipeline without Kafka over two partitions whose
// panes go to the status ring only; now is its clock.
func statusPipeline(t testing.TB, now *time.Time) *pipeline {
	t.Helper()
	cfg, err := config.Parse("s.yaml", []byte(`kafka: {brokers: embedded}
pipelines:
  - name: s
    input: {topic: in}
    key: {field: user}
    timestamp: {field: ts}
    watermark: {max_delay: 0s}
    window: {type: tumbling, size: 1s}
    aggregates: [{name: n, op: count}]
    output: {topic: out}
`))
	if err != nil {
		t.Fatal(err)
	}
	return bareTestPipeline(t, &cfg.Pipelines[0], func() time.Time { return *now }, func(p *pipeline) {
		p.mu.panes = newPaneWriter(func(pn *windowing.Pane) { p.st.ring.add(pn, []byte(pn.Key), now.UnixMilli()) }, false)
	})
}

// bareTestPipeline is a pipeline of pc without Kafka over two assigned
// partitions, its state in memory; more sets what else it needs before
// the engine is made.
func bareTestPipeline(t testing.TB, pc *config.Pipeline, now func() time.Time, more func(p *pipeline)) *pipeline {
	t.Helper()
	db, err := state.Open("s", state.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	p := &pipeline{setup: setup{cfg: pc, orig: pc, log: zap.NewNop(), m: newMetrics(prometheus.NewRegistry()), now: now, db: db}}
	t.Cleanup(func() { p.closeQuery(); db.Close() })
	p.mu.dec = &decoders{each: []*source.Decoder{source.NewDecoder(pc)}}
	p.rs = newRestores()
	p.mu.parts = map[int32]*partition{}
	more(p)
	p.mu.eng, err = windowing.New(pc.Spec, pc.Watermark, db, p, windowing.Options{ShardByPartition: true})
	if err != nil {
		t.Fatal(err)
	}
	for part := int32(0); part < 2; part++ {
		p.partitionStateLocked(part)
		p.mu.eng.Assign(part, 0, true)
	}
	return p
}

func getStatus(t *testing.T, srv *httptest.Server) StatusResponse {
	t.Helper()
	res, err := http.Get(srv.URL + "/api/status")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if ct := res.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("content type %q", ct)
	}
	var s StatusResponse
	if err := json.NewDecoder(res.Body).Decode(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestStatusPage(t *testing.T) {
	now := time.UnixMilli(1_700_000_100_000)
	p := statusPipeline(t, &now)
	st := &status{now: func() time.Time { return now }}
	st.add(p)
	mux := http.NewServeMux()
	mountStatusPage(mux, st)
	srv := httptest.NewServer(mux)
	defer srv.Close()

	// Before the loop's first snapshot: the pipeline, no numbers yet.
	s := getStatus(t, srv)
	if len(s.Pipelines) != 1 || s.Pipelines[0].Name != "s" || s.Pipelines[0].FrontierMS != nil || s.Pipelines[0].Ready {
		t.Fatalf("before the first snapshot: %+v", s)
	}

	var off [2]int64
	feed := func(part int32, ts int64) {
		r := &kgo.Record{Partition: part, Offset: off[part], Value: []byte(`{"user":"u` + strconv.Itoa(int(part)) + `","ts":` + strconv.FormatInt(ts, 10) + `}`)}
		off[part]++
		if err := p.handleLocked(r, now.UnixMilli()); err != nil {
			t.Fatal(err)
		}
	}
	base := int64(1_700_000_000_000)
	feed(0, base+500)
	feed(1, base+200)
	feed(0, base+2500) // partition 0 ahead: partition 1 holds the frontier
	feed(1, base+1500) // closes [base, base+1s) for both
	p.mu.parts[1].end = off[1] + 1500
	p.updateMetricsLocked()
	p.mu.panes.sync()

	s = getStatus(t, srv)
	ps := s.Pipelines[0]
	if ps.FrontierMS == nil || *ps.FrontierMS != p.mu.eng.Frontier() || *ps.FrontierMS != base+1500 {
		t.Fatalf("frontier %v, want %d", ps.FrontierMS, base+1500)
	}
	if ps.FrontierLagSeconds == nil || *ps.FrontierLagSeconds != 98.5 {
		t.Errorf("frontier lag %v, want 98.5", ps.FrontierLagSeconds)
	}
	if len(ps.Partitions) != 2 || ps.Partitions[0].HoldsFrontier || !ps.Partitions[1].HoldsFrontier {
		t.Errorf("partitions %+v: want two, the second holding the frontier", ps.Partitions)
	}
	if q := ps.Partitions[1]; q.LagRecords == nil || *q.LagRecords != 1500 || !q.Lagging || q.Paused {
		t.Errorf("partition 1 %+v: want lagging by 1500 records, not paused", q)
	}
	if ps.RecordsIn != 4 || ps.OpenWindows != 2 || ps.Group.ID == "" {
		t.Errorf("records %d, open windows %d, group %+v", ps.RecordsIn, ps.OpenWindows, ps.Group)
	}
	if got := ps.Group.Assigned; len(got) != 2 || got[0] != 0 || got[1] != 1 {
		t.Errorf("assigned %v", got)
	}
	if ps.Panes["ON_TIME"] != 2 || len(ps.RecentPanes) != 2 || ps.RecentPanes[0].Timing != "ON_TIME" || ps.RecentPanes[0].StartMS != base {
		t.Errorf("panes %v, recent %+v: want the two ON_TIME panes of [base, base+1s)", ps.Panes, ps.RecentPanes)
	}

	// Rates span at least a second; snapshots come at most every
	// snapshotInterval however often the loop updates its metrics.
	now = now.Add(2 * time.Second)
	for i := 0; i < 10; i++ {
		feed(0, base+3000)
	}
	p.updateMetricsLocked()
	p.updateMetricsLocked() // within snapshotInterval: no new snapshot
	feed(0, base+3000)
	p.updateMetricsLocked()
	if ps = getStatus(t, srv).Pipelines[0]; ps.RecordsPerSecond != 5 || ps.RecordsIn != 14 {
		t.Errorf("records/s %v, records %d: want 5 and 14", ps.RecordsPerSecond, ps.RecordsIn)
	}

	// A restore in progress shows without waiting for a snapshot.
	j1, j3 := &restoreJob{part: 1}, &restoreJob{part: 3}
	j1.total.Store(400)
	j1.records.Store(100)
	j3.total.Store(100)
	j3.records.Store(25)
	p.rs.jobs[3], p.rs.jobs[1] = j3, j1
	if r := getStatus(t, srv).Pipelines[0].Restore; r == nil || !slices.Equal(r.Partitions, []int32{1, 3}) || r.Records != 125 || r.Share != 0.25 || r.Blocked != nil {
		t.Errorf("restore %+v, want partitions 1 and 3 at 25%%, neither blocked", r)
	}
	// A restore that reads nothing says why (restorewatch.go), in the
	// status and in /readyz.
	why := "partition 3 read nothing for 30s at offset 25 of 100; waiting for a transaction open on c/3 from offset 25"
	j3.blocked.Store(&why)
	if r := getStatus(t, srv).Pipelines[0].Restore; r == nil || !slices.Equal(r.Blocked, []string{why}) {
		t.Errorf("restore %+v, want partition 3 blocked: %q", r, why)
	}
	if ok, msg := p.ready(); ok || !strings.HasSuffix(msg, "(125 of 500 records so far); "+why) {
		t.Errorf("ready: %v %q, want the restore and why partition 3 waits", ok, msg)
	}
	clear(p.rs.jobs)

	// The server-rendered page shows the same numbers without script.
	res, err := http.Get(srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	page := string(body)
	for _, want := range []string{
		`data-frontier-ms="` + strconv.FormatInt(base+1500, 10) + `"`,
		`<dd class="frontier-value">2023-11-14 22:13:21.500</dd>`,
		`data-partition="0"`, `class="lane holds lagging" data-partition="1"`,
		"holds the frontier, lagging 1500 records",
		"<dt>frontier lag</dt><dd>100.5 s</dd>", // 2 s later
		"<dt>records in</dt><dd>14</dd>",
		"<dt>last commit</dt><dd>none yet</dd>",
		`<td class="t-ON_TIME">ON_TIME</td>`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Contains(page, "%!") || strings.Contains(page, "<no value>") {
		t.Errorf("a value the template could not format:\n%s", page)
	}
	if n := strings.Count(page[:strings.Index(page, "<script>")], `class="lane`); n != 2 {
		t.Errorf("%d lanes, want 2", n)
	}
	if strings.Contains(page, "http://") || strings.Contains(page, "https://") || strings.Contains(page, "src=") {
		t.Errorf("the page loads something from elsewhere")
	}
	if res.StatusCode != 200 || res.Header.Get("Content-Security-Policy") == "" {
		t.Errorf("status %d, CSP %q", res.StatusCode, res.Header.Get("Content-Security-Policy"))
	}
	// Only GET / is the page.
	if res, err := http.Get(srv.URL + "/nothing"); err != nil || res.StatusCode != http.StatusNotFound {
		t.Errorf("GET /nothing: %v %v", res.StatusCode, err)
	}
}

func TestPaneRing(t *testing.T) {
	var r paneRing
	if got := r.recent(); len(got) != 0 {
		t.Fatalf("empty ring: %v", got)
	}
	for i := 0; i < recentPanes+7; i++ {
		pn := windowing.Pane{Start: int64(i), End: int64(i + 1), Index: uint32(i), Final: i%2 == 0, Timing: windowing.Late}
		r.add(&pn, []byte("k"+strconv.Itoa(i)), int64(i))
	}
	got := r.recent()
	if len(got) != recentPanes {
		t.Fatalf("%d panes, want %d", len(got), recentPanes)
	}
	last := recentPanes + 6
	if got[0].Key != "k"+strconv.Itoa(last) || got[0].Index != uint32(last) || got[0].Final != (last%2 == 0) || got[0].Timing != "LATE" ||
		got[recentPanes-1].StartMS != 7 {
		t.Errorf("newest %+v, oldest %+v", got[0], got[recentPanes-1])
	}
}

func TestRestoreProgress(t *testing.T) {
	t0 := time.Unix(1000, 0)
	r := newRestoreProgress(t0, 1000)
	if _, _, ok := r.due(t0.Add(restoreLogInterval-time.Millisecond), 10); ok {
		t.Errorf("due before the interval")
	}
	share, rate, ok := r.due(t0.Add(4*time.Second), 400)
	if !ok || share != 0.4 || rate != 100 {
		t.Errorf("due at 4s: %v %v %v, want 40%% at 100/s", share, rate, ok)
	}
	if _, _, ok := r.due(t0.Add(5*time.Second), 500); ok {
		t.Errorf("due again a second later")
	}
	if share, _, ok := r.due(t0.Add(8*time.Second), 1200); !ok || share != 1 {
		t.Errorf("share past the total %v, want 1", share)
	}
}

// The status page's costs (docs/PERFORMANCE.md, Status page): a pane into
// the ring (the pane writer, per pane), a snapshot (the poll loop, at most
// every 250 ms), a request (the HTTP goroutine).
func BenchmarkPaneRingAdd(b *testing.B) {
	var r paneRing
	pn := windowing.Pane{Key: "u1", Start: 1, End: 2, Timing: windowing.OnTime}
	key := []byte("u1")
	for b.Loop() {
		r.add(&pn, key, 1)
	}
}

func BenchmarkPublishStatus(b *testing.B) {
	now := time.UnixMilli(1_700_000_100_000)
	p := statusPipeline(b, &now)
	for b.Loop() {
		now = now.Add(snapshotInterval)
		p.updateMetricsLocked()
	}
}

func BenchmarkAPIStatus(b *testing.B) {
	now := time.UnixMilli(1_700_000_100_000)
	p := statusPipeline(b, &now)
	for i := 0; i < recentPanes; i++ {
		p.st.ring.add(&windowing.Pane{Key: "u1"}, []byte("u1"), 1)
	}
	p.updateMetricsLocked()
	st := &status{now: func() time.Time { return now }}
	st.add(p)
	mux := http.NewServeMux()
	mountStatusPage(mux, st)
	for b.Loop() {
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, httptest.NewRequest("GET", "/api/status", nil))
	}
}
