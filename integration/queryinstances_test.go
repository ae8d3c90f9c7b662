package integration

import (
	"fmt"
	"math/rand"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/windowd/windowd/repartition"
)

// TestQueryAnyInstance: three windowd processes share 8 partitions of a
// pipeline keyed by the record key (partitioned by the producer's murmur2),
// with one standby replica per partition (docs/OPERATIONS.md, Querying
// windows). With the input at rest:
//   - every key asked at every instance gets the same answer, from the
//     key's owner (forwarded by the other two);
//   - asked with allow_stale=true at the member keeping the partition's
//     standby, the standby answers (it says so) with the owner's windows;
//   - each answered window's values are those of its final pane, once a
//     flush record per partition closes every window.
//
// While one instance is killed (-9) and its partitions move, every answer
// at the two others is either the same as before or a 503 with
// Retry-After; once the group has settled, every key is answered again.
func TestQueryAnyInstance(t *testing.T) { queryAnyInstance(t, "at_least_once", "") }

// TestQueryAnyInstanceExactlyOnceNoLateness: the same under exactly_once
// (answers are of the last committed transaction) with allowed_lateness
// 0s (a window is held until its on-time step).
func TestQueryAnyInstanceExactlyOnceNoLateness(t *testing.T) {
	queryAnyInstance(t, "exactly_once", "0s")
}

