package config

import (
	"math"
	"slices"
	"time"
	// The time zones of calendar windows resolve on a machine without
	// system zoneinfo too (docs/SEMANTICS.md, Windows).
	_ "time/tzdata"

	"github.com/goccy/go-yaml/ast"

	"github.com/windowd/windowd/expr"
	"github.com/windowd/windowd/watermark"
	"github.com/windowd/windowd/windowing"
)

// The pipelines of the windowd schema: input, key, timestamp, watermark,
// window, lateness, trigger, accumulation, aggregates, outputs, drain.

func (d *decoder) pipeline(it item, path string, seen map[string]int) Pipeline {
	m := d.mapping(it.node, path, it.at, pipelineKeys...)
	p := Pipeline{Line: it.at.line}
	var ok bool
	if p.Name, ok = req(m, "name", d.pipelineName); ok {
		d.unique(seen, "pipeline", p.Name, m.valueAt("name"), m.child("name"))
	}

	in := m.sub("input", inputKeys...)
	if m.has("inputs") {
		d.inputs(m, &p)
	} else {
		p.Input.Topic, _ = req(in, "topic", d.topic)
		p.Input.Group, _ = opt(in, "group", "windowd-"+p.Name, d.str)
		parts, _ := opt(in, "partitions", DefaultPartitions, d.intIn(1, MaxPartitions))
		p.Input.Partitions = int32(parts)
		p.Input.Format, _ = opt(in, "format", JSON, oneOf(d, formats))
		if p.Input.Format != JSON {
			d.binary = append(d.binary, binaryInput{in.valueAt("format"), in.child("format"), p.Input.Format, false})
		}
		if m.has("group") {
			d.errorf(m.keyAt("group"), m.child("group"), "only valid with inputs (one input's group is input.group)")
		}
		p.Filter, _ = opt(m, "filter", nil, d.expression(expr.Bool))
		p.Key = d.key(m.sub("key", keyKeys...))
		p.Timestamp = d.timestamp(m)
	}
	p.Watermark = d.watermark(m.sub("watermark", watermarkKeys...))
	if m.has("join") {
		p.Join = d.join(m, &p)
		p.Spec.AllowedLateness = p.Join.AllowedLateness // progress records' final_through
	} else {
		p.Spec = d.spec(m)
		if p.Inputs != nil && p.Spec.Window.Kind == windowing.Sliding && p.Spec.Trigger.EarlyCount > 0 {
			// A new sliding window counts the records it starts with by
			// its aggregates, and with several inputs each counts one
			// input's.
			d.errorf(m.keyAt("trigger"), m.child("trigger"), "early.count is not supported for sliding windows of several inputs in this version: use early.every")
		}
	}
	p.CloseWhen, p.DiscardWhen = d.closeWhen, d.discardWhen
	d.closeWhen, d.discardWhen = nil, nil
	if p.Join == nil {
		p.Drain = d.drain(m, p.Spec.Window)
	}
	d.closeWhen, d.discardWhen = nil, nil // (a drain's window takes none)
	if slices.ContainsFunc(d.aggExprs, func(x *expr.Program) bool { return x != nil }) {
		p.AggregateExprs = d.aggExprs
	}
	d.aggExprs = nil
	d.resolveAggregateInputs(&p)

	out := m.sub("output", outputKeys...)
	p.OutputTopic, _ = req(out, "topic", d.topic)
	p.OutputStdout, _ = opt(out, "stdout", false, d.boolean)
	p.OutputTimestamp, _ = opt(out, "timestamp", WindowEnd, oneOf(d, paneTimes))
	p.OutputFormat, _ = opt(out, "format", JSON, oneOf(d, outFormats))
	p.OutputSubject, _ = opt(out, "subject", p.OutputTopic+"-value", d.str)
	switch {
	case p.OutputFormat != JSON:
		d.binary = append(d.binary, binaryInput{out.valueAt("format"), out.child("format"), p.OutputFormat, true})
	case out.has("subject"):
		d.errorf(out.keyAt("subject"), out.child("subject"), "only valid with output.format avro, protobuf or json_schema")
	default:
		p.OutputSubject = "" // json panes have no schema
	}
	p.ProgressInterval, _ = opt(out, "progress_interval", 0, d.duration(positive))
	if p.Join != nil {
		for _, k := range []string{"format", "subject", "progress_interval"} {
			if out.has(k) {
				d.errorf(out.keyAt(k), out.child(k), "not valid with join in this version: a join writes JSON rows (docs/SEMANTICS.md, Joins)")
			}
		}
	}
	if p.Spec.Window.Kind == windowing.CountWindow && out.has("progress_interval") {
		d.errorf(out.keyAt("progress_interval"), out.child("progress_interval"), "progress records say through which event time the panes are final; count windows have no event-time end")
	}
	p.LateTopic, _ = opt(m, "late_topic", "", d.topic)
	p.DeadLetterTopic, _ = opt(m, "dead_letter_topic", p.Name+"-dlq", d.topic)
	p.Delivery, _ = opt(m, "delivery", AtLeastOnce, oneOf(d, deliveries))
	commitDefault := int64(DefaultCommitInterval)
	if p.Delivery == ExactlyOnce {
		commitDefault = DefaultCommitIntervalExactlyOnce
	}
	p.CommitInterval, _ = opt(m, "commit_interval", commitDefault, d.duration(positive))
	p.CommitIntervalMax, _ = opt(m, "commit_interval_max", max(p.CommitInterval, DefaultCommitInterval), d.duration(positive))
	switch {
	case p.CommitIntervalMax < p.CommitInterval:
		d.errorf(m.valueAt("commit_interval_max"), m.child("commit_interval_max"), "must be at least commit_interval (%s)", time.Duration(p.CommitInterval)*time.Millisecond)
	case p.Delivery == ExactlyOnce && p.CommitIntervalMax > TransactionTimeout/2:
		k := "commit_interval_max"
		if !m.has(k) {
			k = "commit_interval"
		}
		d.errorf(m.valueAt(k), m.child(k), "under exactly_once a transaction stays open for a commit cycle: at most %s, half the transaction timeout (%s)",
			time.Duration(TransactionTimeout/2)*time.Millisecond, time.Duration(TransactionTimeout)*time.Millisecond)
	}
	p.Repartition = d.repartition(m, &p)
	workers, _ := opt(m, "workers", 0, d.intIn(1, MaxWorkers))
	p.Workers = int(workers)

	// The topics windowd derives from the group and the name must be
	// valid Kafka topic names too, or run fails where validate said OK.
	if p.Name != "" && p.Input.Group != "" {
		derived := []string{p.ChangelogTopic()}
		if p.Repartition != nil {
			derived = append(derived, p.RepartitionTopic())
		}
		for _, topic := range derived {
			if !topicRE.MatchString(topic) {
				at, path := m.valueAt("name"), m.child("name")
				if in.has("group") {
					at, path = in.valueAt("group"), in.child("group")
				} else if m.has("group") {
					at, path = m.valueAt("group"), m.child("group")
				}
				d.errorf(at, path, "derived topic %q is not a valid Kafka topic name (at most 249 letters, digits, '.', '_' and '-'): shorten or change input.group or the pipeline name", topic)
				break
			}
		}
	}

	// Writing back to an input topic would feed a pipeline its own output.
	for _, t := range []struct {
		m     *mapping
		key   string
		topic string
	}{{out, "topic", p.OutputTopic}, {m, "late_topic", p.LateTopic}, {m, "dead_letter_topic", p.DeadLetterTopic}} {
		if !t.m.has(t.key) || t.topic == "" {
			continue
		}
		if t.topic == p.Input.Topic && p.Inputs == nil {
			d.errorf(t.m.valueAt(t.key), t.m.child(t.key), "must differ from input.topic (%q)", p.Input.Topic)
		}
		for _, src := range p.Inputs {
			if t.topic == src.Topic {
				d.errorf(t.m.valueAt(t.key), t.m.child(t.key), "must differ from the input topic %q", src.Topic)
			}
		}
	}
	return p
}

