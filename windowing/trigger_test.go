package windowing

import (
	"math"
	"testing"
)

// The tables below cover every branch of trigger.go's decisions; the rule
// each row pins is in docs/SEMANTICS.md (Lateness, Triggers, Firing, Panes).

func TestClosedExpired(t *testing.T) {
	const maxT = math.MaxInt64
	for _, c := range []struct {
		name                string
		f, end, lateness    int64
		wantClosed, wantExp bool
	}{
		{"open", 9999, 10000, 5000, false, false},
		{"closed at the end", 10000, 10000, 5000, true, false},
		{"late", 14999, 10000, 5000, true, false},
		{"expired at end+L", 15000, 10000, 5000, true, true},
		{"expired past end+L", 20000, 10000, 5000, true, true},
		{"L=0 closes and expires at once", 10000, 10000, 0, true, true},
		{"L=0 open", 9999, 10000, 0, false, false},
		{"end+L saturates: never expires before +inf", maxT - 1, maxT - 10, 100, true, false},
		{"end+L saturates: +inf expires", maxT, maxT - 10, 100, true, true},
		{"frontier -inf", math.MinInt64, math.MinInt64 + 1, 0, false, false},
	} {
		if got := closed(c.f, c.end); got != c.wantClosed {
			t.Errorf("%s: closed(%d, %d) = %v, want %v", c.name, c.f, c.end, got, c.wantClosed)
		}
		if got := expired(c.f, c.end, c.lateness); got != c.wantExp {
			t.Errorf("%s: expired(%d, %d, %d) = %v, want %v", c.name, c.f, c.end, c.lateness, got, c.wantExp)
		}
	}
}

func TestEventDeadline(t *testing.T) {
	for _, c := range []struct {
		onTimeDone    bool
		end, lateness int64
		want          int64
	}{
		{false, 10000, 5000, 10000},
		{true, 10000, 5000, 15000},
		{true, 10000, 0, 10000},
		{true, math.MaxInt64 - 1, 5000, math.MaxInt64},
	} {
		if got := eventDeadline(c.onTimeDone, c.end, c.lateness); got != c.want {
			t.Errorf("eventDeadline(%v, %d, %d) = %d, want %d", c.onTimeDone, c.end, c.lateness, got, c.want)
		}
	}
}

func TestDropReason(t *testing.T) {
	for _, c := range []struct {
		took, outOfRange bool
		want             DropReason
		wantDrop         bool
	}{
		{true, false, 0, false},
		{false, false, DropExpired, true},
		{false, true, DropOutOfRange, true},
	} {
		got, drop := dropReason(c.took, c.outOfRange)
		if got != c.want || drop != c.wantDrop {
			t.Errorf("dropReason(%v, %v) = %v, %v, want %v, %v", c.took, c.outOfRange, got, drop, c.want, c.wantDrop)
		}
	}
}

func TestRecordFiring(t *testing.T) {
	count2 := TriggerSpec{EarlyCount: 2, OnTime: true}
	lateNow := TriggerSpec{OnTime: true, Late: true, LateEvery: 0}
	lateEvery := TriggerSpec{OnTime: true, Late: true, LateEvery: 1000}
	both := TriggerSpec{EarlyCount: 1, OnTime: true, Late: true}
	for _, c := range []struct {
		name       string
		trig       TriggerSpec
		f, since   int64
		wantFire   bool
		wantTiming Timing
	}{
		{"open, no early count", TriggerSpec{OnTime: true}, 5000, 100, false, Early},
		{"open, count not reached", count2, 5000, 1, false, Early},
		{"open, count reached", count2, 5000, 2, true, Early},
		{"open, count passed (restored)", count2, 5000, 3, true, Early},
		{"open, late every 0 does not fire early", lateNow, 9999, 1, false, Early},
		{"closed, late every 0", lateNow, 10000, 1, true, Late},
		{"closed, late every d waits for its timer", lateEvery, 12000, 1, false, Late},
		{"closed, no late trigger", TriggerSpec{OnTime: true}, 12000, 1, false, Late},
		{"closed, early count does not fire late", count2, 12000, 5, false, Late},
		{"open, both: early", both, 9999, 1, true, Early},
		{"closed, both: late", both, 10000, 1, true, Late},
	} {
		fire, timing := recordFiring(&c.trig, c.f, 10000, c.since)
		if fire != c.wantFire || (fire && timing != c.wantTiming) {
			t.Errorf("%s: recordFiring = %v, %v, want %v, %v", c.name, fire, timing, c.wantFire, c.wantTiming)
		}
	}
}

func TestProcDelay(t *testing.T) {
	for _, c := range []struct {
		name string
		trig TriggerSpec
		late bool
		want int64
	}{
		{"early every", TriggerSpec{EarlyEvery: 500}, false, 500},
		{"no early every", TriggerSpec{Late: true, LateEvery: 700}, false, 0},
		{"late every", TriggerSpec{EarlyEvery: 500, Late: true, LateEvery: 700}, true, 700},
		{"late every 0 fires per record, no timer", TriggerSpec{Late: true}, true, 0},
		{"no late trigger", TriggerSpec{EarlyEvery: 500, LateEvery: 700}, true, 0},
	} {
		if got := procDelay(&c.trig, c.late); got != c.want {
			t.Errorf("%s: procDelay(late=%v) = %d, want %d", c.name, c.late, got, c.want)
		}
	}
}

