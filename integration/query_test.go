package integration

import (
	"fmt"
	"net/url"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

// TestQueryWindows: GET /api/windows answers a key's held windows from the
// committed state, as their panes show them (docs/OPERATIONS.md, Querying
// windows). The stream's first two phases leave windows held (on time or
// not yet, within allowed_lateness). For every key:
//   - every window that has emitted a pane and has not expired is in the
//     answer, and no other;
//   - a window past its on-time step (its late records each fire a LATE
//     pane at once) shows the values of its last pane, and the answer's
//     pane count and last timing are that pane's;
//   - a scan in pages of 3 keys visits exactly the keys with windows, in
//     order, and bad parameters are a 400 naming them.
func TestQueryWindows(t *testing.T) {
	parallel(t, 5*time.Second)
	e := newEnv(t, 4, "")
	s := newStream(3, 4, 60)
	inst := e.startInProcess()
	produce(t, e.in, append(append([]input(nil), s.phases[0]...), s.phases[1]...))
	inst.waitRecordsIn(t, len(s.phases[0])+len(s.phases[1]))
	// Every pane of the records in, read until the output has been quiet
	// for 2 s (a fixed 3 s read found none in a CI race run, six tests
	// beside it: the reader had not fetched yet).
	out := e.reader(e.out)
	for deadline, quiet := time.Now().Add(60*time.Second), 0; quiet < 4 && time.Now().Before(deadline); {
		n := len(out.got)
		out.poll(500 * time.Millisecond)
		if quiet++; len(out.got) > n || n == 0 {
			quiet = 0
		}
	}

	last := map[string]gjson.Result{} // key/start/end: the window's last pane
	keys := map[string]bool{}
	for _, r := range out.got {
		v := gjson.Parse(r.value)
		if v.Get("retraction").Bool() {
			continue
		}
		last[fmt.Sprintf("%s/%d/%d", v.Get("key").Str, v.Get("window.start").Int(), v.Get("window.end").Int())] = v
		keys[v.Get("key").Str] = true
	}
	if len(last) < 20 {
		t.Fatalf("only %d windows with panes", len(last))
	}
	query := func(params string) (int, gjson.Result) {
		code, body := httpGet(t, "http://"+inst.httpAddr+"/api/windows?"+params)
		return code, gjson.Parse(body)
	}
	held := map[string]bool{}
	var checked, onTime int
	waitFor(t, "every key answered as its panes show it", 30*time.Second, func() bool {
		checked, onTime = 0, 0
		held = map[string]bool{}
		for key := range keys {
			code, a := query("pipeline=p&key=" + url.QueryEscape(key))
			if code != 200 {
				t.Logf("key %s: %d %s", key, code, a.Raw)
				return false
			}
			f := a.Get("frontier_ms").Int()
			answered := map[string]bool{}
			for _, w := range a.Get("windows").Array() {
				id := fmt.Sprintf("%s/%d/%d", key, w.Get("window.start").Int(), w.Get("window.end").Int())
				answered[id] = true
				held[key] = true
				p, ok := last[id]
				if w.Get("panes").Int() == 0 {
					if ok {
						t.Logf("%s: answered without panes, has %s", id, p.Raw)
						return false
					}
					continue
				}
				if !ok || w.Get("panes").Int() != p.Get("pane.index").Int()+1 || w.Get("last_pane.timing").Str != p.Get("pane.timing").Str {
					t.Logf("%s: answered %s, last pane %s", id, w.Raw, p.Raw)
					return false
				}
				if w.Get("on_time_done").Bool() {
					onTime++
					if w.Get("aggregates").Raw != p.Get("aggregates").Raw || w.Get("final").Bool() {
						t.Logf("%s: answered %s, last pane %s", id, w.Raw, p.Raw)
						return false
					}
				}
				checked++
			}
			for id, p := range last {
				if strings.HasPrefix(id, key+"/") && p.Get("window.end").Int()+30000 > f && !p.Get("pane.final").Bool() && !answered[id] {
					t.Logf("%s: unexpired (frontier %d) and not answered; last pane %s", id, f, p.Raw)
					return false
				}
			}
		}
		return checked > 0 && onTime > 0
	})
	t.Logf("%d windows checked against their panes, %d past their on-time step", checked, onTime)

	var scanned []string
	after := ""
	for page := 0; ; page++ {
		if page > 100 {
			t.Fatal("scan does not end")
		}
		params := "pipeline=p&prefix=u&limit=3"
		if after != "" {
			params += "&after=" + url.QueryEscape(after)
		}
		code, a := query(params)
		if code != 200 || len(a.Get("keys").Array()) > 3 {
			t.Fatalf("scan page %d: %d %s", page, code, a.Raw)
		}
		for _, k := range a.Get("keys").Array() {
			scanned = append(scanned, k.Get("key").Str)
		}
		if !a.Get("next").Exists() || a.Get("next").Type == gjson.Null {
			break
		}
		after = a.Get("next").Str
	}
	var want []string
	for k := range held {
		want = append(want, k)
	}
	sort.Strings(want)
	if strings.Join(scanned, ",") != strings.Join(want, ",") {
		t.Fatalf("scan visited %v, keys with windows %v", scanned, want)
	}

	for params, status := range map[string]int{
		"key=u0-1":                        400, // no pipeline
		"pipeline=p":                      400, // neither key nor prefix
		"pipeline=p&key=a&prefix=b":       400,
		"pipeline=p&prefix=&limit=0":      400,
		"pipeline=p&key=a&limit=3":        400,
		"pipeline=p&key=a&from=yesterday": 400,
		"pipeline=p&key=a&from=10&to=5":   400,
		"pipeline=p&prefix=&after=%25%25": 400,
		"pipeline=p&key=a&colour=red":     400,
		"pipeline=nope&key=a":             404,
		"pipeline=p&key=nobody":           200,
	} {
		code, a := query(params)
		if code != status || (status != 200 && a.Get("error").Str == "") {
			t.Fatalf("%s: %d %s, want %d with an error", params, code, a.Raw, status)
		}
		if params == "pipeline=p&key=nobody" && (a.Get("windows").Raw != "[]") {
			t.Fatalf("a key without windows: %s, want an empty list", a.Raw)
		}
	}
	if v, _ := inst.metric(t, "windowd_queries_total", "pipeline", "p", "kind", "point", "outcome", "ok"); v < float64(len(keys)) {
		t.Fatalf("windowd_queries_total{point,ok} = %v, want at least %d", v, len(keys))
	}
}
