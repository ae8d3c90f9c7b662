// Package evolve compares the definition a pipeline's state was built under
// with the pipeline as now configured, and says for every difference what
// windowd does with it (docs/OPERATIONS.md, Changing a deployed pipeline).
// It is pure: the service and replay store the Definition with the state
// and act on the Plan.
package evolve

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"

	"github.com/windowd/windowd/config"
	"github.com/windowd/windowd/windowing"
)

// version of the stored form; a newer one is refused, never guessed at.
const version = 1

// Definition is what a pipeline's state means: the window, the key, the
// lateness, triggers and accumulation, each aggregate's identity and the
// input partitions. Its JSON form is stored with the state (the state
// directory's metadata, and a record of every changelog partition).
type Definition struct {
	Version     int    `json:"version"`
	Pipeline    string `json:"pipeline"`
	Window      string `json:"window"`
	Key         string `json:"key"`
	Repartition bool   `json:"repartition,omitempty"`
	Lateness    int64  `json:"allowed_lateness_ms"`
	// Sealed: windows ending at or before it expired under a smaller
	// allowed_lateness and never reopen (absent: none).
	Sealed       *int64 `json:"sealed_through,omitempty"`
	Trigger      string `json:"trigger"`
	Accumulation string `json:"accumulation"`
	// Join: the join a join's held records were taken under (absent: not
	// a join).
	Join string `json:"join,omitempty"`
	// Topics: the input topics, in the order of `inputs` (absent: stored
	// before windowd kept them). The state holds their offsets.
	Topics []string `json:"input_topics,omitempty"`
	// Partitions of the input topic the state was keyed by (0: unknown).
	Partitions int32 `json:"input_partitions,omitempty"`
	// GrewFrom is the input's partition count before partitions were
	// first added to it (0: never); the count stays a multiple of it
	// (Grow).
	GrewFrom   int32       `json:"grew_from,omitempty"`
	Aggregates []Aggregate `json:"aggregates"`
	// Layouts keeps every earlier aggregate layout (aggregates in order,
	// and the accumulation mode) key state may still be written in, by
	// its tag (LayoutTag; tag 0: state written before windowd stored
	// definitions).
	Layouts map[uint32][]Aggregate `json:"layouts,omitempty"`
	// History lists the earlier layouts' tags, oldest first: state of an
	// earlier layout is carried through every change since, so that a
	// removed aggregate's state is not taken up by a later one of the
	// same identity.
	History []uint32 `json:"history,omitempty"`
	// Drain is the last drain of a window change (kept once finished: the
	// next one must wait for it).
	Drain *Drain `json:"drain,omitempty"`
	// drainWindow is the configuration's drain window (Of), which the
	// engine needs while the drain runs; not stored.
	drainWindow *windowing.WindowSpec
}

// Drain is a window change that finishes the previous windows first
// (windowing.Drain): records before Cut go to the windows of From.
type Drain struct {
	From string `json:"from"` // the previous window, as Definition.Window
	Cut  int64  `json:"cut_ms"`
	End  int64  `json:"end_ms"` // windowing.Drain.End
}

// LayoutTag names d's aggregate layout in the key state written under
// it: a hash of the aggregates' names and identities in order and the
// mode; never 0. Names count: two layouts of the same identities under
// other names (a count removed, another added) are different layouts.
func (d *Definition) LayoutTag() uint32 { return layoutTag(withMode(d.Aggregates, d.Accumulation)) }

func layoutTag(l []Aggregate) uint32 {
	h := fnv.New32a()
	for _, a := range l {
		h.Write([]byte(a.Name))
		h.Write([]byte{0})
		h.Write([]byte(a.identity()))
		h.Write([]byte{0})
	}
	if t := h.Sum32(); t != 0 {
		return t
	}
	return 1
}

