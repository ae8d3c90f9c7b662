package service

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/windowd/windowd/kafka"
	"github.com/windowd/windowd/watermark"
	"github.com/windowd/windowd/windowing"
)

// GET /api/windows (docs/OPERATIONS.md, Querying windows): a key's
// windows, or a scan of keys in order, answered by the member that owns
// the key's partition. Another member forwards the request to it (the
// owners' addresses come from the group's description, kafka.GroupMembers);
// a key whose partition no hash names (a key from the value without
// repartition: true, or an input that grew) is asked of every member and
// the answers merged, as is a scan. An answer is whole or a 503: while a
// partition restores, moves or has no reachable owner nothing is
// answered for it.

const (
	queryDefaultLimit = 100
	queryMaxLimit     = 1000
	// queryForwardTimeout bounds a forwarded request (and so a
	// scatter-gather's wait for the slowest member).
	queryForwardTimeout = 2 * time.Second
	// ownersMaxAge: the group's members are described again when older.
	ownersMaxAge = time.Second
	// queryRetryAfter is the Retry-After of a 503, in seconds.
	queryRetryAfter = "1"
	paramForwarded  = "forwarded"
)

// queryRequest is a validated /api/windows request.
type queryRequest struct {
	pipeline   string
	key        string
	scan       bool // prefix given: a scan
	prefix     string
	after      string // continuation: keys after it
	limit      int
	from, to   int64
	forwarded  bool // from another member: answer from local state only
	allowStale bool // a standby replica here may answer
}

// queryError is an answer other than 200, with its status.
type queryError struct {
	status int
	msg    string
}

func (e *queryError) Error() string { return e.msg }

func badRequest(format string, args ...any) error {
	return &queryError{status: http.StatusBadRequest, msg: fmt.Sprintf(format, args...)}
}

func unavailable(format string, args ...any) error {
	return &queryError{status: http.StatusServiceUnavailable, msg: fmt.Sprintf(format, args...)}
}

// parseQuery validates the query string; every problem is a 400 naming it.
func parseQuery(v url.Values) (*queryRequest, error) {
	for name, vals := range v {
		switch name {
		case "pipeline", "key", "prefix", "after", "limit", "from", "to", "allow_stale", paramForwarded:
		default:
			return nil, badRequest("unknown parameter %q (pipeline, key, prefix, after, limit, from, to, allow_stale)", name)
		}
		if len(vals) > 1 {
			return nil, badRequest("parameter %q given %d times", name, len(vals))
		}
	}
	r := &queryRequest{pipeline: v.Get("pipeline"), from: watermark.MinTime, to: watermark.MaxTime, limit: queryDefaultLimit}
	if r.pipeline == "" {
		return nil, badRequest("pipeline is required")
	}
	_, hasKey := v["key"]
	_, r.scan = v["prefix"]
	switch {
	case hasKey && r.scan:
		return nil, badRequest("key and prefix exclude each other: key asks for one key, prefix scans keys")
	case !hasKey && !r.scan:
		return nil, badRequest("key or prefix is required (prefix= with an empty value scans every key)")
	}
	r.key, r.prefix = v.Get("key"), v.Get("prefix")
	var err error
	if s := v.Get("from"); s != "" {
		if r.from, err = parseQueryTime("from", s); err != nil {
			return nil, err
		}
	}
	if s := v.Get("to"); s != "" {
		if r.to, err = parseQueryTime("to", s); err != nil {
			return nil, err
		}
	}
	if r.from >= r.to {
		return nil, badRequest("from (%d) must be before to (%d)", r.from, r.to)
	}
	if s, ok := v["limit"]; ok {
		if !r.scan {
			return nil, badRequest("limit applies to a scan (prefix), not to a key")
		}
		n, err := strconv.Atoi(s[0])
		if err != nil || n < 1 || n > queryMaxLimit {
			return nil, badRequest("limit %q: an integer from 1 to %d", s[0], queryMaxLimit)
		}
		r.limit = n
	}
	if s, ok := v["after"]; ok {
		if !r.scan {
			return nil, badRequest("after applies to a scan (prefix), not to a key")
		}
		b, err := base64.RawURLEncoding.DecodeString(s[0])
		if err != nil {
			return nil, badRequest("after %q: not a continuation token of this API (the \"next\" of a scan's answer)", s[0])
		}
		r.after = string(b)
	}
	r.forwarded = v.Get(paramForwarded) != ""
	if s, ok := v["allow_stale"]; ok {
		b, err := strconv.ParseBool(s[0])
		if err != nil {
			return nil, badRequest("allow_stale %q: true or false", s[0])
		}
		if b && r.scan {
			return nil, badRequest("allow_stale applies to a key, not to a scan")
		}
		r.allowStale = b
	}
	return r, nil
}

