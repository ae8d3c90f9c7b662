package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/windowd/windowd/kafka"
	"github.com/windowd/windowd/sink"
)

// TestRetentionGuard (docs/OPERATIONS.md, Topic retention): a backfill of
// 2025 data into output topics that keep records for an hour. Pipeline
// "ev" stamps panes with their window's end, as by default: every pane is
// counted in windowd_records_past_retention_total and warned about, naming
// the topic and the setting, and the broker's retention check (every 5 s on
// the test brokers, scripts/kafka/server.properties.template) deletes them.
// Pipeline "em" reads the same records with output.timestamp: emit_time:
// nothing is counted or warned about, and after that retention check every
// pane is still there. The dead-letter topics windowd created keep records
// of any age.
func TestRetentionGuard(t *testing.T) {
	if os.Getenv("WINDOWD_KAFKA_BROKERS") == "" {
		t.Skip("needs a real broker (WINDOWD_KAFKA_BROKERS): the broker's retention check")
	}
	parallel(t, 25*time.Second)
	windowdBinary(t)
	in, evOut, emOut := uniqueName(t, "in"), uniqueName(t, "ev-out"), uniqueName(t, "em-out")
	createTopic(t, in, 1)
	adm := kadm.NewClient(newClient(t))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, topic := range []string{evOut, emOut} {
		// An hour's retention; a new segment for every batch a second
		// (of record time) after the segment's first, so that panes
		// written in different commit cycles are in different segments
		// and all but the last can be deleted.
		resp, err := adm.CreateTopic(ctx, 1, -1, map[string]*string{
			sink.SettingRetention: kadm.StringPtr("3600000"), "segment.ms": kadm.StringPtr("1000")}, topic)
		if err == nil {
			err = resp.Err
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	dlqs := map[string]string{"ev": uniqueName(t, "ev-dlq"), "em": uniqueName(t, "em-dlq")}
	pipeline := func(name, out, extra string) string {
		return fmt.Sprintf(`  - name: %s
    input: {topic: %s, group: %s}
    key: {field: user}
    timestamp: {field: ts}
    watermark: {max_delay: 0s}
    window: {type: tumbling, size: 1m}
    allowed_lateness: 0s
    aggregates: [{name: n, op: count}]
    output: {topic: %s%s}
    dead_letter_topic: %s
    commit_interval: 100ms
`, name, in, uniqueName(t, name), out, extra, dlqs[name])
	}
	e := &env{t: t, cfgPath: filepath.Join(t.TempDir(), "windowd.yaml")}
	writeFile(t, e.cfgPath, fmt.Sprintf("kafka:\n  brokers: [%s]\nstate: {dir: %s}\nhttp: {listen: 127.0.0.1:0}\npipelines:\n",
		strings.Join(quoteAll(brokers), ", "), filepath.Join(t.TempDir(), "state"))+
		pipeline("ev", evOut, "")+pipeline("em", emOut, ", timestamp: emit_time"))
	inst := e.spawn(nil)
	logTroubles(t, map[*instance]string{inst: "windowd"})
	inst.waitListening(t)

	// 2025-03-01: five chunks of four minutes, 15 records a minute; each
	// chunk closes the windows before it (the last window stays open).
	start := time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	const chunks, perChunk = 5, 60
	panes := func(pipeline string) int {
		v, _ := inst.metric(t, "windowd_panes_total", "pipeline", pipeline)
		return int(v)
	}
	for c := 0; c < chunks; c++ {
		var recs []input
		for i := c * perChunk; i < (c+1)*perChunk; i++ {
			recs = append(recs, input{key: "u", value: fmt.Sprintf(`{"user":"u","ts":%d}`, start+int64(i)*4000)})
		}
		produce(t, in, recs)
		want := 4*(c+1) - 1
		waitFor(t, fmt.Sprintf("%d panes of each pipeline", want), 60*time.Second, func() bool {
			return panes("ev") >= want && panes("em") >= want
		})
	}
	const written = 4*chunks - 1

	past := func(pipeline, topic string) int {
		v, _ := inst.metric(t, "windowd_records_past_retention_total", "pipeline", pipeline, "topic", topic, "setting", sink.SettingRetention)
		return int(v)
	}
	if got := past("ev", evOut); got != written {
		t.Errorf("ev: %d records counted past retention.ms, want its %d panes", got, written)
	}
	if got := past("em", emOut); got != 0 {
		t.Errorf("em (emit_time): %d records counted past retention.ms, want 0", got)
	}
	log := inst.stderr.String()
	warned := func(topic string) bool {
		for _, l := range strings.Split(log, "\n") {
			if strings.Contains(l, "writing a record older than the topic keeps") && strings.Contains(l, `"topic":"`+topic+`"`) &&
				strings.Contains(l, `"setting":"retention.ms=3600000"`) && strings.Contains(l, "output.timestamp: emit_time") {
				return true
			}
		}
		return false
	}
	if !warned(evOut) {
		t.Errorf("no warning naming %s and retention.ms; log:\n%s", evOut, log)
	}
	if warned(emOut) {
		t.Errorf("a warning names %s, whose panes carry their emission time", emOut)
	}

	// The broker's retention check deletes ev's old panes (all but its
	// active segment): the danger is real on this broker...
	waitFor(t, "the broker's retention check to delete "+evOut+"'s panes", 60*time.Second, func() bool {
		so, err := adm.ListStartOffsets(ctx, evOut)
		if err != nil {
			return false
		}
		o, _ := so.Lookup(evOut, 0)
		return o.Offset > 0
	})
	// ...and em's panes, written by the same pipeline definition at the
	// same time, are all still there after it ran.
	so, err := adm.ListStartOffsets(ctx, emOut)
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := so.Lookup(emOut, 0); o.Offset != 0 {
		t.Fatalf("%s starts at offset %d after the retention check: emit_time panes were deleted", emOut, o.Offset)
	}
	r := e.reader(emOut)
	r.readUntil(t, "every em pane", 30*time.Second, func(got []outRecord) bool { return len(got) >= written })
	r.poll(time.Second)
	if len(r.got) != written {
		t.Fatalf("%s holds %d records, want %d panes", emOut, len(r.got), written)
	}
	for i, rec := range r.got {
		wantStart := start + int64(i)*60000
		if n := gjson.Get(rec.value, "aggregates.n").Int(); n != 15 || gjson.Get(rec.value, "window.start").Int() != wantStart {
			t.Fatalf("pane %d: %s, want window [%d, +1m) with n=15", i, rec.value, wantStart)
		}
	}

	// The dead-letter topics windowd created keep records of any age.
	limits, err := kafka.TimeLimitsOf(ctx, adm, dlqs["ev"], dlqs["em"])
	if err != nil {
		t.Fatal(err)
	}
	for _, topic := range dlqs {
		if l, ok := limits[topic]; !ok || l.Retention != -1 || l.Bounded() {
			t.Errorf("dead-letter topic %s created by windowd: %+v (described: %v), want retention.ms=-1", topic, l, ok)
		}
	}
}