// repartition reads `repartition: true` and the two settings that only
// apply with it.
func (d *decoder) repartition(m *mapping, p *Pipeline) *Repartition {
	on, _ := opt(m, "repartition", false, d.boolean)
	parts, _ := opt(m, "repartition_partitions", 0, d.intIn(1, MaxPartitions))
	interval, _ := opt(m, "watermark_interval", DefaultWatermarkInterval, d.duration(positive))
	if !on {
		for _, k := range []string{"repartition_partitions", "watermark_interval"} {
			if m.has(k) {
				d.errorf(m.keyAt(k), m.child(k), "only valid with repartition: true")
			}
		}
		d.coPartitioned(p)
		return nil
	}
	if p.Inputs != nil {
		for i, src := range p.Inputs {
			if !src.Key.FromValue() {
				d.errorf(m.valueAt("repartition"), m.child("repartition"), "needs key.field, key.fields or key.expr of every input (input %s reads the record key)", p.Inputs[i].As)
			}
		}
	} else if !p.Key.FromValue() {
		d.errorf(m.valueAt("repartition"), m.child("repartition"), "needs key.field, key.fields or key.expr (records keyed by the group key need no repartitioning)")
	}
	return &Repartition{Partitions: int32(parts), WatermarkInterval: interval}
}

