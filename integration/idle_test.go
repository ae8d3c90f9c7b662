package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/windowd/windowd/config"
)

// idleStream: both partitions carry data up to ~20 s of event time, then
// only partition 0 goes on to ~60 s. Partition 1 is silent (and caught up).
func idleStream() []input {
	var recs []input
	for i := 0; i < 100; i++ {
		ts := base + int64(i)*200
		for p := int32(0); p < 2; p++ {
			u := fmt.Sprintf("u%d", p)
			recs = append(recs, input{partition: p, key: u, value: fmt.Sprintf(`{"user":%q,"ts":%d,"x":1}`, u, ts)})
		}
	}
	for i := 100; i < 300; i++ {
		ts := base + int64(i)*200
		recs = append(recs, input{partition: 0, key: "u0", value: fmt.Sprintf(`{"user":"u0","ts":%d,"x":1}`, ts)})
	}
	return recs
}

// finalWindowsOf lists the windows [start,end) of key that have a final pane.
func finalWindowsOf(recs []outRecord, key string) map[string]bool {
	out := map[string]bool{}
	for _, r := range recs {
		v := gjson.Parse(r.value)
		if v.Get("key").Str == key && v.Get("pane.final").Bool() {
			out[fmt.Sprintf("[%d,%d)", v.Get("window.start").Int()-base, v.Get("window.end").Int()-base)] = true
		}
	}
	return out
}

// TestIdlePartition: one partition stops receiving data. With idle_timeout
// the windows of the other still close; without it they wait, and /metrics
// shows the silent partition holding the frontier.
func TestIdlePartition(t *testing.T) {
	parallel(t, 5*time.Second)
	recs := idleStream()
	// Windows of u0 that end at or before the last watermark of p0 (59800-2000):
	// [0,10000) .. [40000,50000); with allowed_lateness 30s they are final once
	// the frontier passes end+30s, i.e. [0,10000) and [10000,20000).
	withIdleTimeout := func(t *testing.T, repartition bool) {
		e := newEnv(t, 2, ", idle_timeout: 2s")
		if repartition {
			// Stage 1 judges p1 idle and says so in its markers; the
			// internal partitions themselves are never idle.
			e.cfg.Pipelines[0].Repartition = &config.Repartition{WatermarkInterval: config.DefaultWatermarkInterval}
		}
		inst := e.startInProcess()
		produce(t, e.in, recs)
		inst.waitRecordsIn(t, len(recs))
		out := e.reader(e.out)
		out.readUntil(t, "u0's windows to close while p1 is idle", 30*time.Second, func(got []outRecord) bool {
			return finalWindowsOf(got, "u0")["[10000,20000)"]
		})
		if !repartition {
			waitFor(t, "p1 idle in /metrics", 10*time.Second, func() bool {
				v, ok := inst.metric(t, "windowd_partition_idle", "partition", "1")
				return ok && v == 1
			})
		}
		waitFor(t, "the frontier at p0's watermark", 10*time.Second, func() bool {
			v, _ := inst.metric(t, "windowd_frontier_ms")
			return int64(v) == base+59800-2000
		})
		if err := inst.stop(); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("with idle_timeout", func(t *testing.T) { t.Parallel(); withIdleTimeout(t, false) })
	t.Run("with idle_timeout, repartitioned", func(t *testing.T) { t.Parallel(); withIdleTimeout(t, true) })
	t.Run("without idle_timeout", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, 2, "")
		inst := e.startInProcess()
		produce(t, e.in, recs)
		inst.waitRecordsIn(t, len(recs))
		// p1's watermark is 19800-2000 = 17800: nothing ending after that closes.
		waitFor(t, "p1 holding the frontier in /metrics", 10*time.Second, func() bool {
			h1, ok1 := inst.metric(t, "windowd_partition_holds_frontier", "partition", "1")
			h0, ok0 := inst.metric(t, "windowd_partition_holds_frontier", "partition", "0")
			return ok1 && ok0 && h1 == 1 && h0 == 0
		})
		time.Sleep(3 * time.Second) // longer than an idle timeout would have been
		if v, _ := inst.metric(t, "windowd_frontier_ms"); int64(v) != base+17800 {
			t.Fatalf("frontier = %d, want p1's watermark 17800", int64(v)-base)
		}
		if v, _ := inst.metric(t, "windowd_partition_idle", "partition", "1"); v != 0 {
			t.Fatal("p1 idle without idle_timeout")
		}
		out := e.reader(e.out)
		out.poll(time.Second)
		for _, r := range out.got {
			v := gjson.Parse(r.value)
			if v.Get("window.end").Int() > base+17800 && v.Get("pane.timing").Str != "EARLY" {
				t.Fatalf("window closed although p1 holds the frontier: %s", r.value)
			}
		}
		if !strings.Contains(fmt.Sprint(finalWindowsOf(out.got, "u0")), "[") && len(out.got) == 0 {
			t.Fatal("no output at all")
		}
		if err := inst.stop(); err != nil {
			t.Fatal(err)
		}
	})
}