// parseQueryTime reads an event time: Unix milliseconds or RFC 3339.
func parseQueryTime(name, s string) (int64, error) {
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
		return ms, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return 0, badRequest("%s %q: Unix milliseconds or an RFC 3339 time (2026-12-05T10:00:00Z)", name, s)
	}
	return t.UnixMilli(), nil
}

// windowsAnswer is the JSON answer (docs/OPERATIONS.md, Querying
// windows). Windows are JSON objects as windowing.AppendQueryWindow
// writes them.
type windowsAnswer struct {
	Pipeline string `json:"pipeline"`
	Key      string `json:"key,omitempty"`
	// FrontierMS and FinalThroughMS are of the state answered from (the
	// least of the members' for a merged answer); null before the
	// frontier is known.
	FrontierMS     *int64            `json:"frontier_ms"`
	FinalThroughMS *int64            `json:"final_through_ms"`
	Instances      []string          `json:"instances"` // the members that answered
	Partitions     []int32           `json:"partitions"`
	Windows        []json.RawMessage `json:"windows,omitzero"`
	Keys           []keyAnswer       `json:"keys,omitzero"`
	Next           *string           `json:"next,omitempty"` // a scan: the continuation token; none on the last page
	// Standby: answered from a standby replica (allow_stale): its state
	// reaches changelog offset ChangelogPosition, ChangelogBehind
	// records before the changelog's end (null when that could not be
	// listed).
	Standby           bool   `json:"standby,omitempty"`
	ChangelogPosition *int64 `json:"changelog_position,omitempty"`
	ChangelogBehind   *int64 `json:"changelog_behind,omitempty"`
}

type keyAnswer struct {
	Key       string            `json:"key"`
	Partition int32             `json:"partition"`
	Windows   []json.RawMessage `json:"windows"`
}

// mountQueryAPI serves GET /api/windows from the running pipelines.
func mountQueryAPI(mux *http.ServeMux, st *status, m *metrics) {
	client := &http.Client{Timeout: queryForwardTimeout}
	mux.HandleFunc("GET /api/windows", func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		req, err := parseQuery(r.URL.Query())
		var p *pipeline
		if err == nil {
			if p = st.pipeline(req.pipeline); p == nil && st.configured[req.pipeline] {
				err = unavailable("pipeline %q is starting", req.pipeline)
			} else if p == nil {
				err = &queryError{status: http.StatusNotFound, msg: fmt.Sprintf("no pipeline %q is configured", req.pipeline)}
			} else if p.cfg.Join != nil {
				err = &queryError{status: http.StatusNotFound, msg: fmt.Sprintf("pipeline %q is a join: it has no windows to query; its rows are in its output topic (docs/SEMANTICS.md, Joins)", req.pipeline)}
			}
		}
		var ans *windowsAnswer
		outcome := "ok"
		if err == nil {
			ans, outcome, err = p.query(r.Context(), client, req)
		}
		kind, name := "point", "?"
		if req != nil {
			name = req.pipeline
			if req.scan {
				kind = "scan"
			}
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		if err != nil {
			status := http.StatusInternalServerError
			var qe *queryError
			if errors.As(err, &qe) {
				status = qe.status
			}
			switch status {
			case http.StatusBadRequest, http.StatusNotFound:
				outcome = "bad_request"
			case http.StatusServiceUnavailable:
				outcome = "unavailable"
				w.Header().Set("Retry-After", queryRetryAfter)
			default:
				outcome = "error"
			}
			w.WriteHeader(status)
			_ = json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
		} else {
			_ = json.NewEncoder(w).Encode(ans)
		}
		if p != nil {
			m.queries.WithLabelValues(name, kind, outcome).Inc()
			m.queryLatency.WithLabelValues(name, kind).Observe(time.Since(start).Seconds())
		}
	})
}