// coPartitioned refuses inputs read without repartition: true whose
// partitions differ: partition p of every input must hold the same keys
// (docs/SEMANTICS.md, Several inputs). The start checks the topics' own
// counts.
func (d *decoder) coPartitioned(p *Pipeline) {
	if len(p.Inputs) < 2 || len(d.inputMaps) != len(p.Inputs) {
		return
	}
	for i := 1; i < len(p.Inputs); i++ {
		if in := p.Inputs[i]; in.Partitions != p.Inputs[0].Partitions {
			im := d.inputMaps[i]
			at, path := im.at, im.child("partitions")
			if im.has("partitions") {
				at = im.valueAt("partitions")
			}
			d.errorf(at, path, "input %s has %d partitions, input %s %d: without repartition: true, every input needs the same partition count (partition p of each holds the same keys); set repartition: true to read inputs of different counts",
				in.As, in.Partitions, p.Inputs[0].As, p.Inputs[0].Partitions)
		}
	}
}

func (d *decoder) timestamp(pm *mapping) Timestamp {
	if !pm.has("timestamp") {
		if !pm.broken {
			d.errorf(pm.at, pm.child("timestamp"), "required (a field, an expr, or source: record)")
		}
		return Timestamp{}
	}
	m := pm.sub("timestamp", timestampKeys...)
	var ts Timestamp
	ts.FromRecord, _ = opt(m, "source", false, oneOf(d, sources))
	ts.Field, _ = opt(m, "field", "", d.fieldPath)
	ts.Expr, _ = opt(m, "expr", nil, d.expression(expr.Timestamp))
	ts.Format, _ = opt(m, "format", UnixMS, oneOf(d, timeFormats))
	ts.MaxFuture, _ = opt(m, "max_future", 0, d.duration(positive))
	switch {
	case m.has("source") && m.has("field"):
		d.errorf(m.keyAt("source"), m.child("source"), "cannot be combined with field")
	case m.has("expr") && (m.has("field") || m.has("source")):
		d.errorf(m.keyAt("expr"), m.child("expr"), "cannot be combined with field or source")
	case m.has("format") && !m.has("field"):
		d.errorf(m.keyAt("format"), m.child("format"), "format is only valid with field")
	case !m.has("source") && !m.has("field") && !m.has("expr") && !m.broken:
		d.errorf(m.at, m.path, "needs a field, an expr, or source: record")
	}
	return ts
}

func (d *decoder) watermark(m *mapping) watermark.Spec {
	var s watermark.Spec
	var ok bool
	s.Strategy, ok = opt(m, "strategy", watermark.BoundedOutOfOrderness, oneOf(d, strategies))
	s.MaxDelay, _ = opt(m, "max_delay", 0, d.duration(nonNegative))
	if ok && s.Strategy == watermark.Monotonic && m.has("max_delay") {
		d.errorf(m.keyAt("max_delay"), m.child("max_delay"), "max_delay is only valid for bounded_out_of_orderness")
	}
	s.Every, _ = opt(m, "every", 1, d.intIn(1, math.MaxInt64))
	s.IdleTimeout, _ = opt(m, "idle_timeout", 0, d.duration(nonNegative))
	s.MaxDrift, _ = opt(m, "max_drift", 0, d.duration(positive))
	s.QuietAdvance, _ = opt(m, "quiet_advance", false, d.boolean)
	if s.QuietAdvance && s.IdleTimeout == 0 {
		d.errorf(m.keyAt("quiet_advance"), m.child("quiet_advance"), "quiet_advance needs idle_timeout: the input is quiet when every partition has been idle that long")
	}
	return s
}

