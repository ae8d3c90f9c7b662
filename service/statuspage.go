package service

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"html/template"
	"math"
	"net/http"
	"strconv"
	"time"
)

// StatusResponse is the body of GET /api/status (docs/OPERATIONS.md,
// Status page).
type StatusResponse struct {
	NowMS     int64            `json:"now_ms"`
	Pipelines []PipelineStatus `json:"pipelines"`
}

func (s *status) response() StatusResponse {
	now := s.now()
	r := StatusResponse{NowMS: now.UnixMilli(), Pipelines: []PipelineStatus{}}
	for _, p := range s.list() {
		r.Pipelines = append(r.Pipelines, p.statusNow(now))
	}
	return r
}

//go:embed statuspage.html
var statusPageHTML string

var statusPage = template.Must(template.New("status").Funcs(template.FuncMap{
	"clock":   func(ms any) string { return fmtClock(toMS(ms)) },
	"hms":     func(ms int64) string { return fmtClock(ms)[len("2006-01-02 "):] },
	"bytes":   FormatBytes,
	"rate":    func(v float64) string { return fmt.Sprintf("%.1f", v) },
	"percent": func(v float64) string { return fmt.Sprintf("%.0f%%", 100*v) },
	"seconds": func(v *float64) string { return fmt.Sprintf("%.1f", *v) },
	"lane":    laneView,
	"axis":    axisOf,
	"pos":     func(a axis, ms any) string { return fmt.Sprintf("%.2f%%", a.pos(toMS(ms))) },
	"sum": func(m map[string]float64) float64 {
		t := 0.0
		for _, v := range m {
			t += v
		}
		return t
	},
	"age": func(now, at int64) string { return fmtAge(now - at) },
}).Parse(statusPageHTML))

// mountStatusPage serves the status page (server-rendered, then refreshed
// by its script from /api/status) and the JSON behind it.
func mountStatusPage(mux *http.ServeMux, st *status) {
	mux.HandleFunc("GET /api/status", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		enc := json.NewEncoder(w)
		enc.SetIndent("", " ")
		_ = enc.Encode(st.response())
	})
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		// The page holds its styles and script: nothing else to load.
		w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; connect-src 'self'; img-src 'self'")
		if err := statusPage.Execute(w, st.response()); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
		}
	})
}

// toMS takes the page's times, int64 or *int64 (never nil: the template
// checks with "with").
func toMS(v any) int64 {
	switch v := v.(type) {
	case int64:
		return v
	case *int64:
		return *v
	}
	panic(fmt.Sprintf("status page: time of type %T", v))
}

// fmtAge is a span of ms as the page's script writes it (statuspage.html, dur).
func fmtAge(ms int64) string {
	if ms < 60000 {
		return strconv.FormatFloat(math.Round(float64(ms)/100)/10, 'f', -1, 64) + "s"
	}
	return strconv.FormatInt(ms/60000, 10) + "m" + strconv.FormatFloat(math.Round(float64(ms%60000)/100)/10, 'f', -1, 64) + "s"
}

func fmtClock(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("2006-01-02 15:04:05.000")
}

// FormatBytes writes a byte count for people: 512 B, 1.5 KiB, 64.0 MiB
// (the status page; replay's status line).
func FormatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// axis is the event-time span of a pipeline's timeline: its partitions'
// watermarks and the frontier, with a margin. The page's script computes
// the same (statuspage.html, axisOf).
type axis struct{ Lo, Hi int64 }

func axisOf(ps PipelineStatus) axis {
	lo, hi, any := int64(0), int64(0), false
	see := func(v *int64) {
		if v == nil {
			return
		}
		if !any || *v < lo {
			lo = *v
		}
		if !any || *v > hi {
			hi = *v
		}
		any = true
	}
	see(ps.FrontierMS)
	for _, q := range ps.Partitions {
		see(q.WatermarkMS)
	}
	if !any {
		return axis{}
	}
	span := max(hi-lo, 10000)
	return axis{Lo: lo - span/10, Hi: hi + span/10}
}

// pos is ms's position on the axis, in percent.
func (a axis) pos(ms int64) float64 {
	if a.Hi <= a.Lo {
		return 0
	}
	return min(100, max(0, 100*float64(ms-a.Lo)/float64(a.Hi-a.Lo)))
}

// laneState is the words and class of a lane's state.
type laneState struct{ Class, Words string }

func laneView(q PartitionStatus) laneState {
	var s laneState
	add := func(class, words string) {
		s.Class += " " + class
		if s.Words != "" {
			s.Words += ", "
		}
		s.Words += words
	}
	if q.HoldsFrontier {
		add("holds", "holds the frontier")
	}
	if q.Idle {
		add("idle", "idle")
	}
	if q.Lagging {
		add("lagging", fmt.Sprintf("lagging %d records", *q.LagRecords))
	}
	if q.Paused {
		add("paused", "paused")
	}
	return s
}