// Aggregate is one aggregate's identity: Name is what panes call it; Op,
// Input and the options are what its state means.
type Aggregate struct {
	Name             string               `json:"name"`
	Op               string               `json:"op"`
	Input            string               `json:"input,omitempty"` // field path, or "expr:" + CEL source
	From             string               `json:"from,omitempty"`  // the input topic it reads, by its as (several inputs)
	Precision        uint8                `json:"precision,omitempty"`
	Quantiles        []windowing.Quantile `json:"quantiles,omitempty"`
	RelativeAccuracy float64              `json:"relative_accuracy,omitempty"`
	MaxBuckets       int                  `json:"max_buckets,omitempty"`
	K                int                  `json:"k,omitempty"`
	Capacity         int                  `json:"capacity,omitempty"`
}

// identity is what an aggregate's state means, its name aside.
func (a Aggregate) identity() string {
	c := a
	c.Name = ""
	b, _ := json.Marshal(c)
	return string(b)
}

// describe names the aggregate in messages: name: op(input) [options].
func (a Aggregate) describe() string {
	s := a.Name + ": " + a.Op
	if a.Input != "" {
		s += "(" + a.Input + ")"
	}
	if a.From != "" {
		s += " of input " + a.From
	}
	var opts []string
	if a.Precision != 0 {
		opts = append(opts, "precision "+strconv.Itoa(int(a.Precision)))
	}
	if len(a.Quantiles) > 0 {
		var qs []string
		for _, q := range a.Quantiles {
			qs = append(qs, q.Text)
		}
		opts = append(opts, "quantiles "+strings.Join(qs, ","), "relative_accuracy "+strconv.FormatFloat(a.RelativeAccuracy, 'g', -1, 64),
			"max_buckets "+strconv.Itoa(a.MaxBuckets))
	}
	if a.K != 0 {
		opts = append(opts, "k "+strconv.Itoa(a.K), "capacity "+strconv.Itoa(a.Capacity))
	}
	if len(opts) > 0 {
		s += " [" + strings.Join(opts, ", ") + "]"
	}
	return s
}

// Of returns the definition of pipeline p (the configured pipeline, not
// stage 2's) over an input of partitions partitions (0: unknown, as in a
// replay).
func Of(p *config.Pipeline, partitions int32) *Definition {
	d := &Definition{
		Version:      version,
		Pipeline:     p.Name,
		Window:       windowText(p.Spec.Window) + endsText(p),
		Key:          p.Key.String(),
		Repartition:  p.Repartition != nil,
		Lateness:     p.Spec.AllowedLateness,
		Trigger:      triggerText(p.Spec.Trigger),
		Accumulation: p.Spec.Mode.String(),
		Partitions:   partitions,
	}
	if dr := p.Drain; dr != nil {
		d.Drain = &Drain{From: windowText(dr.Window), Cut: dr.Until, End: windowing.DrainEnd(dr.Window, dr.Until)}
		d.drainWindow = &dr.Window
	}
	for i, a := range p.Spec.Aggregates {
		var x *string
		if i < len(p.AggregateExprs) && p.AggregateExprs[i] != nil {
			s := "expr:" + p.AggregateExprs[i].Source()
			x = &s
		}
		g := aggregateOf(a, x)
		if i < len(p.AggregateInputs) && p.AggregateInputs[i] >= 0 {
			g.From = p.Inputs[p.AggregateInputs[i]].As
		}
		d.Aggregates = append(d.Aggregates, g)
	}
	if j := p.Join; j != nil {
		d.Join = joinText(p)
		d.Trigger = "early_every=" + strconv.FormatInt(j.EarlyEvery, 10) + "ms"
	}
	d.Topics = p.InputTopics()
	if p.Inputs != nil {
		// Each input's key: a change of any is a change of the key.
		keys := make([]string, len(p.Inputs))
		for i, in := range p.Inputs {
			keys[i] = in.As + ": " + in.Key.String()
		}
		d.Key = strings.Join(keys, "; ")
	}
	return d
}

func aggregateOf(a windowing.AggSpec, exprSrc *string) Aggregate {
	g := Aggregate{Name: a.Name, Op: a.Op.String(), Input: a.Field, Precision: a.Precision,
		Quantiles: a.Quantiles, RelativeAccuracy: a.RelativeAccuracy, MaxBuckets: a.MaxBuckets, K: a.K, Capacity: a.Capacity}
	if exprSrc != nil {
		g.Input = *exprSrc
	}
	return g
}