func (d *decoder) spec(m *mapping) windowing.Spec {
	var s windowing.Spec
	s.Window = d.window(m.sub("window", windowKeys...))
	lateness, latenessOK := opt(m, "allowed_lateness", 0, d.duration(nonNegative))
	s.AllowedLateness = lateness
	trigger := m.sub("trigger", triggerKeys...)
	s.Trigger = d.trigger(trigger, lateness == 0 && latenessOK)
	if s.Window.Kind == windowing.CountWindow {
		// A count window has no event-time end: it is complete when full
		// (docs/SEMANTICS.md, Count windows).
		if m.has("allowed_lateness") {
			d.errorf(m.keyAt("allowed_lateness"), m.child("allowed_lateness"), "allowed_lateness does not apply to count windows: they have no event-time end, and are final when full")
		}
		for _, k := range []string{"on_time", "late", "closing"} {
			if trigger.has(k) {
				d.errorf(trigger.keyAt(k), trigger.child(k), "%s does not apply to count windows: a count window's pane is ON_TIME and final when the window is full, EARLY before (early triggers)", k)
			}
		}
	}
	s.Mode, _ = opt(m, "accumulation", windowing.Accumulating, oneOf(d, modes))
	s.Aggregates = d.aggregates(m)
	return s
}

func (d *decoder) window(m *mapping) windowing.WindowSpec {
	kind, kindOK := req(m, "type", oneOf(d, windowKinds))
	if kindOK && kind == windowing.Calendar {
		return d.calendar(m)
	}
	if kindOK && kind == windowing.Cumulate {
		return d.cumulate(m)
	}
	if kindOK && kind == windowing.CountWindow {
		return d.countWindow(m)
	}
	size, sizeOK := opt(m, "size", 0, d.duration(positive))
	hop, hopOK := opt(m, "hop", 0, d.duration(positive))
	gap, _ := opt(m, "gap", 0, d.duration(positive))
	offset, _ := opt(m, "offset", 0, d.duration(anySign))
	timeout, _ := opt(m, "timeout", 0, d.duration(positive))
	d.closeWhen, _ = opt(m, "close_when", nil, d.expression(expr.Bool))
	d.discardWhen, _ = opt(m, "discard_when", nil, d.expression(expr.Bool))
	if !kindOK {
		return windowing.WindowSpec{}
	}
	d.windowFields(m, kind)
	switch kind {
	case windowing.Transaction:
		return windowing.WindowSpec{Kind: kind, Gap: timeout}
	case windowing.Tumbling:
		return windowing.WindowSpec{Kind: kind, Size: size, Hop: size, Offset: offset}
	case windowing.Sliding:
		return windowing.WindowSpec{Kind: kind, Size: size}
	case windowing.Hopping:
		if m.has("size") && m.has("hop") && sizeOK && hopOK && hop > size {
			d.errorf(m.valueAt("hop"), m.child("hop"), "hop (%s) must not exceed size (%s)", m.raw("hop"), m.raw("size"))
		} else if sizeOK && hopOK && hop > 0 && (size+hop-1)/hop > MaxWindowsPerRecord {
			d.errorf(m.valueAt("hop"), m.child("hop"), "size / hop is %d windows for every record, more than %d: use a larger hop", (size+hop-1)/hop, MaxWindowsPerRecord)
		}
		return windowing.WindowSpec{Kind: kind, Size: size, Hop: hop, Offset: offset}
	default:
		return windowing.WindowSpec{Kind: kind, Gap: gap}
	}
}

