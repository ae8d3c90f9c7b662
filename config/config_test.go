package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/windowd/windowd/watermark"
	"github.com/windowd/windowd/windowing"
)

// designConfig is the example of DESIGN.md §12, verbatim.
const designConfig = `kafka:
  brokers: ["127.0.0.1:9092"]   # or ` + "`brokers: embedded`" + `: an in-process broker (quickstart, demos)
  embedded_listen: 127.0.0.1:19092   # where the embedded broker listens
  client_id: windowd
state:
  dir: ./data                   # Pebble directory
http:
  listen: "127.0.0.1:9100"      # /metrics /healthz /readyz
pipelines:
  - name: clicks
    input: {topic: clicks, group: windowd-clicks, partitions: 4}  # group: windowd-<name>;
                                           # partitions: only used to create it on the embedded broker
    key: {field: user_id}                  # omitted: the Kafka record key
    timestamp: {field: ts, format: unix_ms}  # unix_s|unix_ms|unix_us|unix_ns|rfc3339; or {source: record}
    watermark: {strategy: bounded_out_of_orderness, max_delay: 5s, every: 1, idle_timeout: 30s}
    window: {type: tumbling, size: 10s}    # hopping: size + hop; session: gap; optional offset
    allowed_lateness: 1m
    trigger:
      early: {every: 10s}                  # or {count: 100}
      on_time: true
      late: {every: 0s}
      closing: always                      # always | if_changed | never
    accumulation: accumulating             # accumulating | discarding | retracting
    aggregates:
      - {name: clicks, op: count}
      - {name: revenue, op: sum, field: amount}   # sum|min|max|avg need a numeric field
      - {name: users, op: distinct_approx, field: user_id}
    output: {topic: clicks-windows}
    late_topic: clicks-late                # optional
    dead_letter_topic: clicks-dlq          # default <name>-dlq
    delivery: at_least_once                # at_least_once | exactly_once
`

