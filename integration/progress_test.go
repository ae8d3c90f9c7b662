package integration

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

// progressCheck is what checkProgress found in an output topic read in
// order per partition.
type progressCheck struct {
	panes      []outRecord // the pane records (progress records left out)
	progress   int         // progress records read
	covered    int         // final panes a later progress record covered
	violations []string
}

// checkProgress checks the promise of progress records (docs/SEMANTICS.md,
// Progress records) record by record, as a consumer combines them: per
// output partition, the latest final_through and frontier reported for
// each input partition; the partition's final_through is the minimum over
// every input partition (nothing is final until each was reported), and
// so is its frontier. A final pane of a window with end <= final_through,
// or an EARLY or ON_TIME pane of a window with end <= frontier, must not
// follow: exactlyOnce allows no exception; at least once a pane written
// again after a restart may, if it repeats a pane id seen before it.
func checkProgress(got []outRecord, exactlyOnce bool) *progressCheck {
	res := &progressCheck{}
	type reported struct{ final, frontier map[int64]int64 }
	byPart := map[int32]*reported{}
	inputs := map[int32]int64{}
	seen := map[string]string{} // pane id -> value
	var finalEnds []struct {
		part int32
		end  int64
	}
	combined := func(part int32) (final, frontier int64) {
		rp := byPart[part]
		final, frontier = math.MaxInt64, math.MaxInt64
		if rp == nil || inputs[part] == 0 {
			return math.MinInt64, math.MinInt64
		}
		for p := int64(0); p < inputs[part]; p++ {
			f, ok := rp.final[p]
			if !ok {
				return math.MinInt64, math.MinInt64
			}
			final, frontier = min(final, f), min(frontier, rp.frontier[p])
		}
		return final, frontier
	}
	for _, r := range got {
		if r.headers["windowd-progress"] == "1" {
			res.progress++
			v := gjson.Get(r.value, "progress")
			rp := byPart[r.partition]
			if rp == nil {
				rp = &reported{final: map[int64]int64{}, frontier: map[int64]int64{}}
				byPart[r.partition] = rp
			}
			for _, p := range v.Get("partitions").Array() {
				rp.final[p.Int()], rp.frontier[p.Int()] = v.Get("final_through").Int(), v.Get("frontier").Int()
			}
			inputs[r.partition] = max(inputs[r.partition], v.Get("input_partitions").Int())
			continue
		}
		res.panes = append(res.panes, r)
		if strings.HasPrefix(r.key, "flush") {
			continue
		}
		v := gjson.Parse(r.value)
		end := v.Get("window.end").Int()
		id := r.headers["pane_id"]
		prev, dup := seen[id]
		seen[id] = r.value
		if v.Get("retraction").Bool() {
			continue
		}
		final, frontier := combined(r.partition)
		isFinal := v.Get("pane.final").Bool()
		timing := v.Get("pane.timing").Str
		bad := isFinal && end <= final || (timing == "EARLY" || timing == "ON_TIME") && end <= frontier
		if bad && (exactlyOnce || !dup || prev != r.value) {
			res.violations = append(res.violations, fmt.Sprintf("partition %d: %s after progress final through %d, frontier %d", r.partition, r.value, final, frontier))
		}
		if isFinal {
			finalEnds = append(finalEnds, struct {
				part int32
				end  int64
			}{r.partition, end})
		}
	}
	for _, f := range finalEnds {
		if final, _ := combined(f.part); f.end <= final {
			res.covered++
		}
	}
	return res
}

// TestProgressExactlyOnceCrashLoop: under exactly_once with progress
// records every 100 ms and allowed_lateness 0s, a read_committed consumer
// checks the progress promise record by record while windowd is killed
// (kill -9) and restarted: no final pane follows a progress record that
// covers it, and the output is replay's (crashLoop's checks).
func TestProgressExactlyOnceCrashLoop(t *testing.T) {
	parallel(t, 45*time.Second)
	crashLoop(t, crashPlan{delivery: "exactly_once", partitions: 4, cycles: 8, lateness: "0s", session: "2s", progress: true})
}

// TestProgressFollowsPartitions is TestStateFollowsPartitions (instances
// killed, added and stopped: rebalances) under exactly_once with
// allowed_lateness 0s and progress records, the promise checked by a
// read_committed consumer combining every instance's progress.
func TestProgressFollowsPartitions(t *testing.T) {
	parallel(t, 50*time.Second) // mostly waits for the stream
	stateFollowsPartitionsWith(t, "exactly_once", "0s", false, true, 0)
}

// reportProgress fails t with the violations of a progress check, and
// when no final pane was covered (the check would then prove nothing).
func reportProgress(t *testing.T, pc *progressCheck, finals int) {
	t.Helper()
	t.Logf("progress: %d progress records, %d of %d final panes covered by a later one", pc.progress, pc.covered, finals)
	if len(pc.violations) > 0 {
		t.Fatalf("%d panes break the progress promise, e.g.\n%s", len(pc.violations), strings.Join(pc.violations[:min(len(pc.violations), 8)], "\n"))
	}
	if pc.progress == 0 || pc.covered < finals/2 {
		t.Fatalf("progress records covered %d of %d final panes: too few for the check to mean anything", pc.covered, finals)
	}
}
