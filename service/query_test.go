package service

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/windowd/windowd/config"
	"github.com/windowd/windowd/repartition"
	"github.com/windowd/windowd/windowing"
)

// queryPipeline is a pipeline without Kafka over two partitions, keyed
// by the record key, whose state the query API reads; its panes go
// nowhere.
func queryPipeline(t testing.TB) *pipeline {
	t.Helper()
	cfg, err := config.Parse("q.yaml", []byte(`kafka: {brokers: embedded}
pipelines:
  - name: q
    input: {topic: in}
    timestamp: {field: ts}
    watermark: {max_delay: 0s}
    window: {type: tumbling, size: 1h}
    allowed_lateness: 1000h
    aggregates: [{name: n, op: count}]
    output: {topic: out}
`))
	if err != nil {
		t.Fatal(err)
	}
	return bareTestPipeline(t, &cfg.Pipelines[0], time.Now, func(p *pipeline) {
		p.queryAddr = "self"
		p.mu.panes = newPaneWriter(func(*windowing.Pane) {}, false)
		p.q.byHash, p.q.partitions = true, 2
	})
}

// recordLocked feeds one record of key at event time ts to its partition.
func (p *pipeline) recordLocked(t testing.TB, key string, ts int64) {
	ev := windowing.Event{Partition: repartition.KeyPartition(key, p.q.partitions), Key: key, Time: ts, Inputs: make([]windowing.Input, 1)}
	if err := p.mu.eng.Record(&ev, 0); err != nil {
		t.Fatal(err)
	}
}

// checkpointLocked commits the engine's state and publishes the view, as
// the commit cycle does (commit.go).
func (p *pipeline) testCheckpointLocked(t testing.TB) {
	p.sealQueryLocked()
	if err := p.mu.eng.Checkpoint(false); err != nil {
		t.Fatal(err)
	}
	p.publishQueryLocked()
}

func countOf(t testing.TB, a *windowsAnswer) int64 {
	var n int64
	for _, w := range a.Windows {
		var v struct{ Aggregates struct{ N int64 } }
		if err := json.Unmarshal(w, &v); err != nil {
			t.Fatal(err)
		}
		n += v.Aggregates.N
	}
	return n
}

// TestQueryWhileCheckpointing: queries read while the loop records and
// checkpoints (the race detector watches the view's hand-off): every
// answer is of one checkpoint, so a key's count only grows and is a whole
// number of the loop's steps (10 records each), and the last equals the
// records fed. A withdrawn view is a 503 after a short wait; a closed
// pipeline answers for nothing.
func TestQueryWhileCheckpointing(t *testing.T) {
	p := queryPipeline(t)
	ctx := context.Background()
	const steps, per = 200, 10
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range steps {
			p.mu.Lock()
			for j := range per {
				p.recordLocked(t, "k", int64(i*per+j))
			}
			p.testCheckpointLocked(t)
			p.mu.Unlock()
			time.Sleep(time.Millisecond) // the commit cadence, compressed
		}
	}()
	req := &queryRequest{pipeline: "q", key: "k", from: -1 << 62, to: 1 << 62}
	var last int64
	answers := 0
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for loop := true; loop; {
		select {
		case <-done:
			loop = false
		default:
		}
		a, _, err := p.query(ctx, nil, req)
		if err != nil {
			continue // before the first checkpoint
		}
		n := countOf(t, a)
		if n < last || n%per != 0 {
			t.Fatalf("count %d after %d: not one checkpoint's", n, last)
		}
		last = n
		answers++
	}
	a, _, err := p.query(ctx, nil, req)
	if err != nil || countOf(t, a) != steps*per {
		t.Fatalf("last answer %v %v, want %d records", a, err, steps*per)
	}
	t.Logf("%d answers while the loop checkpointed %d times", answers, steps)
	if answers < steps/4 {
		t.Fatalf("%d answers while the loop checkpointed %d times: queries starve", answers, steps)
	}

	p.hideQuery()
	start := time.Now()
	if _, _, err := p.query(ctx, nil, req); err == nil || time.Since(start) < queryRetries*queryRetryWait {
		t.Fatalf("a withdrawn view answered (%v) or gave up early (%v)", err, time.Since(start))
	}
	p.mu.Lock()
	p.testCheckpointLocked(t)
	p.mu.Unlock()
	p.closeQuery()
	req.forwarded = true // (no group to ask for the owner here)
	if _, _, err := p.query(ctx, nil, req); !errors.Is(err, errNotHere) {
		t.Fatalf("a closed pipeline answered: %v", err)
	}
}

// TestQueryLeavesReleasedPartitions: a partition the group took away,
// whose release waits for the loop (exactly_once), is not answered for,
// though its state is still here; the other partition is.
func TestQueryLeavesReleasedPartitions(t *testing.T) {
	p := queryPipeline(t)
	gone, stays := "", ""
	for i := 0; gone == "" || stays == ""; i++ {
		k := fmt.Sprintf("k%d", i)
		if repartition.KeyPartition(k, 2) == 0 {
			gone = k
		} else {
			stays = k
		}
	}
	p.mu.Lock()
	p.recordLocked(t, gone, 1)
	p.recordLocked(t, stays, 1)
	p.rel.released = []int32{0}
	p.testCheckpointLocked(t)
	p.mu.Unlock()
	ctx := context.Background()
	if _, _, err := p.query(ctx, nil, &queryRequest{pipeline: "q", key: gone, from: -1 << 62, to: 1 << 62, forwarded: true}); !errors.Is(err, errNotHere) {
		t.Fatalf("a released partition's key: %v, want not answered here", err)
	}
	if a, _, err := p.query(ctx, nil, &queryRequest{pipeline: "q", key: stays, from: -1 << 62, to: 1 << 62, forwarded: true}); err != nil || countOf(t, a) != 1 {
		t.Fatalf("the other partition's key: %v %v", a, err)
	}
}