func TestProcFiring(t *testing.T) {
	for _, c := range []struct {
		name       string
		late       bool
		f, since   int64
		wantFire   bool
		wantTiming Timing
	}{
		{"early timer, open, changed", false, 9999, 1, true, Early},
		{"early timer, open, unchanged", false, 9999, 0, false, Early},
		{"early timer, window closed: no LATE pane", false, 10000, 3, false, Early},
		{"late timer, late, changed", true, 10000, 2, true, Late},
		{"late timer, late, unchanged", true, 12000, 0, false, Late},
		{"late timer, on time again after a merge: no EARLY pane", true, 9999, 2, false, Late},
	} {
		fire, timing := procFiring(c.late, c.f, 10000, c.since)
		if fire != c.wantFire || (fire && timing != c.wantTiming) {
			t.Errorf("%s: procFiring = %v, %v, want %v, %v", c.name, fire, timing, c.wantFire, c.wantTiming)
		}
	}
}

func TestOnTimeFiring(t *testing.T) {
	for _, c := range []struct {
		name                string
		onTime              bool
		closing             ClosingPolicy
		f, lateness         int64
		wantPane, wantExpir bool
	}{
		{"on time, late phase follows", true, ClosingAlways, 10000, 5000, true, false},
		{"on_time false, late phase follows", false, ClosingAlways, 10000, 5000, false, false},
		{"on_time false, closing never, late phase", false, ClosingNever, 12000, 5000, false, false},
		{"L=0: one final pane", true, ClosingNever, 10000, 0, true, true},
		{"frontier jumps past expiry: one final pane", true, ClosingAlways, 15000, 5000, true, true},
		{"same step, on_time false, closing always", false, ClosingAlways, 10000, 0, true, true},
		{"same step, on_time false, closing if_changed", false, ClosingIfChanged, 10000, 0, true, true},
		{"same step, on_time false, closing never: no pane", false, ClosingNever, 10000, 0, false, true},
	} {
		trig := TriggerSpec{OnTime: c.onTime, Closing: c.closing}
		pane, expire := onTimeFiring(&trig, c.f, 10000, c.lateness)
		if pane != c.wantPane || expire != c.wantExpir {
			t.Errorf("%s: onTimeFiring = pane %v, expire %v, want %v, %v", c.name, pane, expire, c.wantPane, c.wantExpir)
		}
	}
}

func TestClosingFiring(t *testing.T) {
	for _, c := range []struct {
		name              string
		closing           ClosingPolicy
		since             int64
		lateSeen, settled bool
		wantPane          bool
		wantTiming        Timing
	}{
		{"always, unchanged, settled", ClosingAlways, 0, false, true, true, Late},
		{"always, late record", ClosingAlways, 1, true, false, true, Late},
		{"always, no late record, no ON_TIME/LATE pane: ON_TIME", ClosingAlways, 2, false, false, true, OnTime},
		{"if_changed, changed", ClosingIfChanged, 1, true, true, true, Late},
		{"if_changed, unchanged", ClosingIfChanged, 0, true, true, false, Late},
		{"if_changed, changed, unsettled: ON_TIME", ClosingIfChanged, 1, false, false, true, OnTime},
		{"never", ClosingNever, 3, true, true, false, Late},
	} {
		pane, timing := closingFiring(c.closing, c.since, c.lateSeen, c.settled)
		if pane != c.wantPane || (pane && timing != c.wantTiming) {
			t.Errorf("%s: closingFiring = %v, %v, want %v, %v", c.name, pane, timing, c.wantPane, c.wantTiming)
		}
	}
}

func TestSettles(t *testing.T) {
	for timing, want := range map[Timing]bool{Early: false, OnTime: true, Late: true} {
		if got := settles(timing); got != want {
			t.Errorf("settles(%v) = %v, want %v", timing, got, want)
		}
	}
}

func TestAccumulation(t *testing.T) {
	for _, c := range []struct {
		mode                     Mode
		final                    bool
		retract, remember, reset bool
	}{
		{Accumulating, false, false, false, false},
		{Accumulating, true, false, false, false},
		{Discarding, false, false, false, true},
		{Discarding, true, false, false, true},
		{Retracting, false, true, true, false},
		{Retracting, true, true, false, false},
	} {
		r, m, d := accumulation(c.mode, c.final)
		if r != c.retract || m != c.remember || d != c.reset {
			t.Errorf("accumulation(%v, final=%v) = %v, %v, %v, want %v, %v, %v", c.mode, c.final, r, m, d, c.retract, c.remember, c.reset)
		}
	}
}

// TestTriggerDecisionsDoNotAllocate: the decisions run per record and per
// pane.
func TestTriggerDecisionsDoNotAllocate(t *testing.T) {
	trig := TriggerSpec{EarlyCount: 2, EarlyEvery: 100, OnTime: true, Late: true, LateEvery: 0, Closing: ClosingIfChanged}
	var sink int
	n := testing.AllocsPerRun(100, func() {
		if closed(1, 2) || expired(1, 2, 3) {
			sink++
		}
		sink += int(eventDeadline(true, 2, 3))
		if _, drop := dropReason(false, false); drop {
			sink++
		}
		if fire, _ := recordFiring(&trig, 1, 2, 3); fire {
			sink++
		}
		sink += int(procDelay(&trig, false))
		if fire, _ := procFiring(true, 1, 2, 3); fire {
			sink++
		}
		if pane, _ := onTimeFiring(&trig, 1, 2, 3); pane {
			sink++
		}
		if pane, _ := closingFiring(trig.Closing, 1, false, true); pane {
			sink++
		}
		if settles(Late) {
			sink++
		}
		if r, _, _ := accumulation(Retracting, false); r {
			sink++
		}
	})
	if n != 0 {
		t.Fatalf("trigger decisions allocate %v times per run", n)
	}
	_ = sink
}