// countWindow decodes `type: count` (docs/SEMANTICS.md, Count windows):
// size and hop count records.
func (d *decoder) countWindow(m *mapping) windowing.WindowSpec {
	for _, f := range windowFields {
		if f.name != "size" && f.name != "hop" && m.has(f.name) {
			d.errorf(m.keyAt(f.name), m.child(f.name), "%s is not valid for count windows (size and hop count records)", f.name)
		}
	}
	m.require("size")
	size, sizeOK := opt(m, "size", 1, d.intIn(1, math.MaxInt32))
	hop, hopOK := opt(m, "hop", size, d.intIn(1, math.MaxInt32))
	if sizeOK && hopOK && hop > size {
		d.errorf(m.valueAt("hop"), m.child("hop"), "hop (%d) must not exceed size (%d)", hop, size)
	} else if sizeOK && hopOK && (size+hop-1)/hop > MaxWindowsPerRecord {
		d.errorf(m.valueAt("hop"), m.child("hop"), "size / hop is %d windows for every record, more than %d: use a larger hop", (size+hop-1)/hop, MaxWindowsPerRecord)
	}
	return windowing.WindowSpec{Kind: windowing.CountWindow, Size: size, Hop: hop}
}

// windowFields reports the fields kind requires and lacks, and those it
// does not take.
func (d *decoder) windowFields(m *mapping, kind windowing.WindowKind) {
	for _, f := range windowFields {
		takes := slices.Contains(f.kinds, kind)
		switch {
		case takes && f.required && !(kind == windowing.Calendar && f.name != "unit"):
			m.require(f.name)
		case !takes && m.has(f.name):
			d.errorf(m.keyAt(f.name), m.child(f.name), "%s is only valid for %s windows", f.name, f.validFor)
		}
	}
}

var (
	calendarUnits = named(windowing.Hour, windowing.Day, windowing.Week, windowing.Month, windowing.Year)
	weekdays      = []choice[time.Weekday]{{"monday", time.Monday}, {"tuesday", time.Tuesday}, {"wednesday", time.Wednesday}, {"thursday", time.Thursday}, {"friday", time.Friday}, {"saturday", time.Saturday}, {"sunday", time.Sunday}}
)

// MaxCalendarSize bounds the units of a calendar window (docs/OPERATIONS.md,
// Limits).
const MaxCalendarSize = 10_000

// calendar decodes `type: calendar` (docs/SEMANTICS.md, Windows): size and
// hop count units, not durations.
func (d *decoder) calendar(m *mapping) windowing.WindowSpec {
	d.windowFields(m, windowing.Calendar)
	unit, unitOK := req(m, "unit", oneOf(d, calendarUnits))
	zone, _ := opt(m, "time_zone", time.UTC, d.timeZone)
	size, sizeOK := opt(m, "size", 1, d.intIn(1, MaxCalendarSize))
	hop, hopOK := opt(m, "hop", size, d.intIn(1, MaxCalendarSize))
	weekStart, _ := opt(m, "week_start", time.Monday, oneOf(d, weekdays))
	if sizeOK && hopOK && hop > size {
		d.errorf(m.valueAt("hop"), m.child("hop"), "hop (%d) must not exceed size (%d)", hop, size)
	}
	if unitOK && unit != windowing.Week && m.has("week_start") {
		d.errorf(m.keyAt("week_start"), m.child("week_start"), "week_start is only valid with unit: week")
	}
	return windowing.WindowSpec{Kind: windowing.Calendar, Calendar: &windowing.CalendarSpec{
		Unit: unit, Zone: zone, Size: size, Hop: hop, WeekStart: weekStart,
	}}
}

