package integration

import (
	"context"
	"fmt"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tidwall/gjson"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/windowd/windowd/config"
	"github.com/windowd/windowd/repartition"
)

// Repartitioning (docs/SEMANTICS.md, Repartitioning). The input of these
// tests is keyed (Kafka key) by order id, so the records of one user sit on
// every input partition, while the pipeline groups by `user` (key.field). In
// `run`, window state follows input partitions (docs/SEMANTICS.md, State
// follows partitions): without repartitioning each input partition holds its
// own, partial, window of a user, and each fires its own "final" pane.
// `repartition: true` re-keys the records by user through the internal topic
// <group>-<pipeline>-repartition (stage 1) and windows that topic (stage 2),
// whose watermark is the minimum over the upstream (input) partitions of
// their last watermark marker.

// repartitionYAML is the pipeline of TestRepartitionSlowUpstream: tumbling
// 10s windows, a small max_delay and a LONG idle_timeout, so that an input
// partition that falls behind is slow (it holds the frontier), not idle.
// allowed_lateness 0 and no early or late trigger: every window emits
// exactly one pane, ON_TIME and final, once the frontier passes its end;
// a window that fired before all its records arrived would drop the rest
// (late topic) and show a count below replay's. The last %s is the
// pipeline's tail: the repartition settings, or nothing.
const repartitionYAML = `kafka:
  brokers: [%s]
  session_timeout: 6s
state:
  dir: %s
http:
  listen: 127.0.0.1:0
shutdown_grace: 20s
pipelines:
  - name: p
    input: {topic: %s, group: %s}
    key: {field: user}
    timestamp: {field: ts}
    watermark: {strategy: bounded_out_of_orderness, max_delay: 1s, idle_timeout: 60s}
    window: {type: tumbling, size: 10s}
    allowed_lateness: 0s
    trigger: {on_time: true}
    aggregates:
      - {name: n, op: count}
      - {name: total, op: sum, field: x}
    output: {topic: %s}
    late_topic: %s
    dead_letter_topic: %s
    commit_interval: 200ms
    delivery: at_least_once
%s`

const repartitionTail = "    repartition: true\n    watermark_interval: 200ms\n"