// pipeline returns the running pipeline named name, or nil.
func (s *status) pipeline(name string) *pipeline {
	for _, p := range s.list() {
		if p.orig.Name == name {
			return p
		}
	}
	return nil
}

// query answers req: from local state, by forwarding to the key's owner,
// or by asking every member. outcome is "ok" or "forwarded".
func (p *pipeline) query(ctx context.Context, client *http.Client, req *queryRequest) (*windowsAnswer, string, error) {
	if req.forwarded {
		// Only what this instance's state holds, and for a key a hash
		// places, only its partition: the sender's view of the owners
		// may be out of date.
		var want []int32
		if part, ok := p.q.keyPartition(req.key); ok && !req.scan {
			want = []int32{part}
		}
		a, err := p.answerLocal(req, want)
		return a, "ok", err
	}
	if !req.scan {
		if part, ok := p.q.keyPartition(req.key); ok {
			a, err := p.answerLocal(req, []int32{part})
			if !errors.Is(err, errNotHere) {
				return a, "ok", err
			}
			if req.allowStale {
				a, err := p.answerStandby(ctx, req, part)
				if !errors.Is(err, errNotHere) {
					return a, "standby", err
				}
			}
			owner, err := p.ownerOf(ctx, part, false)
			if err != nil {
				return nil, "", err
			}
			if a, err = forward(ctx, client, owner, req); err != nil {
				// The owner may have moved since the group was last
				// described: once more, with a fresh description.
				if again, oerr := p.ownerOf(ctx, part, true); oerr == nil && again != owner {
					a, err = forward(ctx, client, again, req)
				}
			}
			return a, "forwarded", err
		}
	}
	a, err := p.gather(ctx, client, req)
	return a, "ok", err
}

// answerLocal answers req from this instance's state: the partitions want
// (nil: every partition it answers for).
func (p *pipeline) answerLocal(req *queryRequest, want []int32) (*windowsAnswer, error) {
	return p.answerFrom(req, want, false)
}

// answerStandby answers req from this instance's standby replica of part,
// with how far it is behind the changelog's end.
func (p *pipeline) answerStandby(ctx context.Context, req *queryRequest, part int32) (*windowsAnswer, error) {
	a, err := p.answerFrom(req, []int32{part}, true)
	if err != nil {
		return nil, err
	}
	lctx, cancel := context.WithTimeout(ctx, queryForwardTimeout)
	defer cancel()
	if ends, err := p.adm.ListEndOffsets(lctx, p.clTopic); err == nil {
		if o, ok := ends.Lookup(p.clTopic, part); ok && o.Err == nil {
			behind := max(0, o.Offset-*a.ChangelogPosition)
			a.ChangelogBehind = &behind
		}
	}
	return a, nil
}