func queryAnyInstance(t *testing.T, delivery, lateness string) {
	if os.Getenv("WINDOWD_KAFKA_BROKERS") == "" {
		t.Skip("needs a real broker (WINDOWD_KAFKA_BROKERS): windowd processes rebalancing one consumer group")
	}
	parallel(t, 60*time.Second)
	windowdBinary(t)
	e := newRebalanceEnvWith(t, 8, delivery, lateness, false)
	e.recordKey, e.standbys = true, 1
	e.cfgPath = e.writeRebalanceConfig(e.stateDir)
	// Five keys per partition, each on the partition murmur2 gives it.
	keysOf := map[int32][]string{}
	var keys []string
	for i := 0; len(keys) < 40; i++ {
		k := fmt.Sprintf("q%03d", i)
		if p := repartition.KeyPartition(k, e.partitions); len(keysOf[p]) < 5 {
			keysOf[p] = append(keysOf[p], k)
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	insts := map[string]*instance{}
	for _, name := range []string{"a", "b", "c"} {
		insts[name] = e.member(name).startProcess()
	}
	live := []string{"a", "b", "c"}
	settled := func() {
		waitFor(t, "every partition owned", 60*time.Second, func() bool {
			sum := 0
			for _, name := range live {
				v, _ := insts[name].metric(t, "windowd_assigned_partitions")
				if v == 0 {
					return false
				}
				sum += int(v)
			}
			return sum == int(e.partitions)
		})
	}
	settled()
	sp := startProducer(t, e, 7, func(rng *rand.Rand, p int32, _ int, ts int64) input {
		u := keysOf[p][rng.Intn(len(keysOf[p]))]
		return input{partition: p, key: u, value: fmt.Sprintf(`{"user":%q,"ts":%d,"x":%d}`, u, ts, rng.Intn(100))}
	})
	waitFor(t, "8 s of event time", 60*time.Second, func() bool { _, et := sp.progress(); return et >= base+8000 })
	sp.halt()
	e.waitCommitted(t, 60*time.Second)

	get := func(name, params string) (int, gjson.Result, http.Header) {
		resp, err := http.Get("http://" + insts[name].httpAddr + "/api/windows?" + params)
		if err != nil {
			t.Fatalf("instance %s: %v", name, err)
		}
		defer resp.Body.Close()
		var b strings.Builder
		_, _ = fmt.Fprint(&b, "")
		buf := make([]byte, 1<<20)
		for {
			n, err := resp.Body.Read(buf)
			b.Write(buf[:n])
			if err != nil {
				break
			}
		}
		return resp.StatusCode, gjson.Parse(b.String()), resp.Header
	}
	// values: the windows' bounds and aggregates, what no rebalance or
	// standby changes while the input rests.
	values := func(a gjson.Result) string {
		var out []string
		for _, w := range a.Get("windows").Array() {
			out = append(out, w.Get("window").Raw+"="+w.Get("aggregates").Raw)
		}
		return strings.Join(out, ";")
	}
	addrOf := map[string]string{}
	for name, inst := range insts {
		addrOf[inst.httpAddr] = name
	}
	answers := map[string]gjson.Result{}
	waitFor(t, "every key answered alike at every instance, by its owner", 60*time.Second, func() bool {
		for _, k := range keys {
			var first gjson.Result
			for _, name := range live {
				code, a, _ := get(name, "pipeline=p&key="+url.QueryEscape(k))
				if code != 200 {
					t.Logf("key %s at %s: %d %s", k, name, code, a.Raw)
					return false
				}
				if len(a.Get("instances").Array()) != 1 {
					t.Fatalf("key %s at %s: answered by %s, want its owner alone", k, name, a.Get("instances").Raw)
				}
				if name == live[0] {
					first = a
				} else if a.Get("windows").Raw != first.Get("windows").Raw || a.Get("instances").Raw != first.Get("instances").Raw {
					t.Logf("key %s: %s answered %s, %s answered %s", k, live[0], first.Raw, name, a.Raw)
					return false
				}
			}
			if len(first.Get("windows").Array()) == 0 {
				t.Fatalf("key %s has no window: %s", k, first.Raw)
			}
			answers[k] = first
		}
		return true
	})

	// A scan asks every member: in pages of 7 at any instance, every key
	// once, in order, as its point answer shows it.
	for _, name := range live {
		var scanned []string
		after := ""
		for page := 0; page < 20; page++ {
			params := "pipeline=p&prefix=q&limit=7"
			if after != "" {
				params += "&after=" + url.QueryEscape(after)
			}
			code, a, _ := get(name, params)
			if code != 200 || len(a.Get("instances").Array()) != 3 {
				t.Fatalf("scan at %s: %d %s", name, code, a.Raw)
			}
			for _, k := range a.Get("keys").Array() {
				key := k.Get("key").Str
				scanned = append(scanned, key)
				if k.Get("windows").Raw != answers[key].Get("windows").Raw {
					t.Fatalf("scan at %s: key %s %s, its point answer %s", name, key, k.Get("windows").Raw, answers[key].Get("windows").Raw)
				}
			}
			if a.Get("next").Type == gjson.Null || !a.Get("next").Exists() {
				break
			}
			after = a.Get("next").Str
		}
		if strings.Join(scanned, ",") != strings.Join(keys, ",") {
			t.Fatalf("scan at %s visited %v, want %v", name, scanned, keys)
		}
	}

	// Standbys: one of the two others keeps each partition warm.
	standbyAnswers := 0
	waitFor(t, "every key answered by a standby with allow_stale", 60*time.Second, func() bool {
		standbyAnswers = 0
		for _, k := range keys {
			owner := addrOf[answers[k].Get("instances.0").Str]
			for _, name := range live {
				if name == owner {
					continue
				}
				code, a, _ := get(name, "pipeline=p&allow_stale=true&key="+url.QueryEscape(k))
				if code != 200 {
					t.Fatalf("key %s at %s, allow_stale: %d %s", k, name, code, a.Raw)
				}
				if !a.Get("standby").Bool() {
					continue // forwarded to the owner: no standby here
				}
				if !a.Get("changelog_position").Exists() || values(a) != values(answers[k]) {
					t.Logf("key %s: the standby at %s, %s changelog records behind, answered other windows than the owner", k, name, a.Get("changelog_behind").Raw)
					return false
				}
				standbyAnswers++
			}
		}
		return standbyAnswers >= len(keys)
	})
	t.Logf("%d keys answered alike at 3 instances; %d answers from standbys", len(keys), standbyAnswers)

	// kill -9 one instance: the two others answer the same or 503.
	victim := addrOf[answers[keys[0]].Get("instances.0").Str]
	_ = insts[victim].cmd.Process.Kill()
	<-insts[victim].exited
	live = slices.DeleteFunc(live, func(n string) bool { return n == victim })
	rng := rand.New(rand.NewSource(1))
	same, unavailable := 0, 0
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		k := keys[rng.Intn(len(keys))]
		name := live[rng.Intn(len(live))]
		code, a, h := get(name, "pipeline=p&key="+url.QueryEscape(k))
		switch {
		case code == 503 && h.Get("Retry-After") != "" && a.Get("error").Str != "":
			unavailable++
		case code == 200 && values(a) == values(answers[k]):
			same++
		default:
			t.Fatalf("during the rebalance, key %s at %s: %d %s; before: %s", k, name, code, a.Raw, answers[k].Raw)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if unavailable == 0 {
		t.Fatalf("no 503 while %s's partitions moved (%d answers)", victim, same)
	}
	settled()
	waitFor(t, "every key answered again by the two left", 60*time.Second, func() bool {
		for _, k := range keys {
			for _, name := range live {
				code, a, _ := get(name, "pipeline=p&key="+url.QueryEscape(k))
				if code != 200 {
					return false
				}
				if values(a) != values(answers[k]) {
					t.Fatalf("after the rebalance, key %s at %s: %s; before: %s", k, name, a.Raw, answers[k].Raw)
				}
			}
		}
		return true
	})
	t.Logf("while %s's partitions moved: %d answers unchanged, %d 503s", victim, same, unavailable)

	// Each answered window's values are those of its final pane.
	produce(t, e.in, flushRecords(e.partitions))
	finals := map[string]string{}
	out := e.reader(e.out)
	want := 0
	for _, a := range answers {
		want += len(a.Get("windows").Array())
	}
	out.readUntil(t, "the final pane of every answered window", 60*time.Second, func(got []outRecord) bool {
		for _, r := range got {
			v := gjson.Parse(r.value)
			if v.Get("pane.final").Bool() && !v.Get("retraction").Bool() {
				finals[v.Get("key").Str+v.Get("window").Raw] = v.Get("aggregates").Raw
			}
		}
		n := 0
		for k, a := range answers {
			for _, w := range a.Get("windows").Array() {
				if _, ok := finals[k+w.Get("window").Raw]; ok {
					n++
				}
			}
		}
		return n == want
	})
	for k, a := range answers {
		for _, w := range a.Get("windows").Array() {
			if f := finals[k+w.Get("window").Raw]; f != w.Get("aggregates").Raw {
				t.Fatalf("key %s window %s: answered %s, final pane %s", k, w.Get("window").Raw, w.Get("aggregates").Raw, f)
			}
		}
	}
	t.Logf("%d answered windows equal their final panes", want)
}