// cumulate decodes `type: cumulate` (docs/SEMANTICS.md, Cumulating
// windows): a fixed period (size, offset) or a calendar one (unit,
// time_zone, week_start), and the step between window ends.
func (d *decoder) cumulate(m *mapping) windowing.WindowSpec {
	for _, f := range windowFields {
		if !slices.Contains(f.kinds, windowing.Cumulate) && m.has(f.name) {
			d.errorf(m.keyAt(f.name), m.child(f.name), "%s is only valid for %s windows", f.name, f.validFor)
		}
	}
	m.require("step")
	step, stepOK := opt(m, "step", 0, d.duration(positive))
	if !m.has("unit") {
		for _, f := range []string{"time_zone", "week_start"} {
			if m.has(f) {
				d.errorf(m.keyAt(f), m.child(f), "%s is only valid with unit (calendar periods)", f)
			}
		}
		m.require("size")
		size, sizeOK := opt(m, "size", 0, d.duration(positive))
		offset, _ := opt(m, "offset", 0, d.duration(anySign))
		if sizeOK && stepOK && step > 0 {
			switch {
			case size%step != 0:
				d.errorf(m.valueAt("step"), m.child("step"), "step (%s) must divide size (%s)", m.raw("step"), m.raw("size"))
			case size/step > MaxWindowsPerRecord:
				d.errorf(m.valueAt("step"), m.child("step"), "size / step is %d windows for every record, more than %d: use a larger step", size/step, MaxWindowsPerRecord)
			}
		}
		return windowing.WindowSpec{Kind: windowing.Cumulate, Size: size, Step: step, Offset: offset}
	}
	for _, f := range []string{"size", "offset"} {
		if m.has(f) {
			d.errorf(m.keyAt(f), m.child(f), "%s is only valid without unit: a calendar period is one unit", f)
		}
	}
	unit, unitOK := req(m, "unit", oneOf(d, calendarUnits))
	zone, _ := opt(m, "time_zone", time.UTC, d.timeZone)
	weekStart, _ := opt(m, "week_start", time.Monday, oneOf(d, weekdays))
	if unitOK && unit != windowing.Week && m.has("week_start") {
		d.errorf(m.keyAt("week_start"), m.child("week_start"), "week_start is only valid with unit: week")
	}
	if unitOK && stepOK && step > 0 {
		switch {
		case unit == windowing.Hour:
			d.errorf(m.valueAt("unit"), m.child("unit"), "cumulate periods are days, weeks, months or years; for an hour use size: 1h")
		case unit == windowing.Day && (step%msPerHour != 0 || msPerDay%step != 0):
			d.errorf(m.valueAt("step"), m.child("step"), "step (%s) must be a whole number of hours that divides a day (1h, 2h, 3h, 4h, 6h, 8h, 12h, 24h)", m.raw("step"))
		case unit == windowing.Week && step != msPerDay && step != 7*msPerDay:
			d.errorf(m.valueAt("step"), m.child("step"), "step (%s) must divide a week: 24h or 168h", m.raw("step"))
		case (unit == windowing.Month || unit == windowing.Year) && step%msPerDay != 0:
			d.errorf(m.valueAt("step"), m.child("step"), "step (%s) must be a whole number of days (24h, 48h, …)", m.raw("step"))
		}
	}
	return windowing.WindowSpec{Kind: windowing.Cumulate, Step: step, Calendar: &windowing.CalendarSpec{
		Unit: unit, Zone: zone, Size: 1, Hop: 1, WeekStart: weekStart,
	}}
}

const (
	msPerHour = int64(time.Hour / time.Millisecond)
	msPerDay  = 24 * msPerHour
)

// timeZone accepts an IANA time zone name. "Local" is refused: it would
// depend on the machine.
func (d *decoder) timeZone(n ast.Node, path string) (*time.Location, bool) {
	s, ok := d.str(n, path)
	if !ok {
		return nil, false
	}
	loc, err := time.LoadLocation(s)
	if err != nil || s == "Local" {
		d.errorf(posOf(n), path, "unknown time zone %q (use an IANA name like \"Europe/Rome\")", s)
		return nil, false
	}
	return loc, true
}