// newRepartitionEnv creates the input topic (prefix tells two envs of one
// test apart) and writes the config with write, which is also used for
// further members (repartitionMember).
func newRepartitionEnv(t *testing.T, prefix string, partitions int32, write func(e *env, stateDir string) string) *env {
	t.Helper()
	e := &env{t: t, in: uniqueName(t, prefix+"in"), out: uniqueName(t, prefix+"out"), late: uniqueName(t, prefix+"late"),
		dlq: uniqueName(t, prefix+"dlq"), group: uniqueName(t, prefix+"g"), partitions: partitions, delivery: "at_least_once"}
	createTopic(t, e.in, partitions)
	e.stateDir = filepath.Join(t.TempDir(), prefix+"state")
	e.cfgPath = write(e, e.stateDir)
	cfg, err := config.Load(e.cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	e.cfg = cfg
	return e
}

func writeRepartitionYAML(tail string) func(e *env, stateDir string) string {
	return func(e *env, stateDir string) string {
		path := filepath.Join(e.t.TempDir(), "windowd.yaml")
		writeFile(e.t, path, fmt.Sprintf(repartitionYAML, strings.Join(quoteAll(brokers), ", "), stateDir,
			e.in, e.group, e.out, e.late, e.dlq, tail))
		return path
	}
}

// repartitionTopic is the internal topic of pipeline "p" (docs/SEMANTICS.md,
// Repartitioning).
func (e *env) repartitionTopic() string { return e.group + "-p-repartition" }

// sample is one Prometheus sample.
type sample struct {
	labels map[string]string
	value  float64
}

var (
	sampleLineRE = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)`)
	labelRE      = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)
)

// samples scrapes every sample of the metric name whose labels include the
// given pairs (nil when the instance does not answer).
func (inst *instance) samples(name string, labels ...string) []sample {
	body, err := httpGetQuiet("http://" + inst.httpAddr + "/metrics")
	if err != nil {
		return nil
	}
	var out []sample
	for _, l := range strings.Split(body, "\n") {
		m := sampleLineRE.FindStringSubmatch(l)
		if m == nil || m[1] != name {
			continue
		}
		s := sample{labels: map[string]string{}}
		for _, kv := range labelRE.FindAllStringSubmatch(m[2], -1) {
			s.labels[kv[1]] = kv[2]
		}
		ok := true
		for i := 0; i+1 < len(labels); i += 2 {
			if s.labels[labels[i]] != labels[i+1] {
				ok = false
			}
		}
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(m[3], 64)
		if err != nil {
			continue
		}
		s.value = v
		out = append(out, s)
	}
	return out
}

// upstreamWatermarks scrapes windowd_upstream_watermark_ms: per upstream
// (input) partition, the smallest and largest sample (a metric with one
// sample per upstream has min == max). NaN samples are left out.
func (inst *instance) upstreamWatermarks() (lo, hi map[int32]float64) {
	lo, hi = map[int32]float64{}, map[int32]float64{}
	for _, s := range inst.samples("windowd_upstream_watermark_ms", "pipeline", "p") {
		u, err := strconv.Atoi(s.labels["upstream"])
		if err != nil || math.IsNaN(s.value) {
			continue
		}
		p := int32(u)
		if v, ok := lo[p]; !ok || s.value < v {
			lo[p] = s.value
		}
		if v, ok := hi[p]; !ok || s.value > v {
			hi[p] = s.value
		}
	}
	return lo, hi
}

func fmtWatermarks(m map[int32]float64) string {
	var ps []int
	for p := range m {
		ps = append(ps, int(p))
	}
	sort.Ints(ps)
	var parts []string
	for _, p := range ps {
		parts = append(parts, fmt.Sprintf("%d:%+.1fs", p, (m[int32(p)]-float64(base))/1000))
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// eventually polls cond until it holds (true) or timeout passes (false).
func eventually(timeout time.Duration, cond func() bool) bool {
	for deadline := time.Now().Add(timeout); ; time.Sleep(100 * time.Millisecond) {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

// orderValue is an input record: an order of a user.
func orderValue(order, user string, ts int64, x int) string {
	return fmt.Sprintf(`{"order":%q,"user":%q,"ts":%d,"x":%d}`, order, user, ts, x)
}

// slowUpstreamStream is the stream of TestRepartitionSlowUpstream: 8
// partitions, 180 records each, record i of partition p at event time
// base + 250ms·i + up to 300ms of disorder (within max_delay 1s), order id
// o<8i+p> (the Kafka key) and one of 6 users at random, so every user has
// records on every partition in every window. Phase A is records 0..45 of
// every partition (up to +11.6s: partition 7's watermark passes 10s, so
// window [0,10s) can close); phase B records 46..179 of partitions 0..6
// (up to +45s); phase C records 46..179 of partition 7: held back.
func slowUpstreamStream() (a, b, c []input) {
	rng := rand.New(rand.NewSource(20240613))
	const perPart, split, users = 180, 46, 6
	for i := 0; i < perPart; i++ {
		for p := int32(0); p < 8; p++ {
			ts := base + int64(i)*250 + rng.Int63n(300)
			order := fmt.Sprintf("o%d", i*8+int(p))
			rec := input{partition: p, key: order, value: orderValue(order, fmt.Sprintf("u%d", rng.Intn(users)), ts, rng.Intn(100))}
			switch {
			case i < split:
				a = append(a, rec)
			case p < 7:
				b = append(b, rec)
			default:
				c = append(c, rec)
			}
		}
	}
	return a, b, c
}

// agg is a window's count and sum.
type agg struct {
	n     int64
	total float64
}

// directFinals computes, without windowd, the final count and sum of x of
// every (user, 10s window) of recs (flush records left out): the answer a
// correct pipeline gives whatever the partitioning.
func directFinals(recs []input, keep func(input) bool) map[string]agg {
	out := map[string]agg{}
	for _, r := range recs {
		v := gjson.Parse(r.value)
		user := v.Get("user").Str
		if strings.HasPrefix(user, "flush") || (keep != nil && !keep(r)) {
			continue
		}
		ts := v.Get("ts").Int()
		start := ts - ((ts%10_000)+10_000)%10_000
		id := fmt.Sprintf("%s/%d/%d", user, start, start+10_000)
		a := out[id]
		a.n++
		a.total += v.Get("x").Float()
		out[id] = a
	}
	return out
}

// maxTS returns partition p's largest event time in recs.
func maxTS(recs []input, p int32) int64 {
	m := int64(math.MinInt64)
	for _, r := range recs {
		if r.partition == p {
			m = max(m, gjson.Get(r.value, "ts").Int())
		}
	}
	return m
}

// TestRepartitionSlowUpstream (docs/SEMANTICS.md, Repartitioning and
// Frontier): one input partition (7) falls behind — its records for the
// windows from +10s on are produced 7+ s of wall time after the other
// partitions' — while a user's records sit on every partition (the input is
// keyed by order id) and windows are grouped by user.
//
// With repartition: true the frontier of every repartition partition is
// held by partition 7's markers (slow, not idle: idle_timeout 60s), so
// (a) window [0,10s), which partition 7's watermark has passed, closes
// during the hold, and no pane of a later window is emitted before
// partition 7's records are produced; (b) every final pane equals replay
// (with the same config) of all records, which the windows can only reach
// by waiting for partition 7; (c) every (user, window) has exactly one
// final pane (a repeat must be byte-identical). windowd_upstream_watermark_ms
// shows upstream 7 at its watermark during the hold and
// windowd_repartition_markers_total counts markers.
//
// The same records through the same pipeline WITHOUT repartition (its own
// topics and group, run alongside) show why the feature exists: state
// follows input partitions, so each input partition windows its own share
// of a user's records and fires its own "final" pane for the same
// (user, window) — several different final panes, none with replay's
// totals — and windowd counts and logs the keys it saw on two partitions.
func TestRepartitionSlowUpstream(t *testing.T) {
	parallel(t, 18*time.Second)
	if os.Getenv("WINDOWD_KAFKA_BROKERS") == "" {
		t.Skip("needs a real broker (WINDOWD_KAFKA_BROKERS): windowd processes, an internal repartition topic")
	}
	windowdBinary(t) // build before the clock matters
	began := time.Now()
	at := func(format string, args ...any) {
		t.Logf("%5.1fs  %s", time.Since(began).Seconds(), fmt.Sprintf(format, args...))
	}
	rep := newRepartitionEnv(t, "rep-", 8, writeRepartitionYAML(repartitionTail))
	if r := rep.cfg.Pipelines[0].Repartition; r == nil || r.WatermarkInterval != 200 {
		t.Fatalf("config: repartition %+v, want on with watermark_interval 200ms", r)
	}
	plain := newRepartitionEnv(t, "plain-", 8, writeRepartitionYAML(""))
	if plain.cfg.Pipelines[0].Repartition != nil {
		t.Fatal("config without repartition: true has Repartition set")
	}
	phaseA, phaseB, phaseC := slowUpstreamStream()
	flush := flushRecords(8)
	all := append(append(append(append([]input(nil), phaseA...), phaseB...), phaseC...), flush...)

	// What the answer is, with and without partition 7's held-back records.
	direct := directFinals(all, nil)
	held := map[string]bool{}
	for _, r := range phaseC {
		held[r.key] = true
	}
	without7 := directFinals(all, func(r input) bool { return !held[r.key] })
	needs7 := 0
	for w, a := range direct {
		if without7[w] != a {
			needs7++
		}
	}
	if needs7 < 10 {
		t.Fatalf("test stream: only %d of %d windows depend on partition 7's held-back records", needs7, len(direct))
	}
	// Replay with repartition, replay without it and the direct answer agree.
	want := replayFinals(t, rep, all)
	wantPlain := replayFinals(t, plain, all)
	var replayDiff []string
	for w, d := range direct {
		v := gjson.Parse(want[w])
		if !v.Exists() || v.Get("n").Int() != d.n || v.Get("total").Float() != d.total {
			replayDiff = append(replayDiff, fmt.Sprintf("%s: replay (repartition) %s, direct count %d sum %g", w, want[w], d.n, d.total))
		}
		if want[w] != wantPlain[w] {
			replayDiff = append(replayDiff, fmt.Sprintf("%s: replay with repartition %s, without %s", w, want[w], wantPlain[w]))
		}
	}
	if len(want) != len(direct) || len(wantPlain) != len(direct) || len(replayDiff) > 0 {
		sort.Strings(replayDiff)
		t.Fatalf("replay disagrees with the direct computation (%d windows; replay %d, replay without repartition %d):\n%s",
			len(direct), len(want), len(wantPlain), strings.Join(replayDiff[:min(len(replayDiff), 10)], "\n"))
	}
	var first []string // windows [0,10s): they close during the hold
	for w := range want {
		if strings.HasSuffix(w, fmt.Sprintf("/%d/%d", base, base+10_000)) {
			first = append(first, w)
		}
	}
	at("stream: %d records (phase A %d, B %d, held-back C %d, flush %d); %d windows, %d of them depend on partition 7's held-back records, %d in [0,10s)",
		len(all), len(phaseA), len(phaseB), len(phaseC), len(flush), len(want), needs7, len(first))

	instRep := rep.spawn(nil)
	instPlain := plain.spawn(nil)
	names := map[*instance]string{instRep: "repartition", instPlain: "plain"}
	logTroubles(t, names)
	instRep.waitListening(t)
	instPlain.waitListening(t)
	at("both instances listening")

	outRep, outPlain := rep.reader(rep.out), plain.reader(plain.out)
	produce(t, rep.in, phaseA)
	produce(t, plain.in, phaseA)
	produce(t, rep.in, phaseB)
	produce(t, plain.in, phaseB)
	holdStart := time.Now()
	at("produced phases A and B; holding back partition 7's records from +11.5s on")

	// The hold: at least 7s, and until the repartitioned pipeline has caught
	// up with phase B (its upstream watermarks 0..6 show phase B) and
	// closed window [0,10s) — at most 30s.
	wm7 := float64(maxTS(phaseA, 7) - 1000) // partition 7's watermark: max_ts - max_delay
	wmB := map[int32]float64{}
	for p := int32(0); p < 7; p++ {
		wmB[p] = float64(maxTS(phaseB, p) - 1000)
	}
	finalsOf := func(got []outRecord) map[string]int {
		f := map[string]int{}
		for _, r := range got {
			if r.headers["final"] == "true" {
				f[windowID(gjson.Parse(r.value))]++
			}
		}
		return f
	}
	caughtUp := func() bool {
		lo, _ := instRep.upstreamWatermarks()
		for p, w := range wmB {
			if v, ok := lo[p]; !ok || v < w {
				return false
			}
		}
		return true
	}
	firstClosed := func() bool {
		f := finalsOf(outRep.got)
		for _, w := range first {
			if f[w] == 0 {
				return false
			}
		}
		return true
	}
	var problems []string
	// The marker rate, from the first marker on.
	var markersStart float64
	var markersSince time.Time
	for {
		outRep.poll(200 * time.Millisecond)
		if markersSince.IsZero() {
			if v, _ := instRep.metric(t, "windowd_repartition_markers_total", "pipeline", "p"); v > 0 {
				markersStart, markersSince = v, time.Now()
			}
		}
		waited := time.Since(holdStart)
		// The rate needs a few seconds of markers: under load stage 1
		// may join its group late in the hold.
		ratedFor := !markersSince.IsZero() && time.Since(markersSince) >= 4*time.Second
		if waited >= 30*time.Second || (waited >= 7*time.Second && ratedFor && caughtUp() && firstClosed()) {
			break
		}
	}
	lo, hi := instRep.upstreamWatermarks()
	markersHold, _ := instRep.metric(t, "windowd_repartition_markers_total", "pipeline", "p")
	// Every upstream sends a marker to each of the 8 repartition partitions
	// at least every watermark_interval (200ms): 8·8 records a broadcast,
	// about 5 broadcasts a second while nothing else moves a watermark.
	markersFor := time.Since(markersSince)
	broadcasts := (markersHold - markersStart) / 64 / markersFor.Seconds()
	at("hold over after %.1fs: upstream watermarks %s (max %s), upstream 7 expected %+.1fs; %.0f markers written, %.0f in the last %.1fs (%.2f broadcasts per upstream and second)",
		time.Since(holdStart).Seconds(), fmtWatermarks(lo), fmtWatermarks(hi), (wm7-float64(base))/1000, markersHold, markersHold-markersStart, markersFor.Seconds(), broadcasts)
	gaps, gapErr := markerGaps(t, rep.repartitionTopic(), holdStart, time.Now())
	at("marker gaps during the hold (repartition partition 0, by upstream): %s (%v)", gapStats(gaps), gapErr)
	// Lenient (CI machines are slow, and stage 1 writes its markers from
	// the loop that also commits): one broadcast a second, 5 intervals.
	if markersSince.IsZero() || markersFor < 3*time.Second || broadcasts < 1 {
		problems = append(problems, fmt.Sprintf("markers: %.2f broadcasts per upstream and second over %.1fs of the hold, want about 5 (watermark_interval 200ms), at least 1; gaps between markers: %s",
			broadcasts, markersFor.Seconds(), gapStats(gaps)))
	} else if broadcasts < 3 {
		t.Logf("NOTE: markers came slowly: %.2f broadcasts per upstream and second, want about 5 (watermark_interval 200ms)", broadcasts)
	}
	// (a) no pane of a window from +10s on before partition 7's records.
	beforeRelease := len(outRep.got)
	var early []string
	for _, r := range outRep.got[:beforeRelease] {
		if v := gjson.Parse(r.value); v.Get("window.start").Int() >= base+10_000 && !strings.HasPrefix(r.key, "flush") {
			early = append(early, r.value)
		}
	}
	if len(early) > 0 {
		problems = append(problems, fmt.Sprintf("%d panes of windows from +10s on were emitted while partition 7 was held back (its watermark is %+.1fs), e.g.\n  %s",
			len(early), (wm7-float64(base))/1000, strings.Join(early[:min(len(early), 5)], "\n  ")))
	}
	if !firstClosed() {
		f := finalsOf(outRep.got)
		var open []string
		for _, w := range first {
			if f[w] == 0 {
				open = append(open, w)
			}
		}
		sort.Strings(open)
		problems = append(problems, fmt.Sprintf("windows [0,10s) without a final pane during the hold, though every upstream watermark had passed +10s: %v", open))
	}
	if !caughtUp() {
		problems = append(problems, fmt.Sprintf("stage 2 did not see phase B's watermarks of upstreams 0..6 within 30s: upstream watermarks %s, want at least %s",
			fmtWatermarks(lo), fmtWatermarks(wmB)))
	}
	// The marker metrics: upstream 7's last marker is its watermark, held at
	// phase A (it has had no record for the whole hold).
	if v, ok := lo[7]; !ok || v != wm7 || hi[7] != wm7 {
		problems = append(problems, fmt.Sprintf("windowd_upstream_watermark_ms{upstream=\"7\"} during the hold: min %v max %v (present %v), want %.0f (partition 7's watermark, %+.1fs)",
			lo[7], hi[7], ok, wm7, (wm7-float64(base))/1000))
	}
	if markersHold <= 0 {
		problems = append(problems, fmt.Sprintf("windowd_repartition_markers_total{pipeline=\"p\"} = %v after a %.0fs hold, want > 0", markersHold, time.Since(holdStart).Seconds()))
	}

	// Release partition 7, then the flush tail.
	released := time.Now()
	produce(t, rep.in, phaseC)
	produce(t, plain.in, phaseC)
	produce(t, rep.in, flush)
	produce(t, plain.in, flush)
	at("released partition 7's %d records after %.1fs, then the flush records", len(phaseC), released.Sub(holdStart).Seconds())
	rep.waitCommitted(t, 40*time.Second)
	plain.waitCommitted(t, 40*time.Second)
	at("both groups committed the whole input")
	readFinals(outRep, want, 30*time.Second)
	readFinals(outPlain, wantPlain, 30*time.Second)
	at("read %d pane records (repartition), %d (plain)", len(outRep.got), len(outPlain.got))

	// Metrics after the flush: upstream 7's marker follows its flush record.
	flushWM := float64(base + 3600_000 - 1000)
	if !eventually(20*time.Second, func() bool {
		lo, _ := instRep.upstreamWatermarks()
		for p := int32(0); p < 8; p++ {
			if lo[p] != flushWM {
				return false
			}
		}
		return true
	}) {
		lo, hi := instRep.upstreamWatermarks()
		problems = append(problems, fmt.Sprintf("windowd_upstream_watermark_ms after the flush: min %s max %s, want every upstream at %+.1fs",
			fmtWatermarks(lo), fmtWatermarks(hi), (flushWM-float64(base))/1000))
	}
	markers, _ := instRep.metric(t, "windowd_repartition_markers_total", "pipeline", "p")
	if markers <= markersHold {
		problems = append(problems, fmt.Sprintf("windowd_repartition_markers_total did not grow after the hold: %v, then %v", markersHold, markers))
	}
	var lags []string
	for _, s := range instRep.samples("windowd_marker_lag_ms", "pipeline", "p") {
		lags = append(lags, fmt.Sprintf("%s=%.0f", s.labels["upstream"], s.value))
	}
	if len(lags) == 0 {
		problems = append(problems, "no windowd_marker_lag_ms{pipeline=\"p\"} sample")
	}
	at("after the flush: %.0f markers written; marker lag ms by upstream %v", markers, lags)

	// The plain pipeline: windowd saw every user on several partitions.
	eventually(15*time.Second, func() bool {
		v, _ := instPlain.metric(t, "windowd_split_keys_total", "pipeline", "p")
		return v > 0
	})
	splitKeys, splitFound := instPlain.metric(t, "windowd_split_keys_total", "pipeline", "p")
	if splitKeys <= 0 {
		problems = append(problems, fmt.Sprintf("without repartition, windowd_split_keys_total{pipeline=\"p\"} = %v (present %v), want > 0: every user has records on all 8 input partitions", splitKeys, splitFound))
	}
	if !strings.Contains(instPlain.stderr.String(), "key seen on two input partitions") {
		problems = append(problems, `without repartition, windowd did not log "key seen on two input partitions"`)
	}
	// A repartitioned pipeline has nothing to warn about: the keys it sees
	// on several input partitions are what it repartitions.
	if strings.Contains(instRep.stderr.String(), "key seen on two input partitions") {
		problems = append(problems, `with repartition: true, windowd still logs "key seen on two input partitions"`)
	}

	for inst, name := range names {
		if err := inst.signal(t, syscall.SIGTERM); err != nil {
			problems = append(problems, fmt.Sprintf("instance %s after SIGTERM: %v\n%s", name, err, stderrTail(inst, 20)))
		}
	}
	outRep.poll(time.Second)
	outPlain.poll(time.Second)
	lateRep, latePlain := rep.reader(rep.late), plain.reader(plain.late)
	lateRep.poll(time.Second)
	latePlain.poll(time.Second)

	// (b), (c): the repartitioned output is replay's, one final pane per window.
	res := checkDelivery(rep, want, outRep.got, lateRep.got, false)
	problems = append(problems, res.problems...)
	t.Logf("repartition: %d input records, %d windows in replay; output: %d pane records, %d distinct pane ids, %d duplicates",
		len(all), len(want), res.records, res.distinct, res.dups)

	// Without repartition: several different final panes for one
	// (user, window), none of them with the user's totals. This is why
	// `repartition: true` exists: a key that is not the record key sits on
	// several input partitions, and state follows input partitions.
	distinct := map[string]map[string]bool{}
	for _, r := range outPlain.got {
		if r.headers["final"] != "true" || strings.HasPrefix(r.key, "flush") {
			continue
		}
		w := windowID(gjson.Parse(r.value))
		if distinct[w] == nil {
			distinct[w] = map[string]bool{}
		}
		distinct[w][gjson.Get(r.value, "aggregates").Raw] = true
	}
	split, wrong := 0, 0
	var examples []string
	for w, agg := range wantPlain {
		if len(distinct[w]) > 1 {
			split++
		}
		if len(distinct[w]) != 1 || !distinct[w][agg] {
			wrong++
			if len(examples) < 3 {
				var vs []string
				for v := range distinct[w] {
					vs = append(vs, v)
				}
				sort.Strings(vs)
				examples = append(examples, fmt.Sprintf("%s: replay %s, run without repartition %d final panes %v", w, agg, len(vs), vs))
			}
		}
	}
	sort.Strings(examples)
	t.Logf("without repartition: %d of %d windows have several distinct final panes, %d differ from replay; windowd_split_keys_total %.0f; e.g.\n  %s",
		split, len(wantPlain), wrong, splitKeys, strings.Join(examples, "\n  "))
	if split == 0 && wrong == 0 {
		problems = append(problems, "without repartition the output matched replay: the test does not show the split it should")
	}
	if len(problems) > 0 {
		t.Fatalf("%d problems:\n%s", len(problems), strings.Join(problems, "\n"))
	}
	t.Logf("%.1fs in all", time.Since(began).Seconds())
}

// startOrderProducer starts a steadyProducer keyed by order id (a new id
// per record) with one of users users at random: every user has records
// on every partition.
func startOrderProducer(t *testing.T, e *env, users int) *steadyProducer {
	return startProducer(t, e, 4242, func(rng *rand.Rand, p int32, n int, ts int64) input {
		order := fmt.Sprintf("o%d", n)
		return input{partition: p, key: order, value: orderValue(order, fmt.Sprintf("u%d", rng.Intn(users)), ts, rng.Intn(100))}
	})
}

// groupShares returns, per consumer group, the number of partitions each
// member is assigned (nil for a group that is not Stable).
func groupShares(adm *kadm.Client, groups ...string) map[string][]int {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out := map[string][]int{}
	described, err := adm.DescribeGroups(ctx, groups...)
	if err != nil {
		return out
	}
	for _, g := range described {
		if g.Err != nil || g.State != "Stable" {
			continue
		}
		var shares []int
		for _, m := range g.Members {
			n := 0
			if ca, ok := m.Assigned.AsConsumer(); ok {
				for _, tp := range ca.Topics {
					n += len(tp.Partitions)
				}
			}
			shares = append(shares, n)
		}
		sort.Ints(shares)
		out[g.Group] = shares
	}
	return out
}

// TestRepartitionKill (docs/SEMANTICS.md, Repartitioning and Delivery): two
// windowd processes (one config, separate state dirs, repartition: true,
// at_least_once with its default 1s commit interval, 2s session) share both
// stages of a steady stream over 8 partitions keyed by order id; mid-stream
// one is killed (kill -9). Its input partitions move, and stage 1 re-reads
// from the last committed input offsets and writes those records to the
// repartition topic again; its repartition partitions move with their state
// (restored from the changelog). The stream goes on, then stops and a flush
// closes every window. Every window replay computes for the same records has
// exactly one final pane, equal to replay's: nothing lost, nothing counted
// twice (stage 2 drops the records stage 1 wrote again, by upstream offset);
// a pane emitted twice repeats its pane id byte for byte.
func TestRepartitionKill(t *testing.T) {
	parallel(t, 18*time.Second)
	repartitionKill(t, "at_least_once")
}

// TestRepartitionKillExactlyOnce is TestRepartitionKill under exactly_once
// (stage 2 transactional, 100ms commit interval; stage 1 is not, its
// repeated writes are dropped the same way): a read_committed reader sees
// every pane once.
func TestRepartitionKillExactlyOnce(t *testing.T) {
	parallel(t, 18*time.Second)
	repartitionKill(t, "exactly_once")
}

func repartitionKill(t *testing.T, delivery string) {
	if os.Getenv("WINDOWD_KAFKA_BROKERS") == "" {
		t.Skip("needs a real broker (WINDOWD_KAFKA_BROKERS): windowd processes in two consumer groups, an internal repartition topic")
	}
	windowdBinary(t)
	began := time.Now()
	const parts = 8
	tail := "    delivery: " + delivery + "\n    repartition: true\n"
	write := func(e *env, stateDir string) string { return e.writeSteadyConfig(stateDir, "2s", tail) }
	e := newRepartitionEnv(t, "", parts, write)
	if e.cfg.Pipelines[0].Repartition == nil {
		t.Fatal("config: repartition not set")
	}
	member := func(name string) *env {
		m := *e
		m.stateDir = filepath.Join(t.TempDir(), "state-"+name)
		m.cfgPath = write(e, m.stateDir)
		return &m
	}
	a := member("a").spawn(nil)
	b := member("b").spawn(nil)
	names := map[*instance]string{a: "a", b: "b"}
	logTroubles(t, names)
	a.waitListening(t)
	b.waitListening(t)
	alive := func(inst *instance) {
		if !inst.running() {
			t.Fatalf("instance %s exited: %v\n%s", names[inst], inst.exitErr, stderrTail(inst, 30))
		}
	}
	op := startOrderProducer(t, e, 16)
	at := func(format string, args ...any) {
		n, et := op.progress()
		t.Logf("%5.1fs  %s (%d records produced, event time +%.1fs)", time.Since(began).Seconds(), fmt.Sprintf(format, args...), n, float64(et-base)/1000)
	}
	adm := kadm.NewClient(newClient(t))
	stage1, stage2 := e.group, e.repartitionTopic() // the stage 2 group is named like its topic
	shares := func() string {
		s := groupShares(adm, stage1, stage2)
		return fmt.Sprintf("stage 1 group %v, stage 2 group %v", s[stage1], s[stage2])
	}
	waitFor(t, "a and b to share both stages' partitions", 60*time.Second, func() bool {
		alive(a)
		alive(b)
		s := groupShares(adm, stage1, stage2)
		for _, g := range []string{stage1, stage2} {
			if len(s[g]) != 2 || s[g][0] == 0 || s[g][0]+s[g][1] != parts {
				return false
			}
		}
		return true
	})
	at("a and b share the partitions: %s", shares())
	out := e.reader(e.out)
	// Progress before the kill: the stream is 8s (of event time) along and
	// windows have fired.
	for {
		alive(a)
		out.poll(200 * time.Millisecond)
		if _, et := op.progress(); et >= base+8_000 && len(out.got) > 0 {
			break
		}
		if time.Since(began) > 60*time.Second {
			t.Fatalf("no pane within 60s (event time reached; %s)", shares())
		}
	}
	at("%d pane records so far", len(out.got))

	// The input partitions a's stage 1 is writing from (informational).
	written := func() map[string]float64 {
		m := map[string]float64{}
		for _, s := range a.samples("windowd_repartitioned_records_total", "pipeline", "p") {
			m[s.labels["upstream"]] = s.value
		}
		return m
	}
	before := written()
	time.Sleep(500 * time.Millisecond)
	var aUpstreams []string
	for u, v := range written() {
		if v > before[u] {
			aUpstreams = append(aUpstreams, u)
		}
	}
	sort.Strings(aUpstreams)
	_ = a.signal(t, syscall.SIGKILL)
	_, killedAt := op.progress()
	at("killed a (SIGKILL); its stage 1 was writing records of input partitions %v", aUpstreams)
	waitFor(t, "b to own every partition of both stages", 45*time.Second, func() bool {
		alive(b)
		s := groupShares(adm, stage1, stage2)
		return len(s[stage1]) == 1 && s[stage1][0] == parts && len(s[stage2]) == 1 && s[stage2][0] == parts
	})
	at("b owns every partition: %s", shares())
	// b's stage 2 sees markers from every upstream past the kill: its stage 1
	// took a's input partitions over and caught up.
	waitFor(t, "b's upstream watermarks past the event time of the kill", 30*time.Second, func() bool {
		alive(b)
		lo, _ := b.upstreamWatermarks()
		for p := int32(0); p < parts; p++ {
			if lo[p] < float64(killedAt) {
				return false
			}
		}
		return true
	})
	lo, _ := b.upstreamWatermarks()
	at("b processes every upstream: upstream watermarks %s", fmtWatermarks(lo))
	for _, et := op.progress(); et < killedAt+6_000; _, et = op.progress() {
		alive(b)
		time.Sleep(50 * time.Millisecond)
	}

	recs := op.finish(e)
	alive(b)
	at("stream stopped, flushed; every input record committed by stage 1")

	want := replayFinals(t, e, recs)
	if len(want) < 200 {
		t.Fatalf("test stream too small: replay has %d windows", len(want))
	}
	readFinals(out, want, 40*time.Second)
	markers, _ := b.metric(t, "windowd_repartition_markers_total", "pipeline", "p")
	dropped, droppedFound := b.metric(t, "windowd_repartition_duplicates_total", "pipeline", "p")
	lo, _ = b.upstreamWatermarks()
	at("b: %.0f markers written, %.0f duplicates dropped; upstream watermarks %s", markers, dropped, fmtWatermarks(lo))
	if err := b.signal(t, syscall.SIGTERM); err != nil {
		t.Errorf("instance b after SIGTERM: %v\n%s", err, stderrTail(b, 30))
	}
	out.poll(time.Second)
	late := e.reader(e.late)
	late.poll(time.Second)

	// How much stage 1 wrote twice (informational: the duplicates stage 2
	// had to drop; a kill right after a commit may leave few or none).
	data, upstreams, err := repartitionData(t, e.repartitionTopic())
	res := checkDelivery(e, want, out.got, late.got, delivery == "exactly_once")
	if err != nil {
		t.Logf("reading the repartition topic: %v", err)
	} else {
		t.Logf("repartition topic: %d data records for %d input records (%d distinct upstream positions): %d written again after the kill",
			data, len(recs), upstreams, data-upstreams)
		complete := upstreams == len(recs) // stage 2 deletes what it committed 30s ago (purge)
		if !complete {
			t.Logf("the repartition topic holds %d of %d input records (stage 2 purged the rest): the duplicate count is not checked", upstreams, len(recs))
		} else if data == upstreams {
			t.Logf("the kill came right after a's stage 1 committed: nothing was written twice, stage 2's duplicate check was not exercised this time")
		}
		// No copy existed before the kill, and b processed every copy
		// written after it: b dropped each extra copy, and only those.
		if complete && droppedFound && int(dropped) != data-upstreams {
			res.report("records stage 2 (b) dropped as duplicates, against extra copies in the repartition topic",
				[]string{fmt.Sprintf("windowd_repartition_duplicates_total %.0f, extra copies %d", dropped, data-upstreams)})
		}
	}
	t.Logf("%d input records, %d windows in replay; output: %d pane records, %d distinct pane ids, %d duplicates; %.1fs in all",
		len(recs), len(want), res.records, res.distinct, res.dups, time.Since(began).Seconds())
	if len(res.problems) > 0 {
		t.Fatalf("output after a kill -9 with repartition: true (%s) differs from replay:\n%s", delivery, strings.Join(res.problems, "\n"))
	}
}

// repartitionData reads the repartition topic to its current end and counts
// its data records (not markers) and their distinct upstream headers (the
// input partition and offset each came from).
func repartitionData(t *testing.T, topic string) (data, distinct int, err error) {
	adm := kadm.NewClient(newClient(t))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return 0, 0, err
	}
	remaining := map[int32]int64{}
	ends.Each(func(lo kadm.ListedOffset) {
		if lo.Offset > 0 {
			remaining[lo.Partition] = lo.Offset
		}
	})
	cl := newClient(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	seen := map[string]bool{}
	for len(remaining) > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return data, len(seen), fmt.Errorf("%d partitions not read to their end: %w", len(remaining), ctx.Err())
		}
		fs.EachRecord(func(r *kgo.Record) {
			if end, ok := remaining[r.Partition]; ok && r.Offset+1 >= end {
				delete(remaining, r.Partition)
			}
			if r.Offset >= ends[topic][r.Partition].Offset {
				return
			}
			marker, upstream := false, ""
			for _, h := range r.Headers {
				switch h.Key {
				case repartition.HeaderMarker:
					marker = true
				case repartition.HeaderUpstream:
					upstream = string(h.Value)
				}
			}
			if !marker {
				data++
				seen[upstream] = true
			}
		})
	}
	return data, len(seen), nil
}

// markerGaps reads partition 0 of the repartition topic to its current end
// and returns, per upstream, the gaps (ms) between the write times of its
// consecutive markers written in [from, to].
func markerGaps(t *testing.T, topic string, from, to time.Time) (map[int32][]int64, error) {
	adm := kadm.NewClient(newClient(t))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, err
	}
	end := ends[topic][0].Offset
	cl := newClient(t, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	last := map[int32]int64{}
	gaps := map[int32][]int64{}
	for next := int64(0); next < end; {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return gaps, fmt.Errorf("partition 0 not read to its end (%d of %d): %w", next, end, ctx.Err())
		}
		fs.EachRecord(func(r *kgo.Record) {
			next = r.Offset + 1
			marker := false
			for _, h := range r.Headers {
				marker = marker || h.Key == repartition.HeaderMarker
			}
			if !marker {
				return
			}
			src, m, err := repartition.DecodeMarker(r.Value)
			if err != nil || m.Time < from.UnixMilli() || m.Time > to.UnixMilli() {
				return
			}
			if prev, ok := last[src.P]; ok { // of the test's one input
				gaps[src.P] = append(gaps[src.P], m.Time-prev)
			}
			last[src.P] = m.Time
		})
	}
	return gaps, nil
}

// gapStats renders gaps as median and largest.
func gapStats(gaps map[int32][]int64) string {
	var ps []int
	for p := range gaps {
		ps = append(ps, int(p))
	}
	sort.Ints(ps)
	var out []string
	for _, p := range ps {
		g := append([]int64(nil), gaps[int32(p)]...)
		sort.Slice(g, func(i, j int) bool { return g[i] < g[j] })
		out = append(out, fmt.Sprintf("%d: %d gaps, median %dms, max %dms", p, len(g), g[len(g)/2], g[len(g)-1]))
	}
	return strings.Join(out, "; ")
}
