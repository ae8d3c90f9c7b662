package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/windowd/windowd/internal/syncbuf"
)

// chromiumPath is Debian's chromium (scripts/chromium.sh install), or "".
func chromiumPath() string {
	for _, c := range []string{os.Getenv("WINDOWD_CHROMIUM"), "chromium", "chromium-browser"} {
		if c == "" {
			continue
		}
		if p, err := exec.LookPath(c); err == nil {
			return p
		}
	}
	return ""
}

// startQuickstartRun runs `windowd run` on configs/quickstart.yaml with a
// temporary state dir, free ports for the embedded broker and the HTTP
// listener, and returns the status page's address; edits are further
// replacements in the configuration's text, args follow --config. The run
// stops (SIGINT, as Ctrl-C) when the test ends and must exit 0.
func startQuickstartRun(t *testing.T, edits [][2]string, args ...string) (base string) {
	t.Helper()
	raw, err := os.ReadFile("../../configs/quickstart.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfg := string(raw)
	for _, r := range append([][2]string{
		{"embedded_listen: 127.0.0.1:19092", "embedded_listen: 127.0.0.1:0"},
		{"dir: ./data/quickstart", "dir: " + filepath.Join(dir, "state")},
		{"listen: 127.0.0.1:9100", "listen: 127.0.0.1:0"},
	}, edits...) {
		if !strings.Contains(cfg, r[0]) {
			t.Fatalf("configs/quickstart.yaml no longer holds %q", r[0])
		}
		cfg = strings.Replace(cfg, r[0], r[1], 1)
	}
	path := filepath.Join(dir, "quickstart.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	logs := &syncbuf.Buffer{}
	done := make(chan int, 1)
	go func() {
		done <- run(append([]string{"run", "--config", path}, args...), strings.NewReader(""), io.Discard, logs)
	}()
	t.Cleanup(func() {
		select {
		case code := <-done:
			// Already stopped: no handler would take a SIGINT now.
			t.Errorf("windowd run exited %d before the test ended; log:\n%s", code, logs.String())
			return
		default:
		}
		_ = syscall.Kill(os.Getpid(), syscall.SIGINT) // run's signal.NotifyContext takes it
		select {
		case code := <-done:
			if code != 0 {
				t.Errorf("windowd run exited %d; log:\n%s", code, logs.String())
			}
		case <-time.After(30 * time.Second):
			t.Errorf("windowd run did not stop within 30 s of SIGINT")
		}
	})
	re := regexp.MustCompile(`"status_page":"(http://[^"]+)/"`)
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if m := re.FindStringSubmatch(logs.String()); m != nil {
			return m[1]
		}
		select {
		case code := <-done:
			t.Fatalf("windowd run exited %d before listening; log:\n%s", code, logs.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
	t.Fatalf("no status page address logged within 30 s; log:\n%s", logs.String())
	return ""
}

// metricsFrontier is windowd_frontier_ms of pipeline clicks, or NaN
// before there is one.
func metricsFrontier(t *testing.T, base string) float64 {
	t.Helper()
	res, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), `windowd_frontier_ms{pipeline="clicks"} `); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("windowd_frontier_ms %q: %v", v, err)
			}
			return f
		}
	}
	return math.NaN() // the pipeline is not built yet
}

// chromium runs headless chromium on url with the given mode flags
// (--dump-dom, --screenshot=...), letting the page's script run for
// budget of virtual time; it returns stdout and the page's console lines.
func chromium(t *testing.T, bin, profile string, budget time.Duration, url string, mode ...string) (string, []string) {
	t.Helper()
	args := append([]string{
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
		"--disable-component-update", "--disable-default-apps", "--disable-extensions", "--disable-sync",
		"--no-first-run", "--no-default-browser-check", "--metrics-recording-only", "--mute-audio",
		"--user-data-dir=" + profile, "--enable-logging=stderr", "--v=0",
		"--virtual-time-budget=" + strconv.Itoa(int(budget.Milliseconds())),
	}, mode...)
	args = append(args, url)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %v: %v\n%s", mode, err, stderr.String())
	}
	var console []string
	for _, l := range strings.Split(stderr.String(), "\n") {
		if strings.Contains(l, ":CONSOLE") {
			console = append(console, l)
		}
	}
	return stdout.String(), console
}

var (
	domFrontier = regexp.MustCompile(`data-pipeline="clicks" data-frontier-ms="(\d+)"`)
	domNow      = regexp.MustCompile(`data-now-ms="(\d+)"`)
	domLane     = regexp.MustCompile(`<div class="lane[^"]*" data-partition="(\d+)"`)
)