func TestParseDesignExample(t *testing.T) {
	got, err := Parse("windowd.yaml", []byte(designConfig))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	want := &Config{
		File: "windowd.yaml",
		Kafka: Kafka{
			Brokers:        []string{"127.0.0.1:9092"},
			EmbeddedListen: "127.0.0.1:19092",
			ClientID:       "windowd",
			SessionTimeout: DefaultSessionTimeout,
		},
		State:         State{Dir: "./data", CacheBytes: 64 << 20},
		HTTP:          HTTP{Listen: "127.0.0.1:9100"},
		ShutdownGrace: DefaultShutdownGrace,
		Pipelines: []Pipeline{{
			Name:      "clicks",
			Line:      10,
			Input:     Input{Topic: "clicks", Group: "windowd-clicks", Partitions: 4},
			Key:       Key{Field: "user_id"},
			Timestamp: Timestamp{Field: "ts", Format: UnixMS},
			Watermark: watermark.Spec{
				Strategy:    watermark.BoundedOutOfOrderness,
				MaxDelay:    5000,
				Every:       1,
				IdleTimeout: 30000,
			},
			Spec: windowing.Spec{
				Window:          windowing.WindowSpec{Kind: windowing.Tumbling, Size: 10000, Hop: 10000},
				AllowedLateness: 60000,
				Trigger: windowing.TriggerSpec{
					EarlyEvery: 10000,
					OnTime:     true,
					Late:       true,
					LateEvery:  0,
					Closing:    windowing.ClosingAlways,
				},
				Mode: windowing.Accumulating,
				Aggregates: []windowing.AggSpec{
					{Name: "clicks", Op: windowing.Count},
					{Name: "revenue", Op: windowing.Sum, Field: "amount"},
					{Name: "users", Op: windowing.DistinctApprox, Field: "user_id", Precision: windowing.DefaultPrecision},
				},
			},
			OutputTopic:     "clicks-windows",
			LateTopic:       "clicks-late",
			DeadLetterTopic: "clicks-dlq",
			Delivery:        AtLeastOnce,
			CommitInterval:  DefaultCommitInterval,
		}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Parse =\n%+v\nwant\n%+v", got, want)
	}
	if p := got.Pipeline("clicks"); p == nil || p.Name != "clicks" {
		t.Errorf("Pipeline(clicks) = %v", p)
	}
	if p := got.Pipeline("nope"); p != nil {
		t.Errorf("Pipeline(nope) = %v, want nil", p)
	}
}

const minimalConfig = `kafka:
  brokers: [localhost:9092, "10.0.0.2:9093"]
pipelines:
  - name: p
    input: {topic: in}
    timestamp: {field: ts}
    window: {type: tumbling, size: 10s}
    aggregates: [{name: n, op: count}, {name: u, op: distinct_approx, field: user.id}]
    output: {topic: out}
`

// minimalWant is what minimalConfig gives: every default of DESIGN.md §12.
func minimalWant(file string, line int) *Config {
	return &Config{
		File: file,
		Kafka: Kafka{
			Brokers:        []string{"localhost:9092", "10.0.0.2:9093"},
			EmbeddedListen: "127.0.0.1:19092",
			ClientID:       "windowd",
			SessionTimeout: DefaultSessionTimeout,
		},
		State:         State{Dir: "./data", CacheBytes: 64 << 20},
		HTTP:          HTTP{Listen: "127.0.0.1:9100"},
		ShutdownGrace: DefaultShutdownGrace,
		Pipelines: []Pipeline{{
			Name:      "p",
			Line:      line,
			Input:     Input{Topic: "in", Group: "windowd-p", Partitions: 4},
			Timestamp: Timestamp{Field: "ts", Format: UnixMS},
			Watermark: watermark.Spec{Strategy: watermark.BoundedOutOfOrderness, Every: 1},
			Spec: windowing.Spec{
				Window:  windowing.WindowSpec{Kind: windowing.Tumbling, Size: 10000, Hop: 10000},
				Trigger: windowing.TriggerSpec{OnTime: true, Closing: windowing.ClosingAlways},
				Mode:    windowing.Accumulating,
				Aggregates: []windowing.AggSpec{
					{Name: "n", Op: windowing.Count},
					{Name: "u", Op: windowing.DistinctApprox, Field: "user.id", Precision: 14},
				},
			},
			OutputTopic:     "out",
			DeadLetterTopic: "p-dlq",
			Delivery:        AtLeastOnce,
			CommitInterval:  DefaultCommitInterval,
		}},
	}
}

func TestParseDefaults(t *testing.T) {
	got, err := Parse("min.yaml", []byte(minimalConfig))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if want := minimalWant("min.yaml", 4); !reflect.DeepEqual(got, want) {
		t.Errorf("Parse =\n%+v\nwant\n%+v", got, want)
	}
}

func TestParseJSON(t *testing.T) {
	const src = `{
  "kafka": {"brokers": ["localhost:9092", "10.0.0.2:9093"]},
  "pipelines": [
    {"name": "p", "input": {"topic": "in"}, "timestamp": {"field": "ts"},
     "window": {"type": "tumbling", "size": "10s"},
     "aggregates": [{"name": "n", "op": "count"}, {"name": "u", "op": "distinct_approx", "field": "user.id"}],
     "output": {"topic": "out"}}
  ]
}`
	got, err := Parse("min.json", []byte(src))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if want := minimalWant("min.json", 4); !reflect.DeepEqual(got, want) {
		t.Errorf("Parse =\n%+v\nwant\n%+v", got, want)
	}

	_, err = Parse("bad.json", []byte(`{"kafka": {"brokers": "embedded"}, "pipelines": [{"name": "p", "windw": 1}]}`))
	const want = `bad.json:1:50: pipelines[0].input.topic: required
bad.json:1:50: pipelines[0].timestamp: required (a field, or source: record)
bad.json:1:50: pipelines[0].window.type: required
bad.json:1:50: pipelines[0].aggregates: required
bad.json:1:50: pipelines[0].output.topic: required
bad.json:1:64: pipelines[0].windw: unknown field "windw" (did you mean "window"?)`
	if err == nil || err.Error() != want {
		t.Errorf("Parse(bad.json) error =\n%v\nwant\n%s", err, want)
	}
}

// head and pipe build small configs: head is lines 1-2, pipe starts at line 3.
const head = "kafka: {brokers: embedded}\npipelines:\n"

// pipe is a valid pipeline; line i+3 of the file holds element i.
var pipe = []string{
	"  - name: p",                             // 3
	"    input: {topic: in}",                  // 4
	"    timestamp: {field: ts}",              // 5
	"    window: {type: tumbling, size: 10s}", // 6
	"    aggregates: [{name: n, op: count}]",  // 7
	"    output: {topic: out}",                // 8
}

// with returns head + pipe with the lines whose prefix (after trimming) matches
// a key of repl replaced ("" deletes), and extra lines appended.
func with(repl map[string]string, extra ...string) string {
	var b strings.Builder
	b.WriteString(head)
	for _, l := range pipe {
		key := strings.TrimPrefix(strings.TrimSpace(l), "- ")
		key, _, _ = strings.Cut(key, ":")
		if r, ok := repl[key]; ok {
			if r != "" {
				b.WriteString(r + "\n")
			}
			continue
		}
		b.WriteString(l + "\n")
	}
	for _, l := range extra {
		b.WriteString(l + "\n")
	}
	return b.String()
}

func TestValidVariants(t *testing.T) {
	if _, err := Parse("c.yaml", []byte(with(nil))); err != nil {
		t.Fatalf("base pipeline: %v", err)
	}
	tests := []struct {
		name  string
		src   string
		check func(c *Config) any // returns the value under test
		want  any
	}{
		{"embedded", with(nil), func(c *Config) any { return c.Kafka }, Kafka{Embedded: true, EmbeddedListen: "127.0.0.1:19092", ClientID: "windowd", SessionTimeout: DefaultSessionTimeout}},
		{"state", "state: {dir: /var/lib/windowd, cache_bytes: 256MiB}\n" + with(nil),
			func(c *Config) any { return c.State }, State{Dir: "/var/lib/windowd", CacheBytes: 256 << 20}},
		{"cache bytes integer", "state: {cache_bytes: 2097152}\n" + with(nil), func(c *Config) any { return c.State.CacheBytes }, int64(2 << 20)},
		{"cache bytes MB", "state: {cache_bytes: 64 MB}\n" + with(nil), func(c *Config) any { return c.State.CacheBytes }, int64(64_000_000)},
		{"cache bytes GiB", "state: {cache_bytes: 1GiB}\n" + with(nil), func(c *Config) any { return c.State.CacheBytes }, int64(1 << 30)},
		{"hopping with negative offset",
			with(map[string]string{"window": "    window: {type: hopping, size: 1m, hop: 15s, offset: -5s}"}),
			func(c *Config) any { return c.Pipelines[0].Spec.Window },
			windowing.WindowSpec{Kind: windowing.Hopping, Size: 60000, Hop: 15000, Offset: -5000}},
		{"hop equal to size",
			with(map[string]string{"window": "    window: {type: hopping, size: 1m, hop: 1m}"}),
			func(c *Config) any { return c.Pipelines[0].Spec.Window },
			windowing.WindowSpec{Kind: windowing.Hopping, Size: 60000, Hop: 60000}},
		{"tumbling with offset",
			with(map[string]string{"window": "    window: {type: tumbling, size: 24h, offset: 2h}"}),
			func(c *Config) any { return c.Pipelines[0].Spec.Window },
			windowing.WindowSpec{Kind: windowing.Tumbling, Size: 86400000, Hop: 86400000, Offset: 7200000}},
		{"session",
			with(map[string]string{"window": "    window: {type: session, gap: 250ms}"}),
			func(c *Config) any { return c.Pipelines[0].Spec.Window },
			windowing.WindowSpec{Kind: windowing.Session, Gap: 250}},
		{"record timestamp",
			with(map[string]string{"timestamp": "    timestamp: {source: record}"}),
			func(c *Config) any { return c.Pipelines[0].Timestamp }, Timestamp{FromRecord: true}},
		{"rfc3339 timestamp",
			with(map[string]string{"timestamp": "    timestamp: {field: meta.time, format: rfc3339}"}),
			func(c *Config) any { return c.Pipelines[0].Timestamp }, Timestamp{Field: "meta.time", Format: RFC3339}},
		{"monotonic", with(nil, "    watermark: {strategy: monotonic, every: 100, idle_timeout: 1m30s}"),
			func(c *Config) any { return c.Pipelines[0].Watermark },
			watermark.Spec{Strategy: watermark.Monotonic, Every: 100, IdleTimeout: 90000}},
		{"trigger", with(nil, "    allowed_lateness: 1h", "    trigger:", "      early: {count: 100, every: 2s}",
			"      on_time: false", "      late: {every: 30s}", "      closing: if_changed"),
			func(c *Config) any { return c.Pipelines[0].Spec.Trigger },
			windowing.TriggerSpec{EarlyCount: 100, EarlyEvery: 2000, Late: true, LateEvery: 30000, Closing: windowing.ClosingIfChanged}},
		{"empty late trigger", with(nil, "    allowed_lateness: 1s", "    trigger: {late: {}, closing: never}"),
			func(c *Config) any { return c.Pipelines[0].Spec.Trigger },
			windowing.TriggerSpec{OnTime: true, Late: true, Closing: windowing.ClosingNever}},
		{"closing never without lateness", with(nil, "    trigger: {closing: never}"),
			func(c *Config) any { return c.Pipelines[0].Spec.Trigger.Closing }, windowing.ClosingNever},
		{"all ops", with(map[string]string{"aggregates": `    aggregates:
      - {name: a, op: sum, field: x}
      - {name: b, op: min, field: x}
      - {name: c, op: max, field: x}
      - {name: _d, op: avg, field: x}
      - {name: e, op: distinct_approx, field: x, precision: 4}
      - {name: f, op: distinct_approx, field: x, precision: 18}`}),
			func(c *Config) any { return c.Pipelines[0].Spec.Aggregates },
			[]windowing.AggSpec{
				{Name: "a", Op: windowing.Sum, Field: "x"}, {Name: "b", Op: windowing.Min, Field: "x"},
				{Name: "c", Op: windowing.Max, Field: "x"}, {Name: "_d", Op: windowing.Avg, Field: "x"},
				{Name: "e", Op: windowing.DistinctApprox, Field: "x", Precision: 4},
				{Name: "f", Op: windowing.DistinctApprox, Field: "x", Precision: 18},
			}},
		{"modes", with(nil, "    accumulation: retracting", "    delivery: exactly_once"),
			func(c *Config) any { return []any{c.Pipelines[0].Spec.Mode, c.Pipelines[0].Delivery} },
			[]any{windowing.Retracting, ExactlyOnce}},
		{"topics and group", with(map[string]string{"input": "    input: {topic: in, group: g1, partitions: 12}"},
			"    late_topic: late", "    dead_letter_topic: dead", "    key: {field: user.id}"),
			func(c *Config) any {
				p := c.Pipelines[0]
				return []any{p.Input, p.LateTopic, p.DeadLetterTopic, p.Key}
			},
			[]any{Input{Topic: "in", Group: "g1", Partitions: 12}, "late", "dead", Key{Field: "user.id"}}},
		{"anchors and merge keys", head + `  - &base
    name: p
    input: {topic: in}
    timestamp: {field: ts}
    window: {type: tumbling, size: 10s}
    aggregates: [{name: n, op: count}]
    output: {topic: out}
  - <<: *base
    name: q
  - &base2 {<<: *base, name: r, input: {topic: other}}
  - {<<: *base2, name: s}
`, func(c *Config) any {
			var got []any
			for _, p := range c.Pipelines {
				got = append(got, p.Name, p.Line, p.Input, p.OutputTopic)
			}
			return got
		}, []any{
			"p", 3, Input{Topic: "in", Group: "windowd-p", Partitions: 4}, "out",
			"q", 10, Input{Topic: "in", Group: "windowd-q", Partitions: 4}, "out",
			"r", 12, Input{Topic: "other", Group: "windowd-r", Partitions: 4}, "out",
			"s", 13, Input{Topic: "other", Group: "windowd-s", Partitions: 4}, "out",
		}},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse("c.yaml", []byte(tt.src))
			if err != nil {
				t.Fatalf("Parse:\n%s\nerror:\n%v", tt.src, err)
			}
			if got := tt.check(c); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

// errorCases are bad configs with the whole error text each gives.
var errorCases = []struct {
	name string
	src  string
	want string
}{
	{"unknown field",
		with(nil, "    windw: {type: tumbling}"),
		`c.yaml:9:5: pipelines[0].windw: unknown field "windw" (did you mean "window"?)`},
	{"unknown top-level field without suggestion",
		"metrics: {}\n" + with(nil),
		`c.yaml:1:1: metrics: unknown field "metrics"`},
	{"bad duration",
		with(map[string]string{"window": "    window: {type: tumbling, size: ten seconds}"}),
		`c.yaml:6:36: pipelines[0].window.size: invalid duration "ten seconds" (use a duration string like "10s")`},
	{"integer duration",
		with(nil, "    allowed_lateness: 5000"),
		`c.yaml:9:23: pipelines[0].allowed_lateness: 5000 is not a duration (use a duration string like "10s")`},
	{"mapping as duration",
		with(nil, "    allowed_lateness: {seconds: 5}"),
		`c.yaml:9:23: pipelines[0].allowed_lateness: expected a duration string like "10s", got a mapping`},
	{"sub-millisecond duration",
		with(nil, "    watermark: {max_delay: 1500us}"),
		`c.yaml:9:28: pipelines[0].watermark.max_delay: duration "1500us" is not a whole number of milliseconds`},
	{"negative duration",
		with(nil, "    allowed_lateness: -1s"),
		`c.yaml:9:23: pipelines[0].allowed_lateness: must not be negative`},
	{"zero size",
		with(map[string]string{"window": "    window: {type: tumbling, size: 0s}"}),
		`c.yaml:6:36: pipelines[0].window.size: must be greater than 0`},
	{"hop greater than size",
		with(map[string]string{"window": "    window:\n      type: hopping\n      size: 10s\n      hop: 20s"}),
		`c.yaml:9:12: pipelines[0].window.hop: hop (20s) must not exceed size (10s)`},
	{"missing hop",
		with(map[string]string{"window": "    window: {type: hopping, size: 10s}"}),
		`c.yaml:6:5: pipelines[0].window.hop: required`},
	{"gap on tumbling",
		with(map[string]string{"window": "    window: {type: tumbling, size: 10s, gap: 5s}"}),
		`c.yaml:6:41: pipelines[0].window.gap: gap is only valid for session windows`},
	{"size and offset on session",
		with(map[string]string{"window": "    window: {type: session, gap: 5s, size: 1m, offset: 1s}"}),
		`c.yaml:6:38: pipelines[0].window.size: size is only valid for tumbling and hopping windows
c.yaml:6:48: pipelines[0].window.offset: offset is only valid for tumbling and hopping windows`},
	{"missing window type",
		with(map[string]string{"window": "    window: {size: 10s}"}),
		`c.yaml:6:5: pipelines[0].window.type: required`},
	{"missing window",
		with(map[string]string{"window": ""}),
		`c.yaml:3:3: pipelines[0].window.type: required`},
	{"bad window type",
		with(map[string]string{"window": "    window: {type: sliding, size: 10s}"}),
		`c.yaml:6:20: pipelines[0].window.type: invalid value "sliding" (want tumbling, hopping or session)`},
	{"sum without field",
		with(map[string]string{"aggregates": "    aggregates:\n      - {name: n, op: count}\n      - {name: revenue, op: sum}"}),
		`c.yaml:9:7: pipelines[0].aggregates[1].field: required for sum`},
	{"field on count",
		with(map[string]string{"aggregates": "    aggregates: [{name: n, op: count, field: x}]"}),
		`c.yaml:7:39: pipelines[0].aggregates[0].field: field is not valid for count`},
	{"precision on avg and out of range",
		with(map[string]string{"aggregates": "    aggregates:\n      - {name: a, op: avg, field: x, precision: 10}\n      - {name: u, op: distinct_approx, field: x, precision: 19}"}),
		`c.yaml:8:38: pipelines[0].aggregates[0].precision: precision is only valid for distinct_approx
c.yaml:9:61: pipelines[0].aggregates[1].precision: must be between 4 and 18`},
	{"bad aggregate op and name",
		with(map[string]string{"aggregates": "    aggregates: [{name: total-sum, op: median, field: x}]"}),
		`c.yaml:7:25: pipelines[0].aggregates[0].name: invalid aggregate name "total-sum" (use a letter or '_', then letters, digits and '_')
c.yaml:7:40: pipelines[0].aggregates[0].op: invalid value "median" (want count, sum, min, max, avg or distinct_approx)`},
	{"duplicate aggregate name",
		with(map[string]string{"aggregates": "    aggregates:\n      - {name: n, op: count}\n      - {name: n, op: max, field: v}"}),
		`c.yaml:9:16: pipelines[0].aggregates[1].name: duplicate aggregate name "n" (first at line 8)`},
	{"empty aggregates",
		with(map[string]string{"aggregates": "    aggregates: []"}),
		`c.yaml:7:17: pipelines[0].aggregates: must not be empty`},
	{"late trigger without lateness",
		with(nil, "    trigger: {late: {every: 0s}}"),
		`c.yaml:9:15: pipelines[0].trigger.late: needs allowed_lateness > 0`},
	{"empty early trigger",
		with(nil, "    trigger:", "      early: {}"),
		`c.yaml:10:7: pipelines[0].trigger.early: needs count or every`},
	{"early count zero",
		with(nil, "    trigger: {early: {count: 0}}"),
		`c.yaml:9:30: pipelines[0].trigger.early.count: must be at least 1`},
	{"trigger that never fires",
		with(nil, "    trigger: {on_time: false, closing: never}"),
		`c.yaml:9:5: pipelines[0].trigger: never fires a pane (on_time is false, closing is never, no early or late)`},
	{"bad enum value",
		with(nil, "    accumulation: accumulate"),
		`c.yaml:9:19: pipelines[0].accumulation: invalid value "accumulate" (want accumulating, discarding or retracting)`},
	{"bad timestamp format",
		with(map[string]string{"timestamp": "    timestamp: {field: ts, format: unix_millis}"}),
		`c.yaml:5:36: pipelines[0].timestamp.format: invalid value "unix_millis" (want unix_s, unix_ms, unix_us, unix_ns or rfc3339)`},
	{"timestamp field and source",
		with(map[string]string{"timestamp": "    timestamp: {field: ts, source: record}"}),
		`c.yaml:5:28: pipelines[0].timestamp.source: cannot be combined with field`},
	{"timestamp format with source",
		with(map[string]string{"timestamp": "    timestamp: {source: record, format: unix_s}"}),
		`c.yaml:5:33: pipelines[0].timestamp.format: format is only valid with field`},
	{"bad timestamp source",
		with(map[string]string{"timestamp": "    timestamp: {source: kafka}"}),
		`c.yaml:5:25: pipelines[0].timestamp.source: invalid value "kafka" (want record)`},
	{"empty timestamp",
		with(map[string]string{"timestamp": "    timestamp: {}"}),
		`c.yaml:5:5: pipelines[0].timestamp: needs a field, or source: record`},
	{"missing timestamp",
		with(map[string]string{"timestamp": ""}),
		`c.yaml:3:3: pipelines[0].timestamp: required (a field, or source: record)`},
	{"max_delay with monotonic",
		with(nil, "    watermark: {strategy: monotonic, max_delay: 1s}"),
		`c.yaml:9:38: pipelines[0].watermark.max_delay: max_delay is only valid for bounded_out_of_orderness`},
	{"watermark every zero",
		with(nil, "    watermark: {every: 0}"),
		`c.yaml:9:24: pipelines[0].watermark.every: must be at least 1`},
	{"duplicate pipeline name",
		with(nil, strings.Join(pipe, "\n")),
		`c.yaml:9:11: pipelines[1].name: duplicate pipeline name "p" (first at line 3)`},
	{"bad pipeline name",
		with(map[string]string{"name": "  - name: my pipeline"}),
		`c.yaml:3:11: pipelines[0].name: invalid pipeline name "my pipeline" (use letters, digits, '.', '_' and '-')`},
	{"wrong node type: list for mapping",
		with(map[string]string{"input": "    input: [in]"}),
		`c.yaml:4:12: pipelines[0].input: expected a mapping, got a list`},
	{"wrong node type: string for integer",
		with(map[string]string{"input": "    input: {topic: in, partitions: four}"}),
		`c.yaml:4:36: pipelines[0].input.partitions: expected an integer, got "four"`},
	{"wrong node type: string for bool",
		with(nil, "    trigger: {on_time: yes}"),
		`c.yaml:9:24: pipelines[0].trigger.on_time: expected true or false, got "yes"`},
	{"wrong node type: pipeline is a string",
		head + "  - clicks\n",
		`c.yaml:3:5: pipelines[0]: expected a mapping, got "clicks"`},
	{"wrong node type: top level is a list",
		"- a\n- b\n",
		`c.yaml:1:1: expected a mapping, got a list`},
	{"null value",
		with(nil, "    late_topic:"),
		`c.yaml:9:16: pipelines[0].late_topic: expected a string, got null`},
	{"empty string",
		with(map[string]string{"output": `    output: {topic: ""}`}),
		`c.yaml:8:21: pipelines[0].output.topic: must not be empty`},
	{"bad topic name",
		with(map[string]string{"output": `    output: {topic: "my topic"}`}),
		`c.yaml:8:21: pipelines[0].output.topic: invalid topic name "my topic" (use at most 249 letters, digits, '.', '_' and '-')`},
	{"output to the input topic",
		with(map[string]string{"output": `    output: {topic: in}`}),
		`c.yaml:8:21: pipelines[0].output.topic: must differ from input.topic ("in")`},
	{"bad field path",
		with(nil, "    key: {field: user..id}"),
		`c.yaml:9:18: pipelines[0].key.field: invalid field path "user..id" (use dots between names, like "payload.user.id")`},
	{"duplicate key",
		with(nil, "    output: {topic: out2}"),
		`c.yaml:9:5: pipelines[0].output: duplicate field "output" (first at line 8)`},
	{"yaml syntax error",
		with(map[string]string{"input": "    input: {topic: in"}),
		`c.yaml:5:5: syntax error: ',' or '}' must be specified`},
	{"bad indentation",
		"kafka:\n  brokers: embedded\n   client_id: x\n",
		`c.yaml:2:12: syntax error: mapping value is not allowed in this context`},
	{"missing brokers",
		"kafka: {client_id: x}\n" + with(nil)[len("kafka: {brokers: embedded}\n"):],
		`c.yaml:1:1: kafka.brokers: required`},
	{"bad brokers",
		"kafka: {brokers: [localhost, \"h:99999\", 9092]}\n" + with(nil)[len("kafka: {brokers: embedded}\n"):],
		`c.yaml:1:19: kafka.brokers[0]: invalid address "localhost" (want host:port)
c.yaml:1:30: kafka.brokers[1]: invalid address "h:99999" (want host:port)
c.yaml:1:41: kafka.brokers[2]: expected a string, got 9092`},
	{"broker string",
		"kafka: {brokers: localhost:9092}\n" + with(nil)[len("kafka: {brokers: embedded}\n"):],
		`c.yaml:1:18: kafka.brokers: expected a list of host:port addresses or "embedded", got "localhost:9092"`},
	{"cache too small and bad listen",
		"state: {cache_bytes: 1000}\nhttp: {listen: 9100}\n" + with(nil),
		`c.yaml:1:22: state.cache_bytes: must be at least 1MiB
c.yaml:2:16: http.listen: expected a string, got 9100`},
	{"bad size",
		"state: {cache_bytes: 64 megabytes}\n" + with(nil),
		`c.yaml:1:22: state.cache_bytes: invalid size "64 megabytes" (use a byte count or a size like "64MiB")`},
	{"empty file", "",
		`c.yaml:1:1: kafka.brokers: required
c.yaml:1:1: pipelines: required`},
	{"empty pipelines", "kafka: {brokers: embedded}\npipelines: []\n",
		`c.yaml:2:12: pipelines: must not be empty`},
	{"undefined alias",
		with(map[string]string{"input": "    input: *in"}),
		`c.yaml:4:12: pipelines[0].input: undefined alias "in"`},
	{"two documents",
		with(nil) + "---\n" + with(nil),
		`c.yaml:10:1: multiple YAML documents are not supported`},
}

func TestParseErrors(t *testing.T) {
	for _, tt := range errorCases {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse("c.yaml", []byte(tt.src))
			if err == nil {
				t.Fatalf("Parse:\n%s\nno error, want\n%s", tt.src, tt.want)
			}
			if c != nil {
				t.Errorf("Parse returned a config with an error")
			}
			if err.Error() != tt.want {
				t.Errorf("Parse:\n%s\nerror:\n%v\nwant:\n%s", tt.src, err, tt.want)
			}
			var errs *Errors
			if !errors.As(err, &errs) {
				t.Fatalf("error is %T, want *Errors", err)
			}
			if n := strings.Count(tt.want, "\n") + 1; len(errs.Problems) != n {
				t.Errorf("%d problems, want %d", len(errs.Problems), n)
			}
		})
	}
}

var problemLine = regexp.MustCompile(`^windowd\.yaml:(\d+):\d+: \S`)

// TestThreeMistakes is an acceptance criterion: three mistakes on three lines
// give exactly three file:line:col lines, one per mistake.
func TestThreeMistakes(t *testing.T) {
	src := strings.NewReplacer(
		"window: {type: tumbling, size: 10s}", "window: {type: tumbling, size: 10s, hop: 5s}", // line 16
		"allowed_lateness: 1m", "allowed_lateness: 60", // line 17
		"{name: revenue, op: sum, field: amount}", "{name: revenue, op: sum}", // line 26
	).Replace(designConfig)
	_, err := Parse("windowd.yaml", []byte(src))
	if err == nil {
		t.Fatal("no error")
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != 3 {
		t.Fatalf("got %d lines, want 3:\n%v", len(lines), err)
	}
	for i, want := range []string{"16", "17", "26"} {
		m := problemLine.FindStringSubmatch(lines[i])
		if m == nil || m[1] != want {
			t.Errorf("line %d = %q, want a windowd.yaml:%s:col: problem", i, lines[i], want)
		}
	}
}

func TestLoad(t *testing.T) {
	path := filepath.Join(t.TempDir(), "w.yaml")
	if err := os.WriteFile(path, []byte(minimalConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(path)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if want := minimalWant(path, 4); !reflect.DeepEqual(c, want) {
		t.Errorf("Load =\n%+v\nwant\n%+v", c, want)
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing.yaml")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load(missing) error = %v, want not-exist", err)
	}
}

// TestExampleConfigs loads every shipped example.
func TestExampleConfigs(t *testing.T) {
	files, err := filepath.Glob("../configs/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no configs/*.yaml")
	}
	for _, f := range files {
		if _, err := Load(f); err != nil {
			t.Errorf("Load(%s):\n%v", f, err)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(designConfig))
	f.Add([]byte(minimalConfig))
	f.Add([]byte(with(nil, "    windw: {type: tumbling}", "    allowed_lateness: 5", "    trigger: {late: {}, early: {}}")))
	f.Add([]byte(with(nil, strings.Join(pipe, "\n"))))
	f.Add([]byte("a: &x {<<: *x}\nkafka: *x\npipelines: [*x, &y [*y]]\n"))
	f.Add([]byte(`{"kafka": {"brokers": "embedded"}, "pipelines": [{"name": 1, "window": []}]}`))
	f.Add([]byte("kafka:\n  brokers: embedded\n   client_id: x\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse("f.yaml", data)
		if err == nil {
			if c == nil || len(c.Pipelines) == 0 {
				t.Fatalf("no error but config %v", c)
			}
			return
		}
		var errs *Errors
		if !errors.As(err, &errs) || len(errs.Problems) == 0 {
			t.Fatalf("error %T %v", err, err)
		}
		for _, p := range errs.Problems {
			if p.Line < 1 || p.Col < 1 || p.Msg == "" || strings.Contains(p.Msg, "\n") {
				t.Fatalf("bad problem %+v", p)
			}
		}
	})
}

func TestServiceSettings(t *testing.T) {
	const base = `kafka: {brokers: embedded}
shutdown_grace: 5s
generator: {topic: clicks, rate: 50, keys: 7, disorder: 1s, late_every: 10, late_by: 20s, malformed_every: 25}
pipelines:
  - name: p
    input: {topic: clicks}
    timestamp: {field: ts}
    window: {type: tumbling, size: 5s}
    aggregates: [{name: n, op: count}]
    output: {topic: out, stdout: true}
    commit_interval: 250ms
`
	c, err := Parse("s.yaml", []byte(base))
	if err != nil {
		t.Fatal(err)
	}
	want := &Generator{Topic: "clicks", Rate: 50, Keys: 7, Disorder: 1000, LateEvery: 10, LateBy: 20000, MalformedEvery: 25}
	if !reflect.DeepEqual(c.Generator, want) || c.ShutdownGrace != 5000 {
		t.Fatalf("generator = %+v, grace %d", c.Generator, c.ShutdownGrace)
	}
	if p := c.Pipelines[0]; !p.OutputStdout || p.CommitInterval != 250 {
		t.Fatalf("pipeline = %+v", p)
	}
	_, err = Parse("s.yaml", []byte(strings.Replace(base, "brokers: embedded", `brokers: ["k:9092"]`, 1)))
	if err == nil || err.Error() != `s.yaml:3:1: generator: only valid with kafka.brokers: embedded` {
		t.Fatalf("generator with a real cluster: %v", err)
	}
}