// answerFrom answers req from local state: the partitions want (nil:
// every partition answered here), or the standby replica of want[0].
func (p *pipeline) answerFrom(req *queryRequest, want []int32, standby bool) (*windowsAnswer, error) {
	var la *localAnswer
	var err error
	if req.scan {
		la, err = p.scanLocal(req.prefix, req.after, req.limit, req.from, req.to)
	} else {
		la, err = p.lookupLocal(req.key, want, standby, req.from, req.to)
	}
	switch {
	case errors.Is(err, errNotHere):
		return nil, fmt.Errorf("%w: %w", unavailable("this instance does not own the key's partition now (a rebalance or restore is under way)"), errNotHere)
	case errors.Is(err, errBusy):
		return nil, unavailable("this instance answers for nothing now (a rebalance or rollback is under way)")
	case errors.Is(err, errTooManyWindows):
		return nil, badRequest("a key holds more than %d windows in [from, to): narrow from and to", maxAnswerWindows)
	case err != nil:
		return nil, err
	}
	specs := p.cfg.Spec.Aggregates
	a := &windowsAnswer{Pipeline: p.orig.Name, Instances: []string{p.queryAddr}, Partitions: la.parts}
	if standby {
		pos := la.position
		a.Standby, a.ChangelogPosition = true, &pos
	}
	if f := la.frontier; f != watermark.MinTime {
		a.FrontierMS = &f
	}
	if ft, ok := finalThrough(la.completeMin, p.cfg.Spec.AllowedLateness); ok && !standby {
		a.FinalThroughMS = &ft
	}
	windowsJSON := func(ws []windowing.WindowState) []json.RawMessage {
		out := make([]json.RawMessage, len(ws))
		for i := range ws {
			out[i] = windowing.AppendQueryWindow(nil, &ws[i], specs)
		}
		return out
	}
	if req.scan {
		a.Keys = []keyAnswer{}
		for _, k := range la.keys {
			a.Keys = append(a.Keys, keyAnswer{Key: k.key, Partition: k.partition, Windows: windowsJSON(k.windows)})
		}
		a.Next = nextToken(la.page)
		return a, nil
	}
	a.Key = req.key
	a.Windows = []json.RawMessage{}
	for _, k := range la.keys {
		a.Windows = append(a.Windows, windowsJSON(k.windows)...)
	}
	return a, nil
}

// nextToken is a scan page's "next": null when the scan is complete.
func nextToken(c pageCut) *string {
	if !c.cut {
		return nil
	}
	t := base64.RawURLEncoding.EncodeToString([]byte(c.cutoff))
	return &t
}

// ownerCache is the group's members as last described.
type ownerCache struct {
	sync.Mutex
	at      time.Time
	members []kafka.GroupMember
}

// members returns the group's members, described at most ownersMaxAge
// ago (fresh: described now).
func (p *pipeline) members(ctx context.Context, fresh bool) ([]kafka.GroupMember, error) {
	c := &p.q.owners
	c.Lock()
	defer c.Unlock()
	if !fresh && c.members != nil && time.Since(c.at) < ownersMaxAge {
		return c.members, nil
	}
	ms, err := kafka.GroupMembers(ctx, p.adm, p.cfg.Input.Group, p.cfg.Input.Topic)
	if err != nil {
		return nil, unavailable("the group's members cannot be listed (%v)", err)
	}
	c.at, c.members = time.Now(), ms
	return ms, nil
}

// ownerOf returns the query address of the member owning part (fresh:
// from a description of the group made now).
func (p *pipeline) ownerOf(ctx context.Context, part int32, fresh bool) (string, error) {
	ms, err := p.members(ctx, fresh)
	if err != nil {
		return "", err
	}
	for _, m := range ms {
		if slices.Contains(m.Partitions, part) {
			if m.Address == "" || m.Address == p.queryAddr {
				break
			}
			return m.Address, nil
		}
	}
	return "", unavailable("partition %d has no member that answers for it now (a rebalance or restore is under way)", part)
}