// spec rebuilds the AggSpec that decodes state written under a: its op and
// the options its encoding depends on.
func (a Aggregate) spec() (windowing.AggSpec, error) {
	s := windowing.AggSpec{Name: a.Name, Precision: a.Precision, Quantiles: a.Quantiles,
		RelativeAccuracy: a.RelativeAccuracy, MaxBuckets: a.MaxBuckets, K: a.K, Capacity: a.Capacity}
	if !strings.HasPrefix(a.Input, "expr:") {
		s.Field = a.Input
	}
	for op := windowing.Count; op <= windowing.Ratio; op++ {
		if op.String() == a.Op {
			s.Op = op
			return s, nil
		}
	}
	return s, fmt.Errorf("aggregate %s: unknown op %q", a.Name, a.Op)
}

// endsText is what ends a transaction window of p: its close_when and
// discard_when, part of the window's definition.
func endsText(p *config.Pipeline) string {
	s := ""
	if p.CloseWhen != nil {
		s += " close_when=" + strconv.Quote(p.CloseWhen.Source())
	}
	if p.DiscardWhen != nil {
		s += " discard_when=" + strconv.Quote(p.DiscardWhen.Source())
	}
	return s
}

func windowText(w windowing.WindowSpec) string {
	s := w.Kind.String()
	add := func(name string, v int64) { s += " " + name + "=" + strconv.FormatInt(v, 10) + "ms" }
	switch w.Kind {
	case windowing.Session:
		add("gap", w.Gap)
		return s
	case windowing.Transaction:
		add("timeout", w.Gap)
		return s
	case windowing.Sliding:
		add("size", w.Size)
		return s
	case windowing.CountWindow:
		return s + " size=" + strconv.FormatInt(w.Size, 10) + " hop=" + strconv.FormatInt(w.Hop, 10) + " records"
	}
	if c := w.Calendar; c != nil {
		s += " unit=" + c.Unit.String() + " size=" + strconv.FormatInt(c.Size, 10) + " hop=" + strconv.FormatInt(c.Hop, 10) +
			" time_zone=" + c.Zone.String()
		if c.Unit == windowing.Week {
			s += " week_start=" + c.WeekStart.String()
		}
		if w.Step != 0 {
			add("step", w.Step)
		}
		return s
	}
	add("size", w.Size)
	add("hop", w.Hop)
	add("offset", w.Offset)
	if w.Step != 0 {
		add("step", w.Step)
	}
	return s
}

// joinText describes p's join: its kind, what matches and its sides.
func joinText(p *config.Pipeline) string {
	j := p.Join
	s := j.Kind.String()
	if j.Interval {
		s += " interval [" + strconv.FormatInt(j.Lower, 10) + "ms, " + strconv.FormatInt(j.Upper, 10) + "ms]"
	} else {
		s += " window " + windowText(j.Window)
	}
	return s + " left=" + p.Inputs[j.Left].As + " right=" + p.Inputs[j.Right].As
}

func triggerText(t windowing.TriggerSpec) string {
	return fmt.Sprintf("early_count=%d early_every=%dms on_time=%t late=%t late_every=%dms closing=%s",
		t.EarlyCount, t.EarlyEvery, t.OnTime, t.Late, t.LateEvery, t.Closing)
}

// Encode returns the stored form.
func (d *Definition) Encode() []byte {
	b, err := json.Marshal(d)
	if err != nil {
		panic(err) // plain strings and numbers only
	}
	return b
}

// Decode reads a stored definition.
func Decode(b []byte) (*Definition, error) {
	var d Definition
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("stored pipeline definition: %w", err)
	}
	if d.Version < 1 || d.Version > version {
		return nil, fmt.Errorf("stored pipeline definition: version %d (this windowd reads up to %d): written by a newer windowd", d.Version, version)
	}
	return &d, nil
}
