package config

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/windowd/windowd/watermark"
	"github.com/windowd/windowd/windowing"
)

// designConfig is the example of docs/SEMANTICS.md, Configuration, verbatim.
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
			Compression:    DefaultCompression,
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
			OutputTopic:       "clicks-windows",
			LateTopic:         "clicks-late",
			DeadLetterTopic:   "clicks-dlq",
			Delivery:          AtLeastOnce,
			CommitInterval:    DefaultCommitInterval,
			CommitIntervalMax: DefaultCommitInterval,
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

// minimalWant is what minimalConfig gives: every default (the README's
// configuration table; docs/SEMANTICS.md, Configuration).
func minimalWant(file string, line int) *Config {
	return &Config{
		File: file,
		Kafka: Kafka{
			Brokers:        []string{"localhost:9092", "10.0.0.2:9093"},
			EmbeddedListen: "127.0.0.1:19092",
			ClientID:       "windowd",
			SessionTimeout: DefaultSessionTimeout,
			Compression:    DefaultCompression,
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
			OutputTopic:       "out",
			DeadLetterTopic:   "p-dlq",
			Delivery:          AtLeastOnce,
			CommitInterval:    DefaultCommitInterval,
			CommitIntervalMax: DefaultCommitInterval,
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
bad.json:1:50: pipelines[0].timestamp: required (a field, an expr, or source: record)
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

// calendarOf describes a pipeline's calendar window for comparison (two
// loads of a zone are equal but not the same *time.Location).
func calendarOf(c *Config) any {
	w := c.Pipelines[0].Spec.Window
	if w.Kind != windowing.Calendar || w.Calendar == nil {
		return w
	}
	k := w.Calendar
	return fmt.Sprintf("%s %s size=%d hop=%d week_start=%s", k.Unit, k.Zone, k.Size, k.Hop, k.WeekStart)
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
		{"embedded", with(nil), func(c *Config) any { return c.Kafka }, Kafka{Embedded: true, EmbeddedListen: "127.0.0.1:19092", ClientID: "windowd", SessionTimeout: DefaultSessionTimeout, Compression: DefaultCompression}},
		{"compression", "kafka: {brokers: embedded, compression: zstd}\n" + with(nil)[len("kafka: {brokers: embedded}\n"):],
			func(c *Config) any { return c.Kafka.Compression }, "zstd"},
		{"state", "state: {dir: /var/lib/windowd, cache_bytes: 256MiB}\n" + with(nil),
			func(c *Config) any { return c.State }, State{Dir: "/var/lib/windowd", CacheBytes: 256 << 20}},
		{"cache bytes integer", "state: {cache_bytes: 2097152}\n" + with(nil), func(c *Config) any { return c.State.CacheBytes }, int64(2 << 20)},
		{"standby replicas", "state: {standby_replicas: 1}\n" + with(nil), func(c *Config) any { return c.State.StandbyReplicas }, 1},
		{"standby replicas default", with(nil), func(c *Config) any { return c.State.StandbyReplicas }, 0},
		{"cache bytes MB", "state: {cache_bytes: 64 MB}\n" + with(nil), func(c *Config) any { return c.State.CacheBytes }, int64(64_000_000)},
		{"cache bytes GiB", "state: {cache_bytes: 1GiB}\n" + with(nil), func(c *Config) any { return c.State.CacheBytes }, int64(1 << 30)},
		{"hopping with negative offset",
			with(map[string]string{"window": "    window: {type: hopping, size: 1m, hop: 15s, offset: -5s}"}),
			func(c *Config) any { return c.Pipelines[0].Spec.Window },
			windowing.WindowSpec{Kind: windowing.Hopping, Size: 60000, Hop: 15000, Offset: -5000}},
		{"drain",
			with(nil, "    drain:\n      window: {type: tumbling, size: 5s}\n      until: 2026-12-04T06:00:00Z"),
			func(c *Config) any { return *c.Pipelines[0].Drain },
			Drain{Window: windowing.WindowSpec{Kind: windowing.Tumbling, Size: 5000, Hop: 5000}, Until: 1796364000000}},
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
		{"calendar defaults",
			with(map[string]string{"window": "    window: {type: calendar, unit: day}"}),
			calendarOf, "day UTC size=1 hop=1 week_start=Monday"},
		{"calendar hopping weeks",
			with(map[string]string{"window": "    window: {type: calendar, unit: week, time_zone: America/Santiago, size: 4, hop: 1, week_start: sunday}"}),
			calendarOf, "week America/Santiago size=4 hop=1 week_start=Sunday"},
		{"calendar hop defaults to size",
			with(map[string]string{"window": "    window: {type: calendar, unit: month, time_zone: Europe/Rome, size: 3}"}),
			calendarOf, "month Europe/Rome size=3 hop=3 week_start=Monday"},
		{"record timestamp",
			with(map[string]string{"timestamp": "    timestamp: {source: record}"}),
			func(c *Config) any { return c.Pipelines[0].Timestamp }, Timestamp{FromRecord: true}},
		{"max_future",
			with(map[string]string{"timestamp": "    timestamp: {source: record, max_future: 1h}"}),
			func(c *Config) any { return c.Pipelines[0].Timestamp }, Timestamp{FromRecord: true, MaxFuture: 3600000}},
		{"rfc3339 timestamp",
			with(map[string]string{"timestamp": "    timestamp: {field: meta.time, format: rfc3339}"}),
			func(c *Config) any { return c.Pipelines[0].Timestamp }, Timestamp{Field: "meta.time", Format: RFC3339}},
		{"monotonic", with(nil, "    watermark: {strategy: monotonic, every: 100, idle_timeout: 1m30s}"),
			func(c *Config) any { return c.Pipelines[0].Watermark },
			watermark.Spec{Strategy: watermark.Monotonic, Every: 100, IdleTimeout: 90000}},
		{"count window", with(map[string]string{"window": "    window: {type: count, size: 100, hop: 25}"}),
			func(c *Config) any { return c.Pipelines[0].Spec.Window },
			windowing.WindowSpec{Kind: windowing.CountWindow, Size: 100, Hop: 25}},
		{"count window, tumbling", with(map[string]string{"window": "    window: {type: count, size: 100}"}),
			func(c *Config) any { return c.Pipelines[0].Spec.Window },
			windowing.WindowSpec{Kind: windowing.CountWindow, Size: 100, Hop: 100}},
		{"transaction window", with(map[string]string{"window": "    window: {type: transaction, close_when: 'value.type == \"checkout\"', timeout: 30m}"}),
			func(c *Config) any { return c.Pipelines[0].Spec.Window },
			windowing.WindowSpec{Kind: windowing.Transaction, Gap: 1800000}},
		{"quiet advance", with(nil, "    watermark: {idle_timeout: 10s, quiet_advance: true}"),
			func(c *Config) any { return c.Pipelines[0].Watermark },
			watermark.Spec{Every: 1, IdleTimeout: 10000, QuietAdvance: true}},
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
		{"sketch ops", with(map[string]string{"aggregates": `    aggregates:
      - {name: lat, op: quantiles, field: ms, quantiles: [0.5, 0.90, 1, 0, 0.001]}
      - {name: lat2, op: quantiles, expr: 'value.ms * 2.0', quantiles: [0.99], relative_accuracy: 0.0001, max_buckets: 1}
      - {name: top, op: top_k, field: page, k: 10}
      - {name: top2, op: top_k, expr: value.page, k: 3, capacity: 3}`}),
			func(c *Config) any {
				aggs := c.Pipelines[0].Spec.Aggregates
				return []any{aggs, c.Pipelines[0].AggregateExprs[1] != nil, c.Pipelines[0].AggregateExprs[3] != nil}
			},
			[]any{[]windowing.AggSpec{
				{Name: "lat", Op: windowing.Quantiles, Field: "ms", RelativeAccuracy: 0.01, MaxBuckets: 2048, Quantiles: []windowing.Quantile{
					{Text: "0.5", Num: 1, Den: 2}, {Text: "0.90", Num: 9, Den: 10}, {Text: "1", Num: 1, Den: 1}, {Text: "0", Num: 0, Den: 1}, {Text: "0.001", Num: 1, Den: 1000}}},
				{Name: "lat2", Op: windowing.Quantiles, RelativeAccuracy: 0.0001, MaxBuckets: 1, Quantiles: []windowing.Quantile{{Text: "0.99", Num: 99, Den: 100}}},
				{Name: "top", Op: windowing.TopK, Field: "page", K: 10, Capacity: 100},
				{Name: "top2", Op: windowing.TopK, K: 3, Capacity: 3},
			}, true, true}},
		{"top_k capacity default", with(map[string]string{"aggregates": "    aggregates: [{name: t, op: top_k, field: p, k: 11}]"}),
			func(c *Config) any { return c.Pipelines[0].Spec.Aggregates[0].Capacity }, 110},
		{"modes", with(nil, "    accumulation: retracting", "    delivery: exactly_once"),
			func(c *Config) any { return []any{c.Pipelines[0].Spec.Mode, c.Pipelines[0].Delivery} },
			[]any{windowing.Retracting, ExactlyOnce}},
		{"exactly_once commits every 100ms by default", with(nil, "    delivery: exactly_once"),
			func(c *Config) any { return c.Pipelines[0].CommitInterval }, int64(100)},
		{"repartition defaults", with(nil, "    key: {field: user}", "    repartition: true"),
			func(c *Config) any { return *c.Pipelines[0].Repartition }, Repartition{WatermarkInterval: 200}},
		{"repartition settings", with(nil, "    key: {field: user}", "    repartition: true", "    repartition_partitions: 16", "    watermark_interval: 1s"),
			func(c *Config) any { return *c.Pipelines[0].Repartition }, Repartition{Partitions: 16, WatermarkInterval: 1000}},
		{"repartition with exactly_once", with(nil, "    key: {field: user}", "    delivery: exactly_once", "    repartition: true"),
			func(c *Config) any {
				return c.Pipelines[0].Repartition != nil && c.Pipelines[0].Delivery == ExactlyOnce
			}, true},
		{"workers", with(nil, "    workers: 4"), func(c *Config) any { return c.Pipelines[0].Workers }, 4},
		{"workers unset: every core", with(nil), func(c *Config) any { return c.Pipelines[0].Workers }, 0},
		{"repartition off", with(nil, "    key: {field: user}", "    repartition: false"),
			func(c *Config) any { return c.Pipelines[0].Repartition == nil }, true},
		{"exactly_once with its own commit_interval", with(nil, "    delivery: exactly_once", "    commit_interval: 2s"),
			func(c *Config) any { return c.Pipelines[0].CommitInterval }, int64(2000)},
		{"commit_interval_max defaults to 1s, or commit_interval when longer", with(nil, "    delivery: exactly_once", "    commit_interval: 2s"),
			func(c *Config) any { return c.Pipelines[0].CommitIntervalMax }, int64(2000)},
		{"commit_interval_max under exactly_once by default", with(nil, "    delivery: exactly_once"),
			func(c *Config) any { return []int64{c.Pipelines[0].CommitInterval, c.Pipelines[0].CommitIntervalMax} }, []int64{100, 1000}},
		{"commit_interval_max set", with(nil, "    commit_interval: 200ms", "    commit_interval_max: 3s"),
			func(c *Config) any { return []int64{c.Pipelines[0].CommitInterval, c.Pipelines[0].CommitIntervalMax} }, []int64{200, 3000}},
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
	{"repartition without key.field",
		with(nil, "    repartition: true", "    watermark_interval: 0s"),
		`c.yaml:9:18: pipelines[0].repartition: needs key.field, key.fields or key.expr (records keyed by the group key need no repartitioning)
c.yaml:10:25: pipelines[0].watermark_interval: must be greater than 0`},
	{"repartition settings without repartition",
		with(nil, "    key: {field: user}", "    repartition_partitions: 3", "    watermark_interval: 1s"),
		`c.yaml:10:5: pipelines[0].repartition_partitions: only valid with repartition: true
c.yaml:11:5: pipelines[0].watermark_interval: only valid with repartition: true`},
	{"partitions over the limit",
		with(map[string]string{"input": "    input: {topic: in, partitions: 10001}"}, "    key: {field: user}", "    repartition: true", "    repartition_partitions: 2147483647"),
		`c.yaml:4:36: pipelines[0].input.partitions: must be between 1 and 10000
c.yaml:11:29: pipelines[0].repartition_partitions: must be between 1 and 10000`},
	{"workers out of range",
		with(nil, "    workers: 0"),
		`c.yaml:9:14: pipelines[0].workers: must be between 1 and 64`},
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
	{"drain at a cut inside a window of both starts",
		with(map[string]string{"window": "    window: {type: tumbling, size: 20s}"}, "    drain:\n      window: {type: tumbling, size: 10s}\n      until: 2026-12-04T06:00:30Z"),
		`c.yaml:11:14: pipelines[0].drain.until: at this cut a window of the pipeline's window that holds records from the cut on starts where a window of drain.window starts but ends elsewhere, and a key's windows are told apart by their start: the next cut that can is 2026-12-04T06:00:40Z`},
	{"drain of session windows",
		with(nil, "    drain:\n      window: {type: session, gap: 10s}\n      until: 2026-12-04T06:00:00Z"),
		`c.yaml:10:15: pipelines[0].drain.window: a drain finishes tumbling, hopping or calendar windows, not session windows: run the new definition as a new pipeline next to the old one instead`},
	{"drain until not a time",
		with(nil, "    drain:\n      window: {type: tumbling, size: 5s}\n      until: tomorrow"),
		`c.yaml:11:14: pipelines[0].drain.until: invalid time "tomorrow" (an RFC 3339 time like "2026-12-04T06:00:00Z")`},
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
		`c.yaml:6:38: pipelines[0].window.size: size is only valid for tumbling, hopping, sliding, calendar and cumulate windows
c.yaml:6:48: pipelines[0].window.offset: offset is only valid for tumbling, hopping and cumulate windows`},
	{"missing window type",
		with(map[string]string{"window": "    window: {size: 10s}"}),
		`c.yaml:6:5: pipelines[0].window.type: required`},
	{"missing window",
		with(map[string]string{"window": ""}),
		`c.yaml:3:3: pipelines[0].window.type: required`},
	{"bad compression",
		"kafka: {brokers: embedded, compression: brotli}\n" + with(nil)[len("kafka: {brokers: embedded}\n"):],
		`c.yaml:1:41: kafka.compression: invalid value "brotli" (want lz4, snappy, zstd, gzip or none)`},
	{"calendar problems",
		with(map[string]string{"window": "    window: {type: calendar, unit: fortnight, time_zone: Europe/Roma, size: 0, hop: 2, offset: 1h}"}),
		`c.yaml:6:36: pipelines[0].window.unit: invalid value "fortnight" (want hour, day, week, month or year)
c.yaml:6:58: pipelines[0].window.time_zone: unknown time zone "Europe/Roma" (use an IANA name like "Europe/Rome")
c.yaml:6:77: pipelines[0].window.size: must be between 1 and 10000
c.yaml:6:88: pipelines[0].window.offset: offset is only valid for tumbling, hopping and cumulate windows`},
	{"calendar hop greater than size, week_start with days, Local",
		with(map[string]string{"window": "    window:\n      type: calendar\n      unit: day\n      time_zone: Local\n      size: 2\n      hop: 3\n      week_start: sunday"}),
		`c.yaml:9:18: pipelines[0].window.time_zone: unknown time zone "Local" (use an IANA name like "Europe/Rome")
c.yaml:11:12: pipelines[0].window.hop: hop (3) must not exceed size (2)
c.yaml:12:7: pipelines[0].window.week_start: week_start is only valid with unit: week`},
	{"calendar without unit, size as a duration",
		with(map[string]string{"window": "    window: {type: calendar, size: 1d}"}),
		`c.yaml:6:5: pipelines[0].window.unit: required
c.yaml:6:36: pipelines[0].window.size: expected an integer, got "1d"`},
	{"cumulate: step that does not divide size, zone without unit",
		with(map[string]string{"window": "    window: {type: cumulate, size: 10s, step: 3s, time_zone: UTC}"}),
		`c.yaml:6:47: pipelines[0].window.step: step (3s) must divide size (10s)
c.yaml:6:51: pipelines[0].window.time_zone: time_zone is only valid with unit (calendar periods)`},
	{"cumulate: no step, no size",
		with(map[string]string{"window": "    window: {type: cumulate}"}),
		`c.yaml:6:5: pipelines[0].window.step: required
c.yaml:6:5: pipelines[0].window.size: required`},
	{"cumulate: too many windows per record, gap",
		with(map[string]string{"window": "    window: {type: cumulate, size: 1h, step: 1ms, gap: 1s}"}),
		`c.yaml:6:46: pipelines[0].window.step: size / step is 3600000 windows for every record, more than 10000: use a larger step
c.yaml:6:51: pipelines[0].window.gap: gap is only valid for session windows`},
	{"cumulate calendar: step not whole hours of a day, size with unit",
		with(map[string]string{"window": "    window: {type: cumulate, unit: day, step: 5h, size: 1d, time_zone: Europe/Rome}"}),
		`c.yaml:6:47: pipelines[0].window.step: step (5h) must be a whole number of hours that divides a day (1h, 2h, 3h, 4h, 6h, 8h, 12h, 24h)
c.yaml:6:51: pipelines[0].window.size: size is only valid without unit: a calendar period is one unit`},
	{"cumulate calendar: no step (divided a day by zero)",
		with(map[string]string{"window": "    window: {type: cumulate, unit: day}"}),
		`c.yaml:6:5: pipelines[0].window.step: required`},
	{"cumulate calendar: hour unit; week step",
		with(map[string]string{"window": "    window: {type: cumulate, unit: hour, step: 10m}"}),
		`c.yaml:6:36: pipelines[0].window.unit: cumulate periods are days, weeks, months or years; for an hour use size: 1h`},
	{"cumulate calendar: a week's step",
		with(map[string]string{"window": "    window: {type: cumulate, unit: week, step: 48h, week_start: sunday}"}),
		`c.yaml:6:48: pipelines[0].window.step: step (48h) must divide a week: 24h or 168h`},
	{"bad window type",
		with(map[string]string{"window": "    window: {type: slidin, size: 10s}"}),
		`c.yaml:6:20: pipelines[0].window.type: invalid value "slidin" (want tumbling, hopping, session, calendar, cumulate, sliding, count or transaction)`},
	{"expression syntax error: the column CEL gives, after the quote",
		with(nil, "    filter: 'value.amount > '"),
		`c.yaml:9:29: pipelines[0].filter: Syntax error: mismatched input '<EOF>' expecting {'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER}`},
	{"expression syntax error in a plain scalar",
		with(nil, "    filter: value.amount >> 2"),
		`c.yaml:9:27: pipelines[0].filter: Syntax error: extraneous input '>' expecting {'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER}`},
	{"expression type errors, each at its operator",
		with(nil, `    key: {expr: 'value.user + 1 + "x" + (1 + "y")'}`),
		`c.yaml:9:33: pipelines[0].key.expr: found no matching overload for '_+_' applied to '(int, string)'
c.yaml:9:44: pipelines[0].key.expr: found no matching overload for '_+_' applied to '(int, string)'`},
	{"a filter that can only fail",
		with(nil, `    filter: '"purchase"'`),
		`c.yaml:9:14: pipelines[0].filter: a filter must be a bool, this expression is a string`},
	{"an aggregate expression that is not a number",
		with(map[string]string{"aggregates": `    aggregates: [{name: s, op: sum, expr: 'value.a + "x"'}]`}),
		`c.yaml:7:44: pipelines[0].aggregates[0].expr: this aggregate needs a number, the expression is a string`},
	{"a key from two places",
		with(nil, "    key: {field: a, expr: value.b}"),
		`c.yaml:9:21: pipelines[0].key.expr: key takes one of field, fields and expr`},
	{"expr on count, expr with field",
		with(map[string]string{"aggregates": "    aggregates:\n      - {name: n, op: count, expr: value.x}\n      - {name: s, op: sum, field: x, expr: value.x}"}),
		`c.yaml:8:30: pipelines[0].aggregates[0].expr: expr is not valid for count
c.yaml:9:38: pipelines[0].aggregates[1].expr: cannot be combined with field`},
	{"timestamp expr with a format",
		with(map[string]string{"timestamp": "    timestamp: {expr: value.t, format: unix_s}"}),
		`c.yaml:5:32: pipelines[0].timestamp.format: format is only valid with field`},
	{"a group that makes the changelog topic invalid",
		with(map[string]string{"input": "    input: {topic: in, group: my group}"}),
		`c.yaml:4:31: pipelines[0].input.group: derived topic "my group-p-changelog" is not a valid Kafka topic name (at most 249 letters, digits, '.', '_' and '-'): shorten or change input.group or the pipeline name`},
	{"a group too long for the changelog topic",
		with(map[string]string{"input": "    input: {topic: in, group: " + strings.Repeat("g", 239) + "}"}),
		`c.yaml:4:31: pipelines[0].input.group: derived topic "` + strings.Repeat("g", 239) + `-p-changelog" is not a valid Kafka topic name (at most 249 letters, digits, '.', '_' and '-'): shorten or change input.group or the pipeline name`},
	{"hopping windows with too many windows per record",
		with(map[string]string{"window": "    window: {type: hopping, size: 1h, hop: 10ms}"}),
		`c.yaml:6:44: pipelines[0].window.hop: size / hop is 360000 windows for every record, more than 10000: use a larger hop`},
	{"sum without field",
		with(map[string]string{"aggregates": "    aggregates:\n      - {name: n, op: count}\n      - {name: revenue, op: sum}"}),
		`c.yaml:9:7: pipelines[0].aggregates[1].field: required for sum (or an expr)`},
	{"field on count",
		with(map[string]string{"aggregates": "    aggregates: [{name: n, op: count, field: x}]"}),
		`c.yaml:7:39: pipelines[0].aggregates[0].field: field is not valid for count`},
	{"precision on avg and out of range",
		with(map[string]string{"aggregates": "    aggregates:\n      - {name: a, op: avg, field: x, precision: 10}\n      - {name: u, op: distinct_approx, field: x, precision: 19}"}),
		`c.yaml:8:38: pipelines[0].aggregates[0].precision: precision is only valid for distinct_approx
c.yaml:9:61: pipelines[0].aggregates[1].precision: must be between 4 and 18`},
	{"quantiles out of range, empty, duplicate, not numbers",
		with(map[string]string{"aggregates": `    aggregates:
      - {name: a, op: quantiles, field: x, quantiles: [1.5, -0.1, 0.5, 0.50, "0.9", .nan]}
      - {name: b, op: quantiles, field: x, quantiles: []}
      - {name: c, op: quantiles, field: x}
      - {name: d, op: quantiles, field: x, quantiles: 0.5}`}),
		`c.yaml:8:56: pipelines[0].aggregates[0].quantiles[0]: must be between 0 and 1
c.yaml:8:61: pipelines[0].aggregates[0].quantiles[1]: must be between 0 and 1
c.yaml:8:72: pipelines[0].aggregates[0].quantiles[3]: duplicate quantile 0.50 (0.5 at line 8)
c.yaml:8:78: pipelines[0].aggregates[0].quantiles[4]: expected a number, got "0.9"
c.yaml:8:85: pipelines[0].aggregates[0].quantiles[5]: expected a number, got .nan
c.yaml:9:55: pipelines[0].aggregates[1].quantiles: must not be empty
c.yaml:10:7: pipelines[0].aggregates[2].quantiles: required
c.yaml:11:55: pipelines[0].aggregates[3].quantiles: expected a list, got 0.5`},
	{"bad accuracies and bucket counts",
		with(map[string]string{"aggregates": `    aggregates:
      - {name: a, op: quantiles, field: x, quantiles: [0.5], relative_accuracy: 0}
      - {name: b, op: quantiles, field: x, quantiles: [0.5], relative_accuracy: 0.5}
      - {name: c, op: quantiles, field: x, quantiles: [0.5], relative_accuracy: 0.00001, max_buckets: 0}
      - {name: d, op: quantiles, field: x, quantiles: [0.5], relative_accuracy: high, max_buckets: 65537}`}),
		`c.yaml:8:81: pipelines[0].aggregates[0].relative_accuracy: must be at least 0.0001 and less than 0.5
c.yaml:9:81: pipelines[0].aggregates[1].relative_accuracy: must be at least 0.0001 and less than 0.5
c.yaml:10:81: pipelines[0].aggregates[2].relative_accuracy: must be at least 0.0001 and less than 0.5
c.yaml:10:103: pipelines[0].aggregates[2].max_buckets: must be between 1 and 65536
c.yaml:11:81: pipelines[0].aggregates[3].relative_accuracy: expected a number, got "high"
c.yaml:11:100: pipelines[0].aggregates[3].max_buckets: must be between 1 and 65536`},
	{"bad k and capacity",
		with(map[string]string{"aggregates": `    aggregates:
      - {name: a, op: top_k, field: x, k: 0}
      - {name: b, op: top_k, field: x}
      - {name: c, op: top_k, field: x, k: 5, capacity: 4}
      - {name: d, op: top_k, field: x, k: 2.5, capacity: 0}`}),
		`c.yaml:8:43: pipelines[0].aggregates[0].k: must be between 1 and 10000
c.yaml:9:7: pipelines[0].aggregates[1].k: required
c.yaml:10:56: pipelines[0].aggregates[2].capacity: must be at least k (5)
c.yaml:11:43: pipelines[0].aggregates[3].k: expected an integer, got 2.5
c.yaml:11:58: pipelines[0].aggregates[3].capacity: must be between 1 and 1000000`},
	{"sketch options on ops that do not take them",
		with(map[string]string{"aggregates": `    aggregates:
      - {name: a, op: avg, field: x, quantiles: [0.5], k: 3}
      - {name: b, op: top_k, field: x, k: 3, relative_accuracy: 0.1, max_buckets: 10}
      - {name: c, op: quantiles, field: x, quantiles: [0.5], capacity: 10, precision: 12}`}),
		`c.yaml:8:38: pipelines[0].aggregates[0].quantiles: quantiles is only valid for quantiles
c.yaml:8:56: pipelines[0].aggregates[0].k: k is only valid for top_k
c.yaml:9:46: pipelines[0].aggregates[1].relative_accuracy: relative_accuracy is only valid for quantiles
c.yaml:9:70: pipelines[0].aggregates[1].max_buckets: max_buckets is only valid for quantiles
c.yaml:10:62: pipelines[0].aggregates[2].capacity: capacity is only valid for top_k
c.yaml:10:76: pipelines[0].aggregates[2].precision: precision is only valid for distinct_approx`},
	{"bad aggregate op and name",
		with(map[string]string{"aggregates": "    aggregates: [{name: total-sum, op: median, field: x}]"}),
		`c.yaml:7:25: pipelines[0].aggregates[0].name: invalid aggregate name "total-sum" (use a letter or '_', then letters, digits and '_')
c.yaml:7:40: pipelines[0].aggregates[0].op: invalid value "median" (want count, sum, min, max, avg, distinct_approx, quantiles, top_k or ratio)`},
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
	{"commit_interval_max below commit_interval",
		with(nil, "    commit_interval: 2s", "    commit_interval_max: 1s"),
		`c.yaml:10:26: pipelines[0].commit_interval_max: must be at least commit_interval (2s)`},
	{"commit_interval_max past half the transaction timeout under exactly_once",
		with(nil, "    delivery: exactly_once", "    commit_interval_max: 6s"),
		`c.yaml:10:26: pipelines[0].commit_interval_max: under exactly_once a transaction stays open for a commit cycle: at most 5s, half the transaction timeout (10s)`},
	{"commit_interval past half the transaction timeout under exactly_once",
		with(nil, "    delivery: exactly_once", "    commit_interval: 6s"),
		`c.yaml:10:22: pipelines[0].commit_interval: under exactly_once a transaction stays open for a commit cycle: at most 5s, half the transaction timeout (10s)`},
	{"early count zero",
		with(nil, "    trigger: {early: {count: 0}}"),
		`c.yaml:9:30: pipelines[0].trigger.early.count: must be at least 1`},
	{"trigger that never fires",
		with(nil, "    trigger: {on_time: false, closing: never}"),
		`c.yaml:9:5: pipelines[0].trigger: never fires a pane (on_time is false, closing is never, no early or late)`},
	{"bad enum value",
		with(nil, "    accumulation: accumulate"),
		`c.yaml:9:19: pipelines[0].accumulation: invalid value "accumulate" (want accumulating, discarding or retracting)`},
	{"max_future zero",
		with(map[string]string{"timestamp": "    timestamp: {field: ts, max_future: 0s}"}),
		`c.yaml:5:40: pipelines[0].timestamp.max_future: must be greater than 0`},
	{"max_future number",
		with(map[string]string{"timestamp": "    timestamp: {field: ts,\n      max_future: 3600}"}),
		`c.yaml:6:19: pipelines[0].timestamp.max_future: 3600 is not a duration (use a duration string like "10s")`},
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
		`c.yaml:5:5: pipelines[0].timestamp: needs a field, an expr, or source: record`},
	{"missing timestamp",
		with(map[string]string{"timestamp": ""}),
		`c.yaml:3:3: pipelines[0].timestamp: required (a field, an expr, or source: record)`},
	{"max_delay with monotonic",
		with(nil, "    watermark: {strategy: monotonic, max_delay: 1s}"),
		`c.yaml:9:38: pipelines[0].watermark.max_delay: max_delay is only valid for bounded_out_of_orderness`},
	{"count window with allowed_lateness",
		with(map[string]string{"window": "    window: {type: count, size: 100}"}, "    allowed_lateness: 1m"),
		`c.yaml:9:5: pipelines[0].allowed_lateness: allowed_lateness does not apply to count windows: they have no event-time end, and are final when full`},
	{"count window with a late trigger",
		with(map[string]string{"window": "    window: {type: count, size: 100}"}, "    trigger: {early: {count: 10}, on_time: true}"),
		`c.yaml:9:35: pipelines[0].trigger.on_time: on_time does not apply to count windows: a count window's pane is ON_TIME and final when the window is full, EARLY before (early triggers)`},
	{"count window hop above size",
		with(map[string]string{"window": "    window: {type: count, size: 10, hop: 20}"}),
		`c.yaml:6:42: pipelines[0].window.hop: hop (20) must not exceed size (10)`},
	{"count window with a duration",
		with(map[string]string{"window": "    window: {type: count, size: 10s}"}),
		`c.yaml:6:33: pipelines[0].window.size: expected an integer, got "10s"`},
	{"count window with progress records",
		with(map[string]string{"window": "    window: {type: count, size: 10}", "output": "    output: {topic: out, progress_interval: 1s}"}),
		`c.yaml:8:26: pipelines[0].output.progress_interval: progress records say through which event time the panes are final; count windows have no event-time end`},
	{"output timestamp not a choice",
		with(map[string]string{"output": "    output: {topic: out, timestamp: now}"}),
		`c.yaml:8:37: pipelines[0].output.timestamp: invalid value "now" (want window_end or emit_time)`},
	{"transaction window without close_when",
		with(map[string]string{"window": "    window: {type: transaction, timeout: 30m}"}),
		`c.yaml:6:5: pipelines[0].window.close_when: required`},
	{"transaction window without timeout",
		with(map[string]string{"window": "    window: {type: transaction, close_when: value.done}"}),
		`c.yaml:6:5: pipelines[0].window.timeout: required`},
	{"transaction window with a bad close_when",
		with(map[string]string{"window": "    window: {type: transaction, close_when: 'value.type ==', timeout: 1m}"}),
		`c.yaml:6:59: pipelines[0].window.close_when: Syntax error: mismatched input '<EOF>' expecting {'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER}`},
	{"close_when on a session window",
		with(map[string]string{"window": "    window: {type: session, gap: 1m, close_when: value.done}"}),
		`c.yaml:6:38: pipelines[0].window.close_when: close_when is only valid for transaction windows`},
	{"quiet_advance without idle_timeout",
		with(nil, "    watermark: {strategy: monotonic, quiet_advance: true}"),
		`c.yaml:9:38: pipelines[0].watermark.quiet_advance: quiet_advance needs idle_timeout: the input is quiet when every partition has been idle that long`},
	{"quiet_advance with idle_timeout 0s",
		with(nil, "    watermark: {idle_timeout: 0s, quiet_advance: true}"),
		`c.yaml:9:35: pipelines[0].watermark.quiet_advance: quiet_advance needs idle_timeout: the input is quiet when every partition has been idle that long`},
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
	{"input and inputs",
		with(nil, "    inputs: [{topic: a}, {topic: b}]"),
		`c.yaml:4:5: pipelines[0].input: cannot be combined with inputs (one input topic: input; several: inputs)`},
	{"one of inputs",
		with(map[string]string{"input": "    inputs: [{topic: a}]"}),
		`c.yaml:4:13: pipelines[0].inputs: takes 2 to 8 input topics, not 1 (one input topic: input)`},
	{"inputs with one topic twice",
		with(map[string]string{"input": "    inputs: [{topic: a}, {topic: a, as: a2}]"}),
		`c.yaml:4:34: pipelines[0].inputs[1].topic: duplicate input topic name "a" (first at line 4)`},
	{"inputs with one name twice",
		with(map[string]string{"input": "    inputs: [{topic: a, as: x}, {topic: b, as: x}]"}),
		`c.yaml:4:48: pipelines[0].inputs[1].as: duplicate input name "x" (first at line 4)`},
	{"an input without a timestamp",
		with(map[string]string{"input": "    inputs: [{topic: a}, {topic: b}]", "timestamp": "    group: g"}),
		`c.yaml:4:14: pipelines[0].inputs[0].timestamp: required here or at the pipeline (a field, an expr, or source: record)
c.yaml:4:26: pipelines[0].inputs[1].timestamp: required here or at the pipeline (a field, an expr, or source: record)`},
	{"an aggregate of an input that is not one",
		with(map[string]string{"input": "    inputs: [{topic: a}, {topic: b, as: bee}]", "aggregates": "    aggregates: [{name: n, op: count, input: b}]"}),
		`c.yaml:7:46: pipelines[0].aggregates[0].input: no input is named "b" (the inputs: a, bee)`},
	{"an aggregate's input with one input",
		with(map[string]string{"aggregates": "    aggregates: [{name: n, op: count, input: in}]"}),
		`c.yaml:7:46: pipelines[0].aggregates[0].input: only valid with inputs (an aggregate of one of several input topics)`},
	{"group with one input",
		with(nil, "    group: g"),
		`c.yaml:9:5: pipelines[0].group: only valid with inputs (one input's group is input.group)`},
	{"output to one of the inputs",
		with(map[string]string{"input": "    inputs: [{topic: a}, {topic: b}]", "output": "    output: {topic: b}"}),
		`c.yaml:8:21: pipelines[0].output.topic: must differ from the input topic "b"`},
	{"repartition with an input keyed by the record key",
		with(map[string]string{"input": "    inputs: [{topic: a, key: {field: k}}, {topic: b}]"}, "    repartition: true"),
		`c.yaml:9:18: pipelines[0].repartition: needs key.field, key.fields or key.expr of every input (input b reads the record key)`},
	{"co-partitioned inputs of different partition counts",
		with(map[string]string{"input": "    inputs: [{topic: a, partitions: 4}, {topic: b, partitions: 2}, {topic: c}]"}),
		`c.yaml:4:64: pipelines[0].inputs[1].partitions: input b has 2 partitions, input a 4: without repartition: true, every input needs the same partition count (partition p of each holds the same keys); set repartition: true to read inputs of different counts`},
	{"ratio without of and to",
		with(map[string]string{"aggregates": "    aggregates: [{name: n, op: count}, {name: r, op: ratio}]"}),
		`c.yaml:7:40: pipelines[0].aggregates[1].of: required
c.yaml:7:40: pipelines[0].aggregates[1].to: required`},
	{"ratio of itself, of a top_k, with a field",
		with(map[string]string{"aggregates": "    aggregates: [{name: t, op: top_k, field: p, k: 2}, {name: r, op: ratio, of: r, to: t, field: x}]"}),
		`c.yaml:7:81: pipelines[0].aggregates[1].of: a ratio cannot divide itself
c.yaml:7:88: pipelines[0].aggregates[1].to: aggregate t is a top_k: a ratio divides counts, sums, minima, maxima, averages or distinct counts
c.yaml:7:91: pipelines[0].aggregates[1].field: field is not valid for ratio, which divides two other aggregates (of, to)`},
	{"ratio of an aggregate that is not one, of on a count",
		with(map[string]string{"aggregates": "    aggregates: [{name: n, op: count, of: n}, {name: r, op: ratio, of: m, to: n}]"}),
		`c.yaml:7:39: pipelines[0].aggregates[0].of: only valid for ratio
c.yaml:7:72: pipelines[0].aggregates[1].of: no aggregate is named "m"`},
	{"join without inputs",
		with(map[string]string{"window": "", "aggregates": ""}, "    join: {type: interval, left: a, right: b, between: [0s, 1m]}"),
		`c.yaml:7:5: pipelines[0].join: joins two inputs: give the pipeline inputs (docs/SEMANTICS.md, Joins)`},
	{"join of an input with itself and one that is not",
		with(map[string]string{"input": "    inputs: [{topic: a}, {topic: b}]", "window": "", "aggregates": ""}, "    join: {type: interval, left: a, right: a, between: [0s, 1m]}"),
		`c.yaml:7:44: pipelines[0].join.right: joins an input with itself: left and right name two inputs`},
	{"join naming no input",
		with(map[string]string{"input": "    inputs: [{topic: a}, {topic: b}]", "window": "", "aggregates": ""}, "    join: {type: interval, left: x, right: b, between: [0s, 1m]}"),
		`c.yaml:7:34: pipelines[0].join.left: no input is named "x" (the inputs: a, b)`},
	{"interval join with a window, no between",
		with(map[string]string{"input": "    inputs: [{topic: a}, {topic: b}]", "aggregates": ""}, "    join: {type: interval, left: a, right: b}"),
		`c.yaml:6:5: pipelines[0].window: an interval join takes no window: its records match within join.between
c.yaml:8:5: pipelines[0].join.between: required`},
	{"interval join with bounds reversed",
		with(map[string]string{"input": "    inputs: [{topic: a}, {topic: b}]", "window": "", "aggregates": ""}, "    join: {type: interval, left: a, right: b, between: [1m, -1m]}"),
		`c.yaml:7:56: pipelines[0].join.between: lower bound above the upper one`},
	{"window join of sessions",
		with(map[string]string{"input": "    inputs: [{topic: a}, {topic: b}]", "aggregates": "", "window": "    window: {type: session, gap: 1m}"}, "    join: {type: window, left: a, right: b}"),
		`c.yaml:6:13: pipelines[0].window: a window join takes tumbling or hopping windows, not session`},
	{"join with aggregates, on_time and early count",
		with(map[string]string{"input": "    inputs: [{topic: a}, {topic: b}]", "window": ""}, "    join: {type: interval, left: a, right: b, between: [0s, 1m], kind: left}", "    trigger: {on_time: false, early: {count: 3}}"),
		`c.yaml:6:5: pipelines[0].aggregates: not valid with join: a join emits its matches and unmatched rows, not panes
c.yaml:9:15: pipelines[0].trigger.on_time: on_time does not apply to a join: a match is emitted when both records are in, an unmatched row when the frontier passes its last chance
c.yaml:9:39: pipelines[0].trigger.early.count: a join's early rows come with processing time: early.every`},
	{"early rows of an inner join, avro output",
		with(map[string]string{"input": "    inputs: [{topic: a}, {topic: b}]", "window": "", "aggregates": "", "output": "    output: {topic: out, format: avro}"}, "    join: {type: interval, left: a, right: b, between: [0s, 1m]}", "    trigger: {early: {every: 1m}}"),
		`c.yaml:6:26: pipelines[0].output.format: not valid with join in this version: a join writes JSON rows (docs/SEMANTICS.md, Joins)
c.yaml:6:34: pipelines[0].output.format: avro output needs schema_registry (the registry its pane schema is registered in; docs/SEMANTICS.md, Output)
c.yaml:8:23: pipelines[0].trigger.early.every: early rows are unmatched rows: a left or full join has them, an inner join emits matches only`},
	{"join of three inputs",
		with(map[string]string{"input": "    inputs: [{topic: a}, {topic: b}, {topic: c}]", "window": "", "aggregates": ""}, "    join: {type: interval, left: a, right: b, between: [0s, 1m]}"),
		`c.yaml:7:5: pipelines[0].join: joins two inputs, and this pipeline has 3: a third input's records would only hold the frontier`},
	{"early.count on sliding windows of several inputs",
		with(map[string]string{"input": "    inputs: [{topic: a}, {topic: b}]", "window": "    window: {type: sliding, size: 1m}"}, "    trigger: {early: {count: 2}}"),
		`c.yaml:9:5: pipelines[0].trigger: early.count is not supported for sliding windows of several inputs in this version: use early.every`},
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
	{"broker written host: port in a flow list",
		"kafka: {brokers: [localhost: 9092]}\n" + with(nil)[len("kafka: {brokers: embedded}\n"):],
		`c.yaml:1:19: kafka.brokers[0]: expected a host:port address, got a mapping (YAML reads ` + "`host: port`" + ` as one): quote it, "host:port"`},
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
	{"standby replicas out of range",
		"state: {standby_replicas: -1}\n" + with(nil),
		`c.yaml:1:27: state.standby_replicas: must be between 0 and 8`},
	{"bad size",
		"state: {cache_bytes: 64 megabytes}\n" + with(nil),
		`c.yaml:1:22: state.cache_bytes: invalid size "64 megabytes" (use a byte count or a size like "64MiB")`},
	{"empty file", "",
		`c.yaml:1:1: pipelines: required`},
	{"empty pipelines", "kafka: {brokers: embedded}\npipelines: []\n",
		`c.yaml:2:12: pipelines: must not be empty`},
	{"undefined alias",
		with(map[string]string{"input": "    input: *in"}),
		`c.yaml:4:12: pipelines[0].input: undefined alias "in"`},
	{"two documents",
		with(nil) + "---\n" + with(nil),
		`c.yaml:10:1: multiple YAML documents are not supported`},
}

// checkParseError asserts that src is refused with exactly the error text
// want, and returns the error.
func checkParseError(t *testing.T, src, want string) error {
	t.Helper()
	c, err := Parse("c.yaml", []byte(src))
	if err == nil {
		t.Fatalf("Parse:\n%s\nno error, want\n%s", src, want)
	}
	if c != nil {
		t.Errorf("Parse returned a config with an error")
	}
	if err.Error() != want {
		t.Errorf("Parse:\n%s\nerror:\n%v\nwant:\n%s", src, err, want)
	}
	return err
}

// TestInputs: a pipeline with several inputs takes the pipeline's filter,
// key and timestamp unless an input has its own, and each aggregate's
// input; ForInput gives each input's view.
func TestInputs(t *testing.T) {
	c, err := Parse("c.yaml", []byte(head+`  - name: ctr
    group: g
    inputs:
      - {topic: impressions, as: imp}
      - {topic: clicks, as: click, filter: 'value.valid', key: {field: c}, timestamp: {field: t, format: unix_s}}
    key: {field: campaign}
    timestamp: {field: ts}
    window: {type: tumbling, size: 1m}
    aggregates:
      - {name: impressions, op: count, input: imp}
      - {name: clicks, op: count, input: click}
      - {name: events, op: count}
    output: {topic: out}
`))
	if err != nil {
		t.Fatal(err)
	}
	p := &c.Pipelines[0]
	if p.Input.Group != "g" || p.Input.Topic != "impressions" || len(p.Inputs) != 2 {
		t.Fatalf("input %+v, inputs %+v", p.Input, p.Inputs)
	}
	if !reflect.DeepEqual(p.AggregateInputs, []int{0, 1, -1}) {
		t.Errorf("aggregate inputs %v", p.AggregateInputs)
	}
	imp, click := p.ForInput(0), p.ForInput(1)
	if imp.Key.Field != "campaign" || imp.Timestamp.Field != "ts" || imp.Filter != nil || imp.Input.Topic != "impressions" {
		t.Errorf("impressions read as %+v %+v %v", imp.Key, imp.Timestamp, imp.Filter)
	}
	if click.Key.Field != "c" || click.Timestamp.Field != "t" || click.Timestamp.Format != UnixS || click.Filter == nil || click.Input.Topic != "clicks" {
		t.Errorf("clicks read as %+v %+v %v", click.Key, click.Timestamp, click.Filter)
	}
	if !reflect.DeepEqual(imp.SkipAggregates, []bool{false, true, false}) || !reflect.DeepEqual(click.SkipAggregates, []bool{true, false, false}) {
		t.Errorf("skips %v %v", imp.SkipAggregates, click.SkipAggregates)
	}
	if p.ForInput(0) == p || p.SkipAggregates != nil {
		t.Error("ForInput changed the pipeline")
	}
}

func TestParseErrors(t *testing.T) {
	for _, tt := range errorCases {
		t.Run(tt.name, func(t *testing.T) {
			err := checkParseError(t, tt.src, tt.want)
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
	// The shipped example configurations and every golden pipeline of replay.
	for _, pattern := range []string{"../configs/*.yaml", "../cmd/windowd/testdata/*.yaml"} {
		files, _ := filepath.Glob(pattern)
		for _, file := range files {
			if b, err := os.ReadFile(file); err == nil {
				f.Add(b)
			}
		}
	}
	goldens, _ := filepath.Glob("../replay/testdata/*.txt")
	for _, file := range goldens {
		b, err := os.ReadFile(file)
		if err != nil {
			continue
		}
		_, sec, ok := strings.Cut(string(b), "\n-- pipeline --\n")
		if !ok {
			continue
		}
		sec, _, _ = strings.Cut(sec, "\n-- ")
		var cfg strings.Builder
		cfg.WriteString(head + "  - name: golden\n    input: {topic: in}\n    output: {topic: out}\n")
		for _, l := range strings.Split(strings.TrimRight(sec, "\n"), "\n") {
			cfg.WriteString("    " + l + "\n")
		}
		f.Add([]byte(cfg.String()))
	}
	// Edges of the schema, the value converters and YAML itself.
	for _, s := range []string{
		with(map[string]string{"window": "    window: {type: hopping, size: 10s, hop: 3s, offset: -1s}"},
			"    watermark: {strategy: monotonic, max_delay: 0s, every: 9223372036854775807, idle_timeout: 2562047h47m16.854775807s}",
			"    allowed_lateness: 9223372036854775807ms",
			"    trigger: {early: {count: 0, every: 1ns}, on_time: false, late: {every: 0s}, closing: if_changed}",
			"    accumulation: retracting",
			"    late_topic: in",
			"    dead_letter_topic: out",
			"    delivery: exactly_once",
			"    commit_interval: 1.5ms"),
		with(map[string]string{"window": "    window: {type: session, gap: 5s, size: 1s, hop: 1s, offset: 1s}",
			"timestamp":  "    timestamp: {source: record, field: ts, format: rfc3339}",
			"aggregates": "    aggregates: [{name: d, op: distinct_approx, field: a.b, precision: 3}, {name: d, op: distinct_approx, field: x, precision: 19}, {name: s, op: sum}, {name: c, op: count, field: x}]"}),
		with(map[string]string{"aggregates": "    aggregates: []", "input": "    input: {topic: in, group: '', partitions: 2147483648}"},
			"    key: {field: ..}", "    timestamp: {field: 'a.', format: unix_ns}"),
		with(map[string]string{"window": "    window: {type: tumbling, size: -10s}"}, "    allowed_lateness: 1e3s", "    watermark: {max_delay: 10 s, every: 0x10, idle_timeout: ٣s}"),
		with(map[string]string{"window": "    window: {type: tumbling, size: 1us}"}, "    watermark: {every: 1_000, max_delay: 1h1m1s1ms1us}", "    trigger: {early: {count: .inf}, on_time: yes}"),
		with(map[string]string{"input": "    input: {topic: \"a/b\", partitions: 0o17}", "name": "  - name: \"p q\""}),
		with(nil) + strings.Join(pipe, "\n") + "\n", // duplicate pipeline name
		head + "  - " + strings.Repeat("{a: ", 200) + strings.Repeat("}", 200) + "\n",
		head + "  - " + strings.Repeat("[", 2000) + strings.Repeat("]", 2000) + "\n",
		strings.Repeat("- ", 500) + "x\n",
		"kafka: {brokers: [\"a:1\", \"[::1]:9092\", \"host:99999\", \":1\", \"h:\", embedded]}\npipelines: []\n",
		"kafka: {brokers: embedded, embedded_listen: \"localhost:0\", client_id: \"\", session_timeout: 0s}\nstate: {dir: \"\", cache_bytes: 1MiB}\nhttp: {listen: \":0\"}\nshutdown_grace: 1ns\n" + strings.Join(pipe, "\n") + "\n",
		"kafka: {brokers: embedded}\nstate: {cache_bytes: 18446744073709551616}\n",
		"kafka: {brokers: embedded}\nstate: {cache_bytes: 8EiB}\n",
		"kafka: {brokers: embedded}\nstate: {cache_bytes: \"1.5 GB\"}\n",
		"kafka: {brokers: embedded}\nstate: {cache_bytes: 1048575}\n",
		"kafka: {brokers: embedded}\ngenerator: {topic: t, rate: 0, keys: 10000001, disorder: -1s, late_every: -1, late_by: 0s, malformed_every: 1}\n" + strings.Join(pipe, "\n") + "\n",
		"kafka: {brokers: [\"k:9092\"]}\ngenerator: {topic: t}\n" + strings.Join(pipe, "\n") + "\n",
		"kafka:\n  brokers: [\"k:9092\"]\n  tls: {ca_file: /nonexistent/ca.pem, cert_file: c.pem, server_name: \"\", insecure_skip_verify: 1}\n  sasl: {mechanism: scram-sha-256, username: \"${}\", password: \"${1A}${HOME\", password_file: /nonexistent/pw}\n" + strings.Join(pipe, "\n") + "\n",
		"kafka:\n  brokers: [\"k:9092\"]\n  sasl: {mechanism: SCRAM-SHA-512, username: \"$${WINDOWD_FUZZ_UNSET}-x\", password: \"${WINDOWD_FUZZ_UNSET_PASSWORD}\"}\n" + strings.Join(pipe, "\n") + "\n",
		"kafka:\n  brokers: embedded\n  tls: {}\n  sasl: {mechanism: PLAIN}\n" + strings.Join(pipe, "\n") + "\n",
		// Anchors, aliases, merge keys, tags, block scalars, documents.
		"defs: &d {topic: in}\nkafka: {brokers: embedded}\npipelines:\n  - name: p\n    input: *d\n    output: {<<: *d, topic: out}\n    timestamp: {field: ts}\n    window: {type: tumbling, size: 10s}\n    aggregates: [{name: n, op: count}]\n",
		"kafka: {brokers: embedded}\npipelines:\n  - &p\n    <<: [*p, *q]\n    name: !!str 1\n    input: {topic: !!binary aW4=}\n    window: !!map {type: tumbling, size: !!timestamp 2001-12-14}\n",
		"a0: &a0 x\n" + func() string {
			var b strings.Builder
			for i := 1; i <= 20; i++ {
				fmt.Fprintf(&b, "a%d: &a%d *a%d\n", i, i, i-1)
			}
			return b.String()
		}() + "kafka: {brokers: *a20}\npipelines: *a20\n",
		"a: &a [*a, *a, *a, *a, *a, *a, *a, *a, *a]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\nkafka: *c\npipelines: *c\n",
		"kafka: {brokers: embedded}\n---\npipelines: []\n...\n",
		"# only a comment\n",
		"",
		"~\n",
		"[]\n",
		"!custom {kafka: {brokers: embedded}}\n",
		"? [kafka]\n: {brokers: embedded}\n? {a: 1}\n: 2\npipelines: x\n",
		"kafka: {brokers: embedded}\nkafka: {brokers: embedded}\npipelines:\n  - name: |\n      multi\n      line\n    input: >-\n      folded\n",
		"\ufeffkafka: {brokers: embedded}\r\npipelines:\r\n\t- name: p\r\n",
		"kafka: {brokers: \"\xff\xfe\"}\npipelines: [{name: \"\x00\"}]\n",
		`{"kafka": {"brokers": ["embedded"]}, "pipelines": [{"name": "p", "input": {"topic": "in", "partitions": 1e2}, "timestamp": {"field": "ts"}, "window": {"type": "session", "gap": "5s"}, "aggregates": [{"name": "n", "op": "count"}], "output": {"topic": "out"},}]}`,
		`{"kafka": {"brokers": "embedded"}, "kafka": null, "pipelines": [null, 1, "x", [], {}]}`,
	} {
		f.Add([]byte(s))
	}
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
	if p := c.Pipelines[0]; !p.OutputStdout || p.CommitInterval != 250 || p.OutputTimestamp != WindowEnd {
		t.Fatalf("pipeline = %+v", p)
	}
	c, err = Parse("s.yaml", []byte(strings.Replace(base, "stdout: true", "timestamp: emit_time", 1)))
	if err != nil || c.Pipelines[0].OutputTimestamp != EmitTime {
		t.Fatalf("output.timestamp: emit_time: %v", err)
	}
	_, err = Parse("s.yaml", []byte(strings.Replace(base, "brokers: embedded", `brokers: ["k:9092"]`, 1)))
	if err == nil || err.Error() != `s.yaml:3:1: generator: only valid with kafka.brokers: embedded` {
		t.Fatalf("generator with a real cluster: %v", err)
	}
}

// writePKI writes, into the working directory, a CA (ca.pem), a client
// certificate and its key signed by it (client.pem, client.key), a key that
// matches nothing (other.key) and a file that is not PEM (garbage.pem).
func writePKI(t *testing.T) {
	t.Helper()
	newKey := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	writePEM := func(name, typ string, der []byte) {
		if err := os.WriteFile(name, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeKey := func(name string, k *ecdsa.PrivateKey) {
		der, err := x509.MarshalPKCS8PrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		writePEM(name, "PRIVATE KEY", der)
	}
	caKey, clientKey := newKey(), newKey()
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	client := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "windowd"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	clientDER, err := x509.CreateCertificate(rand.Reader, client, ca, &clientKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	writePEM("ca.pem", "CERTIFICATE", caDER)
	writePEM("client.pem", "CERTIFICATE", clientDER)
	writeKey("client.key", clientKey)
	writeKey("other.key", newKey())
	if err := os.WriteFile("garbage.pem", []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}

// secured is a valid config for a real cluster whose kafka mapping has the
// given lines after `brokers` (from line 3 on).
func secured(kafka ...string) string {
	var b strings.Builder
	b.WriteString("kafka:\n  brokers: [\"k:9092\"]\n")
	for _, l := range kafka {
		b.WriteString(l + "\n")
	}
	b.WriteString("pipelines:\n" + strings.Join(pipe, "\n") + "\n")
	return b.String()
}

// securityDir makes a temporary working directory holding writePKI's files
// and password files, and sets the environment variables of the tests.
func securityDir(t *testing.T) {
	t.Helper()
	t.Chdir(t.TempDir())
	writePKI(t)
	for name, data := range map[string]string{"pw": "s3cr3t-from-file\n", "pw-crlf": "s3cr3t\r\n\r\n", "pw-empty": "\n"} {
		if err := os.WriteFile(name, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir("dir", 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("WINDOWD_TEST_PASSWORD", "s3cr3t-from-env")
	t.Setenv("WINDOWD_TEST_TEAM", "analytics")
	t.Setenv("WINDOWD_TEST_EMPTY", "")
	os.Unsetenv("WINDOWD_TEST_UNSET")
}

func TestSecurityValid(t *testing.T) {
	securityDir(t)
	tests := []struct {
		name string
		src  string
		tls  *TLS
		sasl *SASL
	}{
		{"tls and scram from the environment", secured(
			"  tls:",
			"    ca_file: ca.pem",
			"    cert_file: client.pem",
			"    key_file: client.key",
			"    server_name: kafka.internal",
			"  sasl:",
			"    mechanism: SCRAM-SHA-512",
			"    username: ${WINDOWD_TEST_TEAM}-windowd",
			"    password: ${WINDOWD_TEST_PASSWORD}"),
			&TLS{CAFile: "ca.pem", CertFile: "client.pem", KeyFile: "client.key", ServerName: "kafka.internal"},
			&SASL{Mechanism: SASLScramSHA512, Username: "analytics-windowd", Password: NewSecret("s3cr3t-from-env")}},
		{"empty tls: system roots", secured("  tls: {}"), &TLS{}, nil},
		{"insecure tls", secured("  tls: {insecure_skip_verify: true}"), &TLS{InsecureSkipVerify: true}, nil},
		{"password file", secured("  sasl: {mechanism: SCRAM-SHA-256, username: windowd, password_file: pw}"),
			nil, &SASL{Mechanism: SASLScramSHA256, Username: "windowd", Password: NewSecret("s3cr3t-from-file")}},
		{"password file with CRLF", secured("  sasl: {mechanism: PLAIN, username: u, password_file: pw-crlf}"),
			nil, &SASL{Mechanism: SASLPlain, Username: "u", Password: NewSecret("s3cr3t")}},
		{"literal password with $ and braces", secured(`  sasl: {mechanism: PLAIN, username: u, password: "pa$s{w}$"}`),
			nil, &SASL{Mechanism: SASLPlain, Username: "u", Password: NewSecret("pa$s{w}$")}},
		{"embedded references", secured(`  sasl: {mechanism: PLAIN, username: u, password: "x${WINDOWD_TEST_TEAM}y${WINDOWD_TEST_EMPTY}z"}`),
			nil, &SASL{Mechanism: SASLPlain, Username: "u", Password: NewSecret("xanalyticsyz")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse("c.yaml", []byte(tt.src))
			if err != nil {
				t.Fatalf("Parse:\n%s\nerror:\n%v", tt.src, err)
			}
			if !reflect.DeepEqual(c.Kafka.TLS, tt.tls) {
				t.Errorf("TLS = %+v, want %+v", c.Kafka.TLS, tt.tls)
			}
			if !reflect.DeepEqual(c.Kafka.SASL, tt.sasl) {
				t.Errorf("SASL = %+v, want %+v", c.Kafka.SASL, tt.sasl)
			}
		})
	}
}

func TestSecurityErrors(t *testing.T) {
	securityDir(t)
	tests := []struct {
		name string
		src  string
		want string
	}{
		{"cert without key",
			secured("  tls: {ca_file: ca.pem, cert_file: client.pem}"),
			`c.yaml:3:26: kafka.tls.cert_file: needs key_file`},
		{"key without cert",
			secured("  tls:", "    key_file: client.key"),
			`c.yaml:4:5: kafka.tls.key_file: needs cert_file`},
		{"unreadable files",
			secured("  tls:", "    ca_file: missing.pem", "    cert_file: dir", "    key_file: /nonexistent/client.key"),
			`c.yaml:4:14: kafka.tls.ca_file: cannot read "missing.pem": no such file or directory
c.yaml:5:16: kafka.tls.cert_file: cannot read "dir": is a directory
c.yaml:6:15: kafka.tls.key_file: cannot read "/nonexistent/client.key": no such file or directory`},
		{"not a regular file",
			secured("  sasl: {mechanism: PLAIN, username: u, password_file: /dev/null}"),
			`c.yaml:3:56: kafka.sasl.password_file: cannot read "/dev/null": not a regular file`},
		{"not PEM",
			secured("  tls: {ca_file: garbage.pem}"),
			`c.yaml:3:18: kafka.tls.ca_file: no PEM certificate in "garbage.pem"`},
		{"key of another certificate",
			secured("  tls: {cert_file: client.pem, key_file: other.key}"),
			`c.yaml:3:20: kafka.tls.cert_file: cannot be used with key_file: tls: private key does not match public key`},
		{"tls fields",
			secured("  tls: {ca: ca.pem, server_name: \"\", insecure_skip_verify: \"no\"}"),
			`c.yaml:3:9: kafka.tls.ca: unknown field "ca"
c.yaml:3:34: kafka.tls.server_name: must not be empty
c.yaml:3:60: kafka.tls.insecure_skip_verify: expected true or false, got "no"`},
		{"tls is not a mapping",
			secured("  tls: true"),
			`c.yaml:3:8: kafka.tls: expected a mapping, got true`},
		{"unknown mechanism",
			secured("  sasl: {mechanism: SCRAM-SHA-1, username: u, password: p}"),
			`c.yaml:3:21: kafka.sasl.mechanism: invalid value "SCRAM-SHA-1" (want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512)`},
		{"missing mechanism and username",
			secured("  sasl:", "    password: p"),
			`c.yaml:3:3: kafka.sasl.mechanism: required
c.yaml:3:3: kafka.sasl.username: required`},
		{"password and password_file",
			secured("  sasl:", "    mechanism: PLAIN", "    username: u", "    password: p", "    password_file: pw"),
			`c.yaml:7:5: kafka.sasl.password_file: cannot be combined with password`},
		{"no password",
			secured("  sasl:", "    mechanism: PLAIN", "    username: u"),
			`c.yaml:3:3: kafka.sasl: needs password or password_file`},
		{"unset variables",
			secured("  sasl:", "    mechanism: PLAIN", "    username: ${WINDOWD_TEST_UNSET}", "    password: a${WINDOWD_TEST_UNSET}b${WINDOWD_TEST_NOPE}"),
			`c.yaml:5:15: kafka.sasl.username: environment variable WINDOWD_TEST_UNSET is not set
c.yaml:6:15: kafka.sasl.password: environment variable WINDOWD_TEST_UNSET is not set
c.yaml:6:15: kafka.sasl.password: environment variable WINDOWD_TEST_NOPE is not set`},
		{"bad reference",
			secured(`  sasl: {mechanism: PLAIN, username: u, password: "ab${ WINDOWD_TEST_PASSWORD }"}`),
			`c.yaml:3:51: kafka.sasl.password: "${" must start a reference ${NAME} (NAME: a letter or '_', then letters, digits and '_')`},
		{"unterminated reference",
			secured(`  sasl: {mechanism: PLAIN, username: u, password: "ab${WINDOWD_TEST_PASSWORD"}`),
			`c.yaml:3:51: kafka.sasl.password: "${" must start a reference ${NAME} (NAME: a letter or '_', then letters, digits and '_')`},
		{"expands to nothing",
			secured(`  sasl: {mechanism: PLAIN, username: u, password: "${WINDOWD_TEST_EMPTY}"}`),
			`c.yaml:3:51: kafka.sasl.password: "${WINDOWD_TEST_EMPTY}" expands to an empty string`},
		{"password is a number",
			secured("  sasl: {mechanism: PLAIN, username: u, password: 123456789}"),
			`c.yaml:3:51: kafka.sasl.password: expected a string, got a number (quote the value)`},
		{"empty password and user",
			secured(`  sasl: {mechanism: PLAIN, username: "", password: ""}`),
			`c.yaml:3:38: kafka.sasl.username: must not be empty
c.yaml:3:52: kafka.sasl.password: must not be empty`},
		{"password files",
			secured("  sasl: {mechanism: PLAIN, username: u, password_file: pw-empty}"),
			`c.yaml:3:56: kafka.sasl.password_file: "pw-empty" is empty`},
		{"missing password file",
			secured("  sasl: {mechanism: PLAIN, username: u, password_file: /run/secrets/none}"),
			`c.yaml:3:56: kafka.sasl.password_file: cannot read "/run/secrets/none": no such file or directory`},
		{"embedded broker",
			"kafka:\n  brokers: embedded\n  tls: {}\n  sasl: {mechanism: PLAIN, username: u, password: p}\npipelines:\n" + strings.Join(pipe, "\n") + "\n",
			`c.yaml:3:3: kafka.tls: not valid with kafka.brokers: embedded
c.yaml:4:3: kafka.sasl: not valid with kafka.brokers: embedded`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkParseError(t, tt.src, tt.want)
			for _, secret := range []string{"s3cr3t", "123456789", "ab"} {
				if strings.Contains(err.Error(), secret) && !strings.Contains(tt.want, secret) {
					t.Errorf("error shows %q", secret)
				}
			}
		})
	}
}

// TestSecretRedacted: no way of printing a loaded configuration shows the password.
func TestSecretRedacted(t *testing.T) {
	securityDir(t)
	c, err := Parse("c.yaml", []byte(secured("  sasl: {mechanism: SCRAM-SHA-512, username: windowd, password: \"${WINDOWD_TEST_PASSWORD}\"}")))
	if err != nil {
		t.Fatal(err)
	}
	const pw = "s3cr3t-from-env"
	if got := c.Kafka.SASL.Password.Reveal(); got != pw {
		t.Fatalf("Reveal = %q, want %q", got, pw)
	}
	var outs []string
	for _, v := range []any{c, *c, c.Kafka, c.Kafka.SASL, *c.Kafka.SASL, c.Kafka.SASL.Password} {
		for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%d", "%t"} {
			outs = append(outs, fmt.Sprintf(verb, v))
		}
		j, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		outs = append(outs, string(j))
	}
	var buf bytes.Buffer
	log := zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(&buf), zap.DebugLevel))
	log.Info("config", zap.Any("config", c), zap.Any("kafka", c.Kafka), zap.Stringer("password", c.Kafka.SASL.Password),
		zap.Any("sasl", *c.Kafka.SASL), zap.Reflect("reflect", c.Kafka.SASL))
	outs = append(outs, buf.String())
	hexPW := fmt.Sprintf("%x", pw)
	for _, out := range outs {
		if strings.Contains(out, pw) || strings.Contains(out, hexPW) {
			t.Errorf("output shows the password: %s", out)
		}
	}
	if !strings.Contains(buf.String(), `"Password":"[redacted]"`) {
		t.Errorf("zap output = %s, want the password as [redacted]", buf.String())
	}
	if got := fmt.Sprintf("%+v", *c.Kafka.SASL); got != "{Mechanism:SCRAM-SHA-512 Username:windowd Password:[redacted]}" {
		t.Errorf("%%+v = %s", got)
	}
}

// A UTF-8 byte order mark before the first key is not part of it.
func TestByteOrderMark(t *testing.T) {
	if _, err := Parse("c.yaml", []byte("\xef\xbb\xbf"+with(nil))); err != nil {
		t.Fatalf("a config after a byte order mark: %v", err)
	}
}

// A file larger than MaxConfigBytes is refused after reading that much,
// not read to the end (validate --config /dev/zero).
func TestLoadRefusesHugeFile(t *testing.T) {
	if _, err := os.Stat("/dev/zero"); err != nil {
		t.Skip("no /dev/zero")
	}
	if _, err := Load("/dev/zero"); err == nil || !strings.Contains(err.Error(), "larger than 4 MiB") {
		t.Fatalf("Load(/dev/zero): %v", err)
	}
}

// TestBrokersInFlowMapping: `kafka: {brokers: [localhost:9092]}` is a list
// of one address (goccy/go-yaml reads the unquoted host:port in a flow
// list inside a flow mapping as a mapping).
func TestBrokersInFlowMapping(t *testing.T) {
	for src, want := range map[string]string{
		"kafka: {brokers: [localhost:9092]}":                            "localhost:9092",
		"kafka: {brokers: [localhost:9092, \"b:1\", 10.0.0.2:9093]}":    "localhost:9092 b:1 10.0.0.2:9093",
		"kafka: {client_id: x, brokers: [ kafka-0.svc:9092 ,k1:9093 ]}": "kafka-0.svc:9092 k1:9093",
		"kafka:\n  brokers: [localhost:9092]":                           "localhost:9092",
	} {
		c, err := Parse("c.yaml", []byte(src+"\n"+with(nil)[len("kafka: {brokers: embedded}\n"):]))
		if err != nil {
			t.Errorf("%s: %v", src, err)
			continue
		}
		if got := strings.Join(c.Kafka.Brokers, " "); got != want || !c.HasBrokers() {
			t.Errorf("%s: brokers %q, want %q", src, got, want)
		}
	}
}

// TestNoBrokers: a configuration of pipelines only loads (replay and
// validate); HasBrokers tells run to refuse it.
func TestNoBrokers(t *testing.T) {
	for _, src := range []string{
		with(nil)[len("kafka: {brokers: embedded}\n"):],
		"kafka: {client_id: x}\n" + with(nil)[len("kafka: {brokers: embedded}\n"):],
	} {
		c, err := Parse("c.yaml", []byte(src))
		if err != nil {
			t.Fatalf("%v\n%s", err, src)
		}
		if c.HasBrokers() || len(c.Pipelines) != 1 {
			t.Errorf("HasBrokers %v, %d pipelines", c.HasBrokers(), len(c.Pipelines))
		}
	}
	c, err := Parse("c.yaml", []byte(with(nil)))
	if err != nil || !c.HasBrokers() {
		t.Errorf("embedded: HasBrokers false (%v)", err)
	}
}

// registry is a configuration of lines (schema_registry) and a pipeline
// whose input has extra (", format: avro"); its input is at line
// len(lines)+3.
func registry(extra string, lines ...string) string {
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(l + "\n")
	}
	b.WriteString("pipelines:\n" + strings.Replace(strings.Join(pipe, "\n"), "{topic: in}", "{topic: in"+extra+"}", 1) + "\n")
	return b.String()
}

func TestSchemaRegistry(t *testing.T) {
	securityDir(t)
	t.Setenv("WINDOWD_TEST_SR_USER", "reader")
	c, err := Parse("c.yaml", []byte(registry(", format: protobuf",
		"schema_registry:",
		"  url: https://sr.example:8081/apis/ccompat/v7/",
		"  basic_auth: {username: \"${WINDOWD_TEST_SR_USER}\", password_file: pw}",
		"  tls: {ca_file: ca.pem}")))
	if err != nil {
		t.Fatal(err)
	}
	r := c.SchemaRegistry
	if r == nil || r.URL != "https://sr.example:8081/apis/ccompat/v7" || r.Username != "reader" || r.Password.Reveal() != "s3cr3t-from-file" || r.TLS == nil || r.TLS.CAFile != "ca.pem" {
		t.Fatalf("schema_registry %+v", r)
	}
	if f := c.Pipelines[0].Input.Format; f != Protobuf || f.String() != "protobuf" {
		t.Fatalf("format %v", f)
	}
	if c, err = Parse("c.yaml", []byte(registry(""))); err != nil || c.Pipelines[0].Input.Format != JSON || c.SchemaRegistry != nil {
		t.Fatalf("default: %v %+v", err, c)
	}

	out := func(src, output string) string { return strings.Replace(src, "output: {topic: out}", output, 1) }
	c, err = Parse("c.yaml", []byte(out(registry("", "schema_registry: {url: \"http://sr:8081\"}"), "output: {topic: out, format: avro}")))
	if err != nil || c.Pipelines[0].OutputFormat != Avro || c.Pipelines[0].OutputSubject != "out-value" {
		t.Fatalf("avro output: %v %+v", err, c.Pipelines[0])
	}
	c, err = Parse("c.yaml", []byte(out(registry("", "schema_registry: {url: \"http://sr:8081\"}"), "output: {topic: out, format: json_schema, subject: panes}")))
	if err != nil || c.Pipelines[0].OutputFormat != JSONSchema || c.Pipelines[0].OutputSubject != "panes" {
		t.Fatalf("json_schema output, subject panes: %v %+v", err, c.Pipelines[0])
	}

	for _, tt := range []struct {
		name, src, want string
	}{
		{"protobuf output without a registry", out(registry(""), "output: {topic: out, format: protobuf}"),
			`c.yaml:7:34: pipelines[0].output.format: protobuf output needs schema_registry (the registry its pane schema is registered in; docs/SEMANTICS.md, Output)`},
		{"unknown output format", out(registry("", "schema_registry: {url: \"http://sr:8081\"}"), "output: {topic: out, format: xml}"),
			`c.yaml:8:34: pipelines[0].output.format: invalid value "xml" (want json, avro, protobuf or json_schema)`},
		{"subject of json output", out(registry(""), "output: {topic: out, subject: s}"),
			`c.yaml:7:26: pipelines[0].output.subject: only valid with output.format avro, protobuf or json_schema`},
		{"avro without a registry", registry(", format: avro"),
			`c.yaml:3:32: pipelines[0].input.format: avro needs schema_registry (the registry its schemas come from; docs/SEMANTICS.md, Input formats)`},
		{"unknown format", registry(", format: xml", "schema_registry: {url: \"http://sr:8081\"}"),
			`c.yaml:4:32: pipelines[0].input.format: invalid value "xml" (want json, avro or protobuf)`},
		{"bad url", registry("", "schema_registry:", "  url: sr:8081", "  urls: [x]"),
			`c.yaml:2:8: schema_registry.url: "sr:8081" is not an http:// or https:// URL (like http://127.0.0.1:8081)
c.yaml:3:3: schema_registry.urls: unknown field "urls" (did you mean "url"?)`},
		{"no url", registry("", "schema_registry: {basic_auth: {username: u, password: p}}"),
			`c.yaml:1:1: schema_registry.url: required`},
		{"auth without password", registry("", "schema_registry:", "  url: http://sr:8081", "  basic_auth: {username: u}"),
			`c.yaml:3:3: schema_registry.basic_auth: needs password or password_file`},
		{"tls over http", registry("", "schema_registry:", "  url: http://sr:8081", "  tls: {ca_file: missing.pem}"),
			`c.yaml:3:3: schema_registry.tls: needs an https:// url
c.yaml:3:18: schema_registry.tls.ca_file: cannot read "missing.pem": no such file or directory`},
	} {
		t.Run(tt.name, func(t *testing.T) { checkParseError(t, tt.src, tt.want) })
	}
}