func (d *decoder) trigger(m *mapping, noLateness bool) windowing.TriggerSpec {
	var t windowing.TriggerSpec
	if m.has("early") {
		early := m.sub("early", earlyKeys...)
		t.EarlyCount, _ = opt(early, "count", 0, d.intIn(1, math.MaxInt64))
		t.EarlyEvery, _ = opt(early, "every", 0, d.duration(positive))
		if !early.has("count") && !early.has("every") && !early.broken {
			d.errorf(early.at, early.path, "needs count or every")
		}
	}
	t.OnTime, _ = opt(m, "on_time", true, d.boolean)
	if m.has("late") {
		t.Late = true
		t.LateEvery, _ = opt(m.sub("late", lateKeys...), "every", 0, d.duration(nonNegative))
		if noLateness {
			d.errorf(m.keyAt("late"), m.child("late"), "needs allowed_lateness > 0")
		}
	}
	var closingOK bool
	t.Closing, closingOK = opt(m, "closing", windowing.ClosingAlways, oneOf(d, closings))
	if !m.has("early") && !m.has("late") && m.has("on_time") && !t.OnTime && closingOK && t.Closing == windowing.ClosingNever {
		d.errorf(m.at, m.path, "never fires a pane (on_time is false, closing is never, no early or late)")
	}
	return t
}

func (d *decoder) aggregates(pm *mapping) []windowing.AggSpec {
	path := pm.child("aggregates")
	items, _ := req(pm, "aggregates", d.nonEmptyList)
	seen := map[string]int{}
	var aggs []windowing.AggSpec
	type ratioRef struct {
		of, to string
		m      *mapping
	}
	var ratios []ratioRef
	for i, it := range items {
		if it.node == nil {
			continue
		}
		m := d.mapping(it.node, index(path, i), it.at, aggregateKeys...)
		var a windowing.AggSpec
		var ok bool
		if a.Name, ok = req(m, "name", d.aggregateName); ok {
			d.unique(seen, "aggregate", a.Name, m.valueAt("name"), m.child("name"))
		}
		a.Op, ok = req(m, "op", oneOf(d, aggOps))
		a.Field, _ = opt(m, "field", "", d.fieldPath)
		want := expr.Number
		if a.Op.NeedsText() {
			want = expr.Any
		}
		var x *expr.Program
		if ok {
			x, _ = opt(m, "expr", nil, d.expression(want))
		}
		precision, _ := opt(m, "precision", windowing.DefaultPrecision, d.intIn(4, 18))
		if ok {
			switch {
			case a.Op == windowing.Ratio:
				for _, k := range []string{"field", "expr", "input"} {
					if m.has(k) {
						d.errorf(m.keyAt(k), m.child(k), "%s is not valid for ratio, which divides two other aggregates (of, to)", k)
					}
				}
				m.require("of")
				m.require("to")
			case a.Op == windowing.Count && (m.has("field") || m.has("expr")):
				k := "field"
				if !m.has("field") {
					k = "expr"
				}
				d.errorf(m.keyAt(k), m.child(k), "%s is not valid for count", k)
			case m.has("field") && m.has("expr"):
				d.errorf(m.keyAt("expr"), m.child("expr"), "cannot be combined with field")
			case a.Op != windowing.Count && !m.has("field") && !m.has("expr") && !m.broken:
				d.errorf(m.at, m.child("field"), "required for %s (or an expr)", a.Op)
			}
			if a.Op == windowing.DistinctApprox {
				a.Precision = uint8(precision)
			} else if m.has("precision") {
				d.errorf(m.keyAt("precision"), m.child("precision"), "precision is only valid for distinct_approx")
			}
			d.sketchOptions(m, &a)
		}
		if a.Op != windowing.Ratio {
			for _, k := range []string{"of", "to"} {
				if m.has(k) {
					d.errorf(m.keyAt(k), m.child(k), "only valid for ratio")
				}
			}
		}
		of, _ := opt(m, "of", "", d.str)
		to, _ := opt(m, "to", "", d.str)
		ratios = append(ratios, ratioRef{of, to, m})
		aggs = append(aggs, a)
		d.aggExprs = append(d.aggExprs, x)
		from, _ := opt(m, "input", "", d.str)
		d.aggInputs = append(d.aggInputs, aggInput{from, m.valueAt("input"), m.child("input")})
	}
	for i := range aggs {
		if aggs[i].Op != windowing.Ratio {
			continue
		}
		r := ratios[i]
		for _, ref := range []struct {
			key, name string
			dst       *int
		}{{"of", r.of, &aggs[i].Of}, {"to", r.to, &aggs[i].To}} {
			if ref.name == "" {
				continue // reported
			}
			j := slices.IndexFunc(aggs, func(a windowing.AggSpec) bool { return a.Name == ref.name })
			switch {
			case j < 0:
				d.errorf(r.m.valueAt(ref.key), r.m.child(ref.key), "no aggregate is named %q", ref.name)
			case j == i:
				d.errorf(r.m.valueAt(ref.key), r.m.child(ref.key), "a ratio cannot divide itself")
			case !aggs[j].Op.Numeric():
				d.errorf(r.m.valueAt(ref.key), r.m.child(ref.key), "aggregate %s is a %s: a ratio divides counts, sums, minima, maxima, averages or distinct counts", ref.name, aggs[j].Op)
			default:
				*ref.dst = j
			}
		}
	}
	return aggs
}