// TestAdvertised: the address other members forward queries to.
func TestAdvertised(t *testing.T) {
	ifaces := func() ([]net.Addr, error) {
		return []net.Addr{&net.IPNet{IP: net.ParseIP("127.0.0.1")}, &net.IPNet{IP: net.ParseIP("fe80::1")}, &net.IPNet{IP: net.ParseIP("10.1.2.3")}}, nil
	}
	for _, c := range []struct{ advertise, listen, want string }{
		{"", "127.0.0.1:9100", "127.0.0.1:9100"},
		{"", "10.0.0.5:9100", "10.0.0.5:9100"},
		{"", "0.0.0.0:9100", "10.1.2.3:9100"},
		{"", "[::]:9100", "10.1.2.3:9100"},
		{"", ":9100", "10.1.2.3:9100"},
		{"windowd-0.windowd:9100", "0.0.0.0:9100", "windowd-0.windowd:9100"},
	} {
		if got := advertised(c.advertise, c.listen, ifaces); got != c.want {
			t.Errorf("advertise %q, listening on %s: %s, want %s", c.advertise, c.listen, got, c.want)
		}
	}
}

// TestQueryScanPages: a scan in pages visits every key with windows in
// [from, to) once, in order, whatever ends its pages: the limit, the
// windows an answer may carry, or the keys a partition's scan may read.
// A key with more windows than an answer may carry is refused.
func TestQueryScanPages(t *testing.T) {
	p := queryPipeline(t)
	defer func(w, k int) { maxAnswerWindows, maxScanKeys = w, k }(maxAnswerWindows, maxScanKeys)
	maxAnswerWindows, maxScanKeys = 20, 50
	p.mu.Lock()
	var want []string
	for i := range 1000 {
		key := fmt.Sprintf("k%04d", i)
		hours := 1
		if i%3 == 0 {
			hours = 3 // three windows
		}
		for h := range hours {
			p.recordLocked(t, key, int64(h)*3600_000+int64(i))
		}
		if i%10 == 0 {
			p.recordLocked(t, key, 100*3600_000) // a window in [from, to)
			want = append(want, key)
		}
	}
	p.testCheckpointLocked(t)
	p.mu.Unlock()
	ctx := context.Background()
	scan := func(limit int, from, to int64) (got []string, pages int) {
		req := &queryRequest{pipeline: "q", scan: true, prefix: "k", limit: limit, from: from, to: to, forwarded: true}
		for pages = 1; pages < 10_000; pages++ {
			a, _, err := p.query(ctx, nil, req)
			if err != nil {
				t.Fatal(err)
			}
			windows := 0
			for _, k := range a.Keys {
				got = append(got, k.Key)
				windows += len(k.Windows)
			}
			if len(a.Keys) > limit || len(a.Keys) > 1 && windows > maxAnswerWindows {
				t.Fatalf("page of %d keys, %d windows", len(a.Keys), windows)
			}
			if a.Next == nil {
				return got, pages
			}
			b, _ := base64.RawURLEncoding.DecodeString(*a.Next)
			req.after = string(b)
		}
		t.Fatal("the scan does not end")
		return nil, 0
	}
	// Every key, pages cut by the windows (keys of 1 and 3 windows).
	got, pages := scan(15, -1<<62, 1<<62)
	if len(got) != 1000 || !slices.IsSorted(got) || len(slices.Compact(slices.Clone(got))) != 1000 {
		t.Fatalf("scan of every key: %d keys (sorted %v)", len(got), slices.IsSorted(got))
	}
	t.Logf("every key: %d pages", pages)
	// One key in ten, pages cut by the keys a partition may read.
	got, pages = scan(100, 99*3600_000, 101*3600_000)
	if !slices.Equal(got, want) {
		t.Fatalf("scan of [from, to): %d keys, want %d", len(got), len(want))
	}
	t.Logf("one key in ten: %d pages", pages)
	// A key beyond what an answer may carry.
	p.mu.Lock()
	for h := range 25 {
		p.recordLocked(t, "big", int64(h)*3600_000)
	}
	p.testCheckpointLocked(t)
	p.mu.Unlock()
	_, _, err := p.query(ctx, nil, &queryRequest{pipeline: "q", key: "big", from: -1 << 62, to: 1 << 62, forwarded: true})
	var qe *queryError
	if !errors.As(err, &qe) || qe.status != http.StatusBadRequest {
		t.Fatalf("a key of 25 windows with at most 20 per answer: %v", err)
	}
}

// BenchmarkQueryPoint: a point query through the HTTP handler on a
// pipeline with 200k open windows (one per key), per query.
func BenchmarkQueryPoint(b *testing.B) {
	p := queryPipeline(b)
	const keys = 200_000
	p.mu.Lock()
	for i := range keys {
		p.recordLocked(b, fmt.Sprintf("key-%06d", i), int64(i))
	}
	p.testCheckpointLocked(b)
	p.mu.Unlock()
	st := &status{now: time.Now, configured: map[string]bool{"q": true}}
	st.add(p)
	mux := http.NewServeMux()
	mountQueryAPI(mux, st, p.m)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	client := srv.Client()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		resp, err := client.Get(srv.URL + "/api/windows?pipeline=q&key=" + url.QueryEscape(fmt.Sprintf("key-%06d", i*7919%keys)))
		if err != nil || resp.StatusCode != 200 {
			b.Fatal(err, resp.StatusCode)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		i++
	}
}