// TestStatusPageInChromium drives Debian's chromium against `windowd run`
// on the quickstart: the page loads without console messages, its script
// replaces the server-rendered view from /api/status, it shows one lane
// per partition and the frontier /metrics reports, it moves as records
// flow, and a screenshot is saved.
func TestStatusPageInChromium(t *testing.T) {
	bin := chromiumPath()
	if bin == "" {
		t.Skip("chromium is not installed: `bash scripts/chromium.sh install` (Debian's chromium package) runs this test")
	}
	if testing.Short() {
		t.Skip("-short: the browser test runs the quickstart for several seconds")
	}
	base := startQuickstartRun(t, nil)
	profile := t.TempDir()

	// Wait for a frontier: the generator's records reach every partition.
	deadline := time.Now().Add(30 * time.Second)
	for f := metricsFrontier(t, base); f != f; f = metricsFrontier(t, base) {
		if time.Now().After(deadline) {
			t.Fatal("no frontier within 30 s")
		}
		time.Sleep(200 * time.Millisecond)
	}

	load := func() (dom string, frontier, now int64) {
		before := metricsFrontier(t, base)
		time.Sleep(2 * snapshotEvery) // what the page reads is at least this recent
		dom, console := chromium(t, bin, profile, 2500*time.Millisecond, base+"/", "--dump-dom")
		after := metricsFrontier(t, base)
		if len(console) > 0 {
			t.Errorf("console messages on the page:\n%s", strings.Join(console, "\n"))
		}
		if !strings.Contains(dom, `<span id="conn">live, every second</span>`) {
			t.Fatalf("the page's script did not render /api/status:\n%s", dom)
		}
		m := domFrontier.FindStringSubmatch(dom)
		if m == nil {
			t.Fatalf("no frontier on the page:\n%s", dom)
		}
		frontier, _ = strconv.ParseInt(m[1], 10, 64)
		if float64(frontier) < before || float64(frontier) > after {
			t.Errorf("page frontier %d outside /metrics' windowd_frontier_ms %.0f..%.0f read around the page load", frontier, before, after)
		}
		n := domNow.FindStringSubmatch(dom)
		now, _ = strconv.ParseInt(n[1], 10, 64)
		return dom, frontier, now
	}
	dom, f1, now1 := load()
	var lanes []string
	for _, m := range domLane.FindAllStringSubmatch(dom, -1) {
		lanes = append(lanes, m[1])
	}
	if got := strings.Join(lanes, ","); got != "0,1,2,3" {
		t.Errorf("lanes for partitions %s, want one per partition 0,1,2,3", got)
	}
	for _, want := range []string{`class="frontier"`, "holds the frontier", `<td class="t-`} {
		if !strings.Contains(dom, want) {
			t.Errorf("page lacks %q", want)
		}
	}

	// The records keep flowing: a second load shows a later frontier.
	time.Sleep(1500 * time.Millisecond)
	_, f2, now2 := load()
	if f2 <= f1 || now2 <= now1 {
		t.Errorf("frontier %d then %d (at %d then %d): the page did not move with the records", f1, f2, now1, now2)
	}

	shot := filepath.Join(t.TempDir(), "status-page.png")
	_, console := chromium(t, bin, profile, 2500*time.Millisecond, base+"/", "--hide-scrollbars", "--window-size=1100,1250", "--screenshot="+shot)
	if len(console) > 0 {
		t.Errorf("console messages on the page:\n%s", strings.Join(console, "\n"))
	}
	if st, err := os.Stat(shot); err != nil || st.Size() < 10_000 {
		t.Fatalf("screenshot %s: %v", shot, err)
	}
	t.Logf("screenshot: %s", shot)
	if dst := os.Getenv("WINDOWD_SCREENSHOT"); dst != "" {
		b, _ := os.ReadFile(shot)
		if err := os.WriteFile(dst, b, 0o644); err != nil {
			t.Error(err)
		}
		t.Logf("screenshot copied to %s", dst)
	}

	// The look-up box, named by the link: the windows of u1 that
	// /api/windows answers, one row each.
	dom, console = chromium(t, bin, profile, 2500*time.Millisecond, base+"/#pipeline=clicks&key=u1", "--dump-dom")
	if len(console) > 0 {
		t.Errorf("console messages on the page:\n%s", strings.Join(console, "\n"))
	}
	rows := regexp.MustCompile(`(?s)<table id="lookup-windows">.*?</table>`).FindString(dom)
	if !strings.Contains(dom, `id="lookup-head"`) || strings.Count(rows, "<tr>") < 2 {
		t.Fatalf("the look-up box did not show u1's windows:\n%s", dom[strings.Index(dom, `id="lookup"`):])
	}
	var answer struct{ Windows []any }
	if err := getJSON(base+"/api/windows?pipeline=clicks&key=u1", &answer); err != nil || len(answer.Windows) == 0 {
		t.Fatalf("/api/windows for u1: %v %v", err, answer)
	}

	// /api/status agrees with the page it feeds.
	res, err := http.Get(base + "/api/status")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var s struct {
		Pipelines []struct {
			Name       string `json:"name"`
			Partitions []any  `json:"partitions"`
		} `json:"pipelines"`
	}
	if err := json.NewDecoder(res.Body).Decode(&s); err != nil || len(s.Pipelines) != 1 || len(s.Pipelines[0].Partitions) != 4 {
		t.Errorf("/api/status: %v, %s", err, fmt.Sprint(s))
	}
}

// getJSON decodes the JSON at url into v.
func getJSON(url string, v any) error {
	res, err := http.Get(url)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("HTTP %d", res.StatusCode)
	}
	return json.NewDecoder(res.Body).Decode(v)
}

// snapshotEvery bounds how old the snapshot behind the page is
// (service/statusapi.go, snapshotInterval).
const snapshotEvery = 250 * time.Millisecond