// key reads key: a field, fields (a composite key) or an expr; none is
// the Kafka record key.
func (d *decoder) key(m *mapping) Key {
	var k Key
	k.Field, _ = opt(m, "field", "", d.fieldPath)
	k.Fields, _ = opt(m, "fields", nil, d.fieldPaths)
	k.Expr, _ = opt(m, "expr", nil, d.expression(expr.Any))
	set := 0
	for _, name := range keyKeys {
		if m.has(name) {
			if set++; set == 2 {
				d.errorf(m.keyAt(name), m.child(name), "key takes one of field, fields and expr")
			}
		}
	}
	return k
}

// fieldPaths is a non-empty list of distinct field paths.
func (d *decoder) fieldPaths(n ast.Node, path string) ([]string, bool) {
	items, ok := d.nonEmptyList(n, path)
	if !ok {
		return nil, false
	}
	var out []string
	seen := map[string]int{}
	for i, it := range items {
		f, ok := d.fieldPath(it.node, index(path, i))
		if !ok {
			return nil, false
		}
		d.unique(seen, "field", f, it.at, index(path, i))
		out = append(out, f)
	}
	return out, true
}

// drain reads a pipeline's drain (docs/OPERATIONS.md, Changing a deployed
// pipeline): the window definition its state was built under, and the
// cut. Both windows must be fixed windows (tumbling, hopping, calendar):
// a record belongs to the windows its time gives, under one definition or
// the other.
func (d *decoder) drain(m *mapping, cur windowing.WindowSpec) *Drain {
	if !m.has("drain") {
		return nil
	}
	dm := m.sub("drain", "window", "until")
	w := d.window(dm.sub("window", windowKeys...))
	until, untilOK := req(dm, "until", d.instant)
	switch {
	case w.Kind != 0 && !windowing.Drainable(w.Kind):
		d.errorf(dm.valueAt("window"), dm.child("window"), "a drain finishes tumbling, hopping or calendar windows, not %s windows: run the new definition as a new pipeline next to the old one instead", w.Kind)
	case cur.Kind != 0 && !windowing.Drainable(cur.Kind):
		d.errorf(m.keyAt("drain"), m.child("drain"), "a drain switches to tumbling, hopping or calendar windows, not %s windows: run the new definition as a new pipeline next to the old one instead", cur.Kind)
	case untilOK && w.Kind != 0 && cur.Kind != 0:
		if ok, next := windowing.CheckDrain(w, cur, until); !ok {
			hint := "choose another cut"
			if next != 0 {
				hint = "the next cut that can is " + windowing.FormatTime(next)
			}
			d.errorf(dm.valueAt("until"), dm.child("until"), "at this cut a window of the pipeline's window that holds records from the cut on starts where a window of drain.window starts but ends elsewhere, and a key's windows are told apart by their start: %s", hint)
			return nil
		}
		return &Drain{Window: w, Until: until}
	}
	return nil
}

// instant accepts an RFC 3339 time and returns its Unix milliseconds.
func (d *decoder) instant(n ast.Node, path string) (int64, bool) {
	s, ok := text(n)
	if !ok {
		d.expected(n, path, `an RFC 3339 time like "2026-12-04T06:00:00Z"`)
		return 0, false
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		d.errorf(posOf(n), path, "invalid time %s (an RFC 3339 time like \"2026-12-04T06:00:00Z\")", quote(s))
		return 0, false
	}
	return t.UnixMilli(), true
}
