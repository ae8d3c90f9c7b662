package evolve

import (
	"fmt"
	"slices"
	"strings"

	"github.com/windowd/windowd/windowing"
)

// Class says what windowd does with one change.
type Class uint8

// Classes of change (docs/OPERATIONS.md, Changing a deployed pipeline).
const (
	// Applied: the change takes effect at once, state kept.
	Applied Class = iota + 1
	// Rule: the change takes effect by a documented rule (Change.Rule).
	Rule
	// Incompatible: windowd refuses to start on this state.
	Incompatible
)

func (c Class) String() string {
	switch c {
	case Applied:
		return "compatible, applied"
	case Rule:
		return "compatible, by rule"
	case Incompatible:
		return "incompatible"
	}
	return fmt.Sprintf("Class(%d)", uint8(c))
}

// Change is one difference between the stored definition and the new one.
type Change struct {
	What  string // e.g. "window", "aggregate s"
	From  string
	To    string
	Class Class
	Rule  string // what windowd does, and why
}

func (c Change) String() string {
	s := fmt.Sprintf("%s: %s", c.Class, c.What)
	if c.From != "" || c.To != "" {
		s += fmt.Sprintf(": %s → %s", orNone(c.From), orNone(c.To))
	}
	if c.Rule != "" {
		s += ": " + c.Rule
	}
	return s
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// Plan is what a start on stored state does.
type Plan struct {
	Changes []Change
	// Next is the definition to store once the plan is applied: the new
	// one, with the aggregate layout history it needs.
	Next *Definition
}

// Refused reports whether some change is incompatible.
func (p *Plan) Refused() bool {
	for _, c := range p.Changes {
		if c.Class == Incompatible {
			return true
		}
	}
	return false
}

// Text renders the plan for the log and `windowd plan`.
func (p *Plan) Text() string {
	if len(p.Changes) == 0 {
		return "no change to the pipeline's state definition"
	}
	var b strings.Builder
	for _, c := range p.Changes {
		b.WriteString("  - " + c.String() + "\n")
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// RefusalHelp is the choices an operator has when a plan is refused.
const RefusalHelp = "choices: (1) deploy the previous configuration again; " +
	"(2) for a window change, finish the old windows first: add drain: {window: <the previous window>, until: <the cut, an RFC 3339 time>} to the pipeline (docs/OPERATIONS.md, Draining); " +
	"(3) start the changed pipeline on fresh state: stop every instance, run `windowd reset --config FILE --pipeline NAME --to committed|earliest|latest|<RFC 3339 time>` " +
	"(it deletes the pipeline's changelog and this instance's state directory, and sets the group's offsets; other instances discard their state at start), " +
	"then start every instance (docs/OPERATIONS.md, Changing a deployed pipeline)"

// Error is a refused plan as an error.
func (p *Plan) Error(where string) error {
	return fmt.Errorf("pipeline %s: the configuration changed in a way its state (%s) cannot follow:\n%s\n%s", p.Next.Pipeline, where, p.Text(), RefusalHelp)
}

// Compare plans a start on state stored under old with the pipeline now
// defined as new.
func Compare(old, new *Definition) *Plan {
	p := &Plan{}
	next := *new
	next.Layouts, next.Sealed, next.History, next.GrewFrom = old.Layouts, old.Sealed, old.History, old.GrewFrom
	add := func(c Change) { p.Changes = append(p.Changes, c) }
	next.Drain = old.Drain
	switch {
	case old.Window == new.Window:
		if old.Drain != nil && new.Drain != nil && *old.Drain != *new.Drain {
			add(Change{What: "drain", From: old.Drain.From + " until " + windowing.FormatTime(old.Drain.Cut), To: new.Drain.From + " until " + windowing.FormatTime(new.Drain.Cut), Class: Rule,
				Rule: "the state's window is already the configured one: the stored drain goes on as it began (a running drain needs drain.window to stay its previous window), and drain.until cannot move"})
		}
	case new.Drain != nil && new.Drain.From == old.Window:
		next.Drain = new.Drain
		add(Change{What: "window", From: old.Window, To: new.Window, Class: Rule, Rule: drainRule(new.Drain)})
	default:
		c := Change{What: "window", From: old.Window, To: new.Window, Class: Incompatible,
			Rule: "open windows were built under the old definition; their records cannot be re-assigned"}
		if new.Drain != nil {
			c.Rule += fmt.Sprintf("; drain.window (%s) is not the window the state was built under", new.Drain.From)
		} else {
			c.Rule += "; to finish the old windows first, add drain: {window: <the old window>, until: <the cut, an RFC 3339 time>} to the pipeline"
		}
		add(c)
	}
	switch {
	case inputsAdded(old, new):
		add(Change{What: "inputs", From: strings.Join(old.Topics, ", "), To: strings.Join(new.Topics, ", "), Class: Rule, Rule: InputsAddedRule})
	default:
		if old.Key != new.Key {
			add(Change{What: "key", From: old.Key, To: new.Key, Class: Incompatible,
				Rule: "state is grouped by the old key"})
		}
		if len(old.Topics) > 0 && len(new.Topics) > 0 && !slices.Equal(old.Topics, new.Topics) {
			add(Change{What: "input topics", From: strings.Join(old.Topics, ", "), To: strings.Join(new.Topics, ", "), Class: Incompatible,
				Rule: "the state holds the old topics' offsets, watermarks and records; read other topics on fresh state, or under another group " +
					"(a pipeline of several inputs may add inputs after the last one, each earlier input kept in its place with its key)"})
		}
	}
	if old.Join != new.Join {
		add(Change{What: "join", From: old.Join, To: new.Join, Class: Incompatible,
			Rule: "the held records were taken, matched and emitted under the old join (or are not records at all); run the new one on fresh state or under another group"})
	}
	if old.Repartition != new.Repartition {
		add(Change{What: "repartition", From: fmt.Sprint(old.Repartition), To: fmt.Sprint(new.Repartition), Class: Incompatible,
			Rule: "state is partitioned by another topic"})
	}
	if old.Partitions > 0 && new.Partitions > 0 && old.Partitions != new.Partitions && !new.Repartition {
		c := Change{What: "input partitions", From: fmt.Sprint(old.Partitions), To: fmt.Sprint(new.Partitions), Class: Rule, Rule: GrowthRule}
		g := *old
		if err := g.Grow(new.Partitions); err != nil {
			c.Class, c.Rule = Incompatible, err.Error()
		}
		next.GrewFrom = g.GrewFrom
		add(c)
	}
	if old.Lateness != new.Lateness {
		add(Change{What: "allowed_lateness", From: fmt.Sprintf("%dms", old.Lateness), To: fmt.Sprintf("%dms", new.Lateness), Class: Rule,
			Rule: "windows expired under the old lateness stay closed (no pane id repeats); every open window takes the deadline end + new lateness at once"})
	}
	if old.Trigger != new.Trigger {
		add(Change{What: "trigger", From: old.Trigger, To: new.Trigger, Class: Applied,
			Rule: "decides when panes fire from the next record or timer on"})
	}
	if old.Accumulation != new.Accumulation {
		add(Change{What: "accumulation", From: old.Accumulation, To: new.Accumulation, Class: Rule,
			Rule: "a window open at the change emits its next pane in its old mode and continues in the new one after it (a discarding window that has emitted a pane stays discarding until it closes); windows opened after it use the new one"})
	}
	aggregateChanges(old.Aggregates, new.Aggregates, add)
	if old.LayoutTag() != new.LayoutTag() {
		next.Layouts = map[uint32][]Aggregate{}
		for t, l := range old.Layouts {
			next.Layouts[t] = l
		}
		next.Layouts[old.LayoutTag()] = withMode(old.Aggregates, old.Accumulation)
		next.History = append(append([]uint32(nil), old.History...), old.LayoutTag())
	}
	p.Next = &next
	return p
}

// withMode stores a layout's accumulation mode with its aggregates, as a
// first pseudo-aggregate of op "mode:<mode>" (read back by splitMode).
func withMode(aggs []Aggregate, mode string) []Aggregate {
	return append([]Aggregate{{Op: "mode:" + mode}}, aggs...)
}

// aggregateChanges reports each aggregate change to add.
func aggregateChanges(old, new []Aggregate, add func(Change)) {
	from := match(old, new)
	used := map[int]bool{}
	for i, a := range new {
		j := from[i]
		switch {
		case j < 0:
			if k := byName(old, a.Name); k >= 0 {
				add(Change{What: "aggregate " + a.Name, From: old[k].describe(), To: a.describe(), Class: Incompatible,
					Rule: "its state holds the old op/input; give the new aggregate a new name (it starts empty and is marked partial in open windows' panes), or start fresh"})
				used[k] = true
				continue
			}
			add(Change{What: "aggregate " + a.Name, To: a.describe(), Class: Applied,
				Rule: "added: starts empty; panes of windows opened before the change list it under \"partial\""})
		case old[j].Name != a.Name:
			used[j] = true
			add(Change{What: "aggregate " + old[j].Name, From: old[j].Name, To: a.Name, Class: Applied, Rule: "renamed in place: its state kept"})
		default:
			used[j] = true
		}
	}
	for j, a := range old {
		if !used[j] && !contains(from, j) {
			add(Change{What: "aggregate " + a.Name, From: a.describe(), Class: Applied, Rule: "removed: its state dropped"})
		}
	}
	if len(old) == len(new) && !contains(from, -1) {
		for i := range new {
			if from[i] != i {
				add(Change{What: "aggregates' order", Class: Applied, Rule: "state is kept by aggregate, not by position"})
				return
			}
		}
	}
}

func contains(xs []int, x int) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

func byName(aggs []Aggregate, name string) int {
	for i, a := range aggs {
		if a.Name == name {
			return i
		}
	}
	return -1
}

// match maps each new aggregate to the old one whose state it continues
// (-1: none): the same name and identity first, then, among the rest, the
// same identity (a rename). An aggregate whose name survives with another
// identity continues nothing.
func match(old, new []Aggregate) []int {
	from := make([]int, len(new))
	taken := make([]bool, len(old))
	for i, a := range new {
		from[i] = -1
		if j := byName(old, a.Name); j >= 0 && old[j].identity() == a.identity() {
			from[i], taken[j] = j, true
		}
	}
	for i, a := range new {
		if from[i] >= 0 || byName(old, a.Name) >= 0 {
			continue
		}
		for j, o := range old {
			if !taken[j] && byName(new, o.Name) < 0 && o.identity() == a.identity() {
				from[i], taken[j] = j, true
				break
			}
		}
	}
	return from
}

// Layouts returns the engine's view of the layouts d records: for each
// tag, the aggregates state of that tag is written with, the mode its
// windows were opened under, and for each of d's aggregates its index
// there (-1: absent). State is carried through every change of History
// since its layout was last current, as each change matched aggregates
// (Compare): a removed aggregate stays removed. A layout current twice is
// carried from its latest time, and one outside the history (a
// changelog's of another lineage) by matching it to d's directly.
func Layouts(d *Definition) (map[uint32]*windowing.Layout, error) {
	out := map[uint32]*windowing.Layout{}
	seq := append(append([]uint32(nil), d.History...), d.LayoutTag())
	aggsOf := func(t uint32) []Aggregate {
		if t == d.LayoutTag() {
			return d.Aggregates
		}
		_, aggs := splitMode(d.Layouts[t])
		return aggs
	}
	for t, stored := range d.Layouts {
		mode, aggs := splitMode(stored)
		from := match(aggs, d.Aggregates)
		if k := lastIndex(seq[:len(seq)-1], t); k >= 0 {
			// Walk back from d's aggregates to layout t's, step by step.
			from = make([]int, len(d.Aggregates))
			for i := range from {
				from[i] = i
			}
			for j := len(seq) - 1; j > k; j-- {
				step := match(aggsOf(seq[j-1]), aggsOf(seq[j]))
				for i, f := range from {
					if f >= 0 {
						from[i] = step[f]
					}
				}
			}
		}
		l := &windowing.Layout{From: from, Mode: mode}
		for _, a := range aggs {
			s, err := a.spec()
			if err != nil {
				return nil, err
			}
			l.Aggregates = append(l.Aggregates, s)
		}
		out[t] = l
	}
	return out, nil
}

func lastIndex(xs []uint32, x uint32) int {
	for i := len(xs) - 1; i >= 0; i-- {
		if xs[i] == x {
			return i
		}
	}
	return -1
}

func splitMode(l []Aggregate) (windowing.Mode, []Aggregate) {
	if len(l) > 0 && strings.HasPrefix(l[0].Op, "mode:") {
		switch strings.TrimPrefix(l[0].Op, "mode:") {
		case "discarding":
			return windowing.Discarding, l[1:]
		case "retracting":
			return windowing.Retracting, l[1:]
		}
		return windowing.Accumulating, l[1:]
	}
	return windowing.Accumulating, l
}

// InputsAddedRule is what windowd does when inputs are added after the
// last one of a pipeline of several.
const InputsAddedRule = "the added inputs are read from their start and join the frontier once heard from; " +
	"an aggregate of every input counts their records from the change on, and an aggregate of an added input starts empty (see: add an aggregate)"

// inputsAdded reports whether new is old, a pipeline of several inputs,
// with inputs added after its last one: each earlier input in its place
// (its number in the repartition records and markers) with its topic and
// key.
func inputsAdded(old, new *Definition) bool {
	n := len(old.Topics)
	return n > 1 && len(new.Topics) > n && slices.Equal(new.Topics[:n], old.Topics) && strings.HasPrefix(new.Key, old.Key+"; ")
}

// GrowthRule is what windowd does when partitions are added to the input of
// a pipeline without repartition (docs/OPERATIONS.md, Changing a deployed
// pipeline).
const GrowthRule = "the producer's partitioner moves some keys to the added partitions; " +
	"such a key's windows open at the move are split between two partitions' states, each emitting its own panes, " +
	"and panes of the added partitions carry the partition in their pane id (<key>/<start>/<end>/<index>@<partition>) and pane object, " +
	"so no two final panes share a pane id; set repartition: true to keep every key's windows whole"

// Grow records that the input now has n partitions (more than d's): a
// count that is a multiple of the count before the first growth keeps
// each key on its partition below that count or moves it to an added one
// (a hash modulo k×N is the hash modulo N, or that plus a multiple of N),
// so the panes of the partitions below it never share a pane id with
// another partition's. Any other count is refused: it moves keys between
// the original partitions, whose pane ids carry no partition.
func (d *Definition) Grow(n int32) error {
	base := d.basePartitions()
	switch {
	case n < d.Partitions:
		return fmt.Errorf("the input has %d partitions, fewer than the %d its state was keyed by (the topic was deleted and created again?); start fresh", n, d.Partitions)
	case n%base != 0:
		return fmt.Errorf("the input grew from %d to %d partitions, not a multiple of %d (its count before it first grew): "+
			"the producer's partitioner moves keys between the original partitions, which would emit two final panes with one pane id; "+
			"add partitions to a multiple of %d, use repartition: true, or start fresh", d.Partitions, n, base, base)
	}
	if n > d.Partitions {
		d.GrewFrom, d.Partitions = base, n
	}
	return nil
}

// PaneIDPartitionsFrom is the partition from which panes carry their
// partition in their pane id (windowing.Options.PartitionIDsFrom): the
// input's partition count before it first grew; 0 with repartition.
func (d *Definition) PaneIDPartitionsFrom() int32 {
	if d.Repartition {
		return 0
	}
	return d.basePartitions()
}

// basePartitions is the input's partition count before it first grew.
func (d *Definition) basePartitions() int32 {
	if d.GrewFrom > 0 {
		return d.GrewFrom
	}
	return d.Partitions
}

// drainRule says what a drain does.
func drainRule(d *Drain) string {
	return fmt.Sprintf("drained: records before %s go to the old windows, records from then on to the new ones; "+
		"a window spanning the cut that only one definition has names its aggregates partial; "+
		"the drain ends when the frontier passes %s plus allowed_lateness, when the last old window has closed",
		windowing.FormatTime(d.Cut), windowing.FormatTime(d.End))
}