// forward asks the member at addr to answer req from its own state.
func forward(ctx context.Context, client *http.Client, addr string, req *queryRequest) (*windowsAnswer, error) {
	v := url.Values{"pipeline": {req.pipeline}, paramForwarded: {"1"}}
	if req.scan {
		v.Set("prefix", req.prefix)
		v.Set("limit", strconv.Itoa(req.limit))
		if req.after != "" {
			v.Set("after", base64.RawURLEncoding.EncodeToString([]byte(req.after)))
		}
	} else {
		v.Set("key", req.key)
	}
	if req.from != watermark.MinTime {
		v.Set("from", strconv.FormatInt(req.from, 10))
	}
	if req.to != watermark.MaxTime {
		v.Set("to", strconv.FormatInt(req.to, 10))
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/api/windows?"+v.Encode(), nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(hreq)
	if err != nil {
		return nil, unavailable("the owner %s did not answer (%v)", addr, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, unavailable("the owner %s did not answer (%v)", addr, err)
	}
	if resp.StatusCode != http.StatusOK {
		var e struct{ Error string }
		_ = json.Unmarshal(body, &e)
		if resp.StatusCode >= 500 {
			return nil, unavailable("the owner %s: %s", addr, e.Error)
		}
		return nil, &queryError{status: resp.StatusCode, msg: fmt.Sprintf("the owner %s: %s", addr, e.Error)}
	}
	a := &windowsAnswer{}
	if err := json.Unmarshal(body, a); err != nil {
		return nil, fmt.Errorf("the owner %s: %w", addr, err)
	}
	return a, nil
}

// gather asks every member (this one from its state) and merges the
// answers: a key from the value, or a scan. Every partition of the
// pipeline must be answered for, else the answer is a 503.
func (p *pipeline) gather(ctx context.Context, client *http.Client, req *queryRequest) (*windowsAnswer, error) {
	ms, err := p.members(ctx, false)
	if err != nil {
		return nil, err
	}
	answers := make([]*windowsAnswer, len(ms))
	errs := make([]error, len(ms))
	var wg sync.WaitGroup
	for i, m := range ms {
		switch {
		case m.Address == p.queryAddr:
			answers[i], errs[i] = p.answerLocal(req, nil)
		case m.Address == "":
			errs[i] = unavailable("member %s publishes no query address (an older windowd)", m.ID)
		default:
			wg.Add(1)
			go func() {
				defer wg.Done()
				answers[i], errs[i] = forward(ctx, client, m.Address, req)
			}()
		}
	}
	wg.Wait()
	for _, err := range errs {
		// A refusal of the request itself (a 400) is the answer.
		if qe := (*queryError)(nil); errors.As(err, &qe) && qe.status < 500 {
			return nil, err
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, unavailable("not every member answered: %v", err)
	}
	return p.merge(req, answers)
}

// merge joins the members' answers to one, or 503 when some partition
// was answered by none.
func (p *pipeline) merge(req *queryRequest, answers []*windowsAnswer) (*windowsAnswer, error) {
	out := &windowsAnswer{Pipeline: p.orig.Name, Partitions: []int32{}}
	if req.scan {
		out.Keys = []keyAnswer{}
	} else {
		out.Key, out.Windows = req.key, []json.RawMessage{}
	}
	var page pageCut
	for _, a := range answers {
		out.Instances = append(out.Instances, a.Instances...)
		out.Partitions = append(out.Partitions, a.Partitions...)
		out.Windows = append(out.Windows, a.Windows...)
		out.Keys = append(out.Keys, a.Keys...)
		if a.Next != nil {
			b, err := base64.RawURLEncoding.DecodeString(*a.Next)
			if err != nil {
				return nil, fmt.Errorf("a member's continuation %q: %w", *a.Next, err)
			}
			page.at(string(b))
		}
		for _, x := range []struct {
			dst **int64
			src *int64
		}{{&out.FrontierMS, a.FrontierMS}, {&out.FinalThroughMS, a.FinalThroughMS}} {
			if x.src == nil || (*x.dst != nil && **x.dst <= *x.src) {
				continue
			}
			v := *x.src
			*x.dst = &v
		}
	}
	slices.Sort(out.Partitions)
	if n := len(out.Partitions); n != len(slices.Compact(slices.Clone(out.Partitions))) {
		return nil, unavailable("two members answered for one partition (a rebalance is under way)")
	}
	for i := range p.q.partitions {
		if _, found := slices.BinarySearch(out.Partitions, i); !found {
			return nil, unavailable("partition %d is answered by no member now (a rebalance or restore is under way)", i)
		}
	}
	if req.scan {
		slices.SortFunc(out.Keys, func(x, y keyAnswer) int { return compareKeys(x.Key, x.Partition, y.Key, y.Partition) })
		out.Keys = boundPage(&page, out.Keys, req.limit, func(k keyAnswer) (string, int) { return k.Key, len(k.Windows) })
		out.Next = nextToken(page)
	}
	return out, nil
}
