package integration

import (
	"context"
	"encoding/base64"
	"fmt"
	"math/rand"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bufbuild/protocompile"
	"github.com/hamba/avro/v2"
	"github.com/tidwall/gjson"
	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/windowd/windowd/config"
	"github.com/windowd/windowd/replay"
	"github.com/windowd/windowd/schema"
)

// registryURL is the schema registry the format tests use: a real one
// (WINDOWD_SCHEMA_REGISTRY, which .ci/run sets from
// scripts/schema-registry.sh: Apicurio Registry's Confluent-compatible
// API), else pkg/sr's in-process fake registry.
func registryURL(t *testing.T) string {
	if u := os.Getenv("WINDOWD_SCHEMA_REGISTRY"); u != "" {
		return u
	}
	fake := srfake.New()
	t.Cleanup(fake.Close)
	t.Logf("no WINDOWD_SCHEMA_REGISTRY: pkg/sr's in-process fake registry at %s", fake.URL())
	return fake.URL()
}

// srClient is a registry client for registering the tests' schemas.
func srClient(t *testing.T, url string) *sr.Client {
	cl, err := sr.NewClient(sr.URLs(url))
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// What registryProxy does with a request.
const (
	registryUp     = iota // passes it to the registry
	registry503           // answers 503, as a registry restarting does
	registryClosed        // closes the connection
)

// registryProxy serves the registry at regURL (its path included) as
// *state says, until t ends; it returns the proxy's URL.
func registryProxy(t *testing.T, regURL string, state *atomic.Int32) string {
	target, err := url.Parse(regURL)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch state.Load() {
		case registry503:
			http.Error(w, `{"error_code":50302,"message":"registry restarting"}`, http.StatusServiceUnavailable)
		case registryClosed:
			if hj, ok := w.(http.Hijacker); ok {
				if c, _, err := hj.Hijack(); err == nil {
					c.Close()
				}
			}
		default:
			rp.ServeHTTP(w, r)
		}
	}))
	t.Cleanup(proxy.Close)
	return proxy.URL
}

func register(t *testing.T, cl *sr.Client, subject string, s sr.Schema) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ss, err := cl.CreateSchema(ctx, subject, s)
	if err != nil {
		t.Fatalf("register %s: %v", subject, err)
	}
	return ss.ID
}

func wireHeader(id int, index ...byte) []byte {
	return append([]byte{0, byte(id >> 24), byte(id >> 16), byte(id >> 8), byte(id)}, index...)
}

// formatEvent is one test event; encode turns it into a wire-format value
// of the schema version v (0 or 1).
type formatEvent struct {
	user string
	ts   int64
	x    int64
}

// encoder writes events in one format, two schema versions.
type encoder func(ev formatEvent, v int) []byte

// avroEncoder registers two versions of an Avro event schema (v2 adds
// a field with a default) under subject.
func avroEncoder(t *testing.T, cl *sr.Client, subject string) encoder {
	v1 := `{"type":"record","name":"Event","namespace":"windowd.test","fields":[{"name":"user","type":"string"},` +
		`{"name":"ts","type":{"type":"long","logicalType":"timestamp-millis"}},{"name":"x","type":"long"}]}`
	v2 := strings.Replace(v1, `{"name":"x","type":"long"}`, `{"name":"x","type":"long"},{"name":"note","type":"string","default":""}`, 1)
	var ids [2]int
	var schemas [2]avro.Schema
	for i, s := range []string{v1, v2} {
		ids[i] = register(t, cl, subject, sr.Schema{Schema: s, Type: sr.TypeAvro})
		schemas[i] = avro.MustParse(s)
	}
	if ids[0] == ids[1] {
		t.Fatalf("two schema versions got one id %d", ids[0])
	}
	return func(ev formatEvent, v int) []byte {
		m := map[string]any{"user": ev.user, "ts": time.UnixMilli(ev.ts).UTC(), "x": ev.x}
		if v == 1 {
			m["note"] = "v2"
		}
		b, err := avro.Marshal(schemas[v], m)
		if err != nil {
			t.Fatal(err)
		}
		return append(wireHeader(ids[v]), b...)
	}
}

// protobufEncoder registers two versions of a Protobuf event schema under
// subject: v1 a single message (the [0] index shortcut), v2 with another
// message before the event (index [1]) and a field whose type comes from
// a referenced subject.
func protobufEncoder(t *testing.T, cl *sr.Client, subject string) encoder {
	common := `syntax = "proto3";
package windowd.common;
message Tag { string name = 1; }
`
	v1 := `syntax = "proto3";
package windowd.test;
import "google/protobuf/timestamp.proto";
message Event { string user = 1; google.protobuf.Timestamp ts = 2; int64 x = 3; }
`
	v2 := `syntax = "proto3";
package windowd.test;
import "google/protobuf/timestamp.proto";
import "common.proto";
message Other { string a = 1; }
message Event { string user = 1; google.protobuf.Timestamp ts = 2; int64 x = 3; windowd.common.Tag tag = 4; }
`
	commonSubject := subject + "-common"
	register(t, cl, commonSubject, sr.Schema{Schema: common, Type: sr.TypeProtobuf})
	ids := [2]int{
		register(t, cl, subject, sr.Schema{Schema: v1, Type: sr.TypeProtobuf}),
		register(t, cl, subject, sr.Schema{Schema: v2, Type: sr.TypeProtobuf,
			References: []sr.SchemaReference{{Name: "common.proto", Subject: commonSubject, Version: 1}}}),
	}
	var events [2]protoreflect.MessageDescriptor
	for i, text := range []string{v1, v2} {
		// One compiler each: both versions define windowd.test.Event.
		comp := protocompile.Compiler{Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{
			Accessor: protocompile.SourceAccessorFromMap(map[string]string{"event.proto": text, "common.proto": common})})}
		files, err := comp.Compile(context.Background(), "event.proto")
		if err != nil {
			t.Fatal(err)
		}
		events[i] = files[0].Messages().ByName("Event")
	}
	return func(ev formatEvent, v int) []byte {
		md := events[v]
		m := dynamicpb.NewMessage(md)
		m.Set(md.Fields().ByName("user"), protoreflect.ValueOfString(ev.user))
		m.Set(md.Fields().ByName("ts"), protoreflect.ValueOfMessage(timestamppb.New(time.UnixMilli(ev.ts)).ProtoReflect()))
		m.Set(md.Fields().ByName("x"), protoreflect.ValueOfInt64(ev.x))
		index := []byte{0}
		if v == 1 {
			tag := dynamicpb.NewMessage(md.Fields().ByName("tag").Message())
			tag.Set(tag.Descriptor().Fields().ByName("name"), protoreflect.ValueOfString("v2"))
			m.Set(md.Fields().ByName("tag"), protoreflect.ValueOfMessage(tag))
			index = []byte{2, 2} // one index, 1 (zigzag varints)
		}
		b, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return append(wireHeader(ids[v], index...), b...)
	}
}

// formatEnv is newEnv (watermarkExtra: the watermark's further settings)
// with the pipeline reading format from the registry at url,
// allowed_lateness 0s.
func formatEnv(t *testing.T, format, url, watermarkExtra string) *env {
	e := newEnv(t, 2, watermarkExtra)
	e.editConfig(map[string]string{
		"pipelines:\n":                "schema_registry: {url: \"" + url + "\"}\npipelines:\n",
		"group: " + e.group + "}":     "group: " + e.group + ", format: " + format + "}",
		"    allowed_lateness: 30s\n": "    allowed_lateness: 0s\n",
		"      late: {every: 0s}\n":   "",
	})
	return e
}

// formatStream is a test stream of both schema versions, in order per
// partition within max_delay (nothing is late), ending with a record per
// partition far ahead that closes every window.
func formatStream(enc encoder, partitions int32, n int) []input {
	rng := rand.New(rand.NewSource(5))
	from := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	var recs []input
	for i := 0; i < n; i++ {
		p := int32(i) % partitions
		u := fmt.Sprintf("u%d-%d", p, rng.Intn(5))
		ev := formatEvent{user: u, ts: from + int64(i)*300 - int64(rng.Intn(1500)), x: int64(rng.Intn(100))}
		recs = append(recs, input{partition: p, key: u, value: string(enc(ev, i%2))})
	}
	for p := int32(0); p < partitions; p++ {
		k := fmt.Sprintf("flush-%d", p)
		recs = append(recs, input{partition: p, key: k, value: string(enc(formatEvent{user: k, ts: from + int64(n)*300 + 600_000}, 0))})
	}
	return recs
}

// replayFormat replays recs (values as {"base64": ...}) with the registry
// at url, and returns the panes.
func replayFormat(t *testing.T, p *config.Pipeline, url string, recs []input, partitions int) []string {
	t.Helper()
	reg, err := schema.New(schema.Options{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	var in strings.Builder
	for _, r := range recs {
		fmt.Fprintf(&in, "{\"partition\":%d,\"value\":{\"base64\":%q}}\n", r.partition, base64.StdEncoding.EncodeToString([]byte(r.value)))
	}
	var out, errs strings.Builder
	if _, err := replay.Run(replay.Options{Pipeline: p, Input: strings.NewReader(in.String()), Partitions: partitions,
		StateDir: filepath.Join(t.TempDir(), "replay"), Out: &out, Errs: &errs, Registry: reg}); err != nil {
		t.Fatalf("replay: %v", err)
	}
	if errs.Len() > 0 {
		t.Fatalf("replay reported errors (the stream has no late or bad record): %s", errs.String())
	}
	// The flush records' own windows close only at the end of input.
	var panes []string
	for _, p := range lines(out.String()) {
		if !strings.Contains(p, `"key":"flush-`) {
			panes = append(panes, p)
		}
	}
	return panes
}

// TestFormatsAgainstRegistry: Avro and Protobuf topics (Avro also
// repartitioned), two schema versions each, with schemas from the registry. windowd run writes the panes
// replay computes for the same bytes, and each kind of bad record (no
// magic byte, an unknown schema id, a payload its schema does not read) is
// a dead letter with its reason while the rest flows on.
//
// The -expr cases read the value only through expressions (filter,
// key.expr, timestamp.expr, an aggregate's expr), which see the decoded
// value in both stages of a repartitioned pipeline as in one.
func TestFormatsAgainstRegistry(t *testing.T) {
	for _, name := range []string{"avro", "protobuf", "avro-repartition", "avro-expr", "protobuf-expr-repartition"} {
		t.Run(name, func(t *testing.T) {
			parallel(t, 15*time.Second)
			format, repartitioned := strings.CutSuffix(name, "-repartition")
			format, exprs := strings.CutSuffix(format, "-expr")
			url := registryURL(t)
			cl := srClient(t, url)
			subject := uniqueName(t, "value")
			enc := avroEncoder
			if format == "protobuf" {
				enc = protobufEncoder
			}
			e := formatEnv(t, format, url, "")
			if repartitioned {
				// Stage 1 decodes the value for its key, stage 2 again.
				e.editConfig(map[string]string{"    commit_interval: 200ms\n": "    commit_interval: 200ms\n    repartition: true\n"})
			}
			if exprs {
				e.editConfig(map[string]string{
					"    key: {field: user}\n":                   "    filter: 'value.x < 90.0'\n    key: {expr: 'value.user + \"!\"'}\n",
					"    timestamp: {field: ts}\n":               "    timestamp: {expr: 'int(value.ts)'}\n",
					"      - {name: total, op: sum, field: x}\n": "      - {name: total, op: sum, expr: 'value.x * 2.0'}\n",
				})
			}
			stream := formatStream(enc(t, cl, subject), e.partitions, 400)
			want := replayFormat(t, &e.cfg.Pipelines[0], url, stream, int(e.partitions))
			if finalCount(want) < 20 {
				t.Fatalf("test stream too small: %d final panes", finalCount(want))
			}
			if exprs && !strings.Contains(want[0], `!","window"`) {
				t.Fatalf("replay's panes are not keyed by the key expression: %s", want[0])
			}
			good := stream[0].value
			head := 5 // the header of a v1 value: with the message index [0] for Protobuf
			if format == "protobuf" {
				head = 6
			}
			bad := []struct{ value, reason string }{
				{`{"user":"u0-0","ts":1}`, "not the magic byte 0"},
				{string(wireHeader(1<<30)) + good[5:], "schema id 1073741824 is not in the registry"},
				{good[:head] + "\xff\xff\xff", "value does not decode with schema id"},
			}
			var recs []input
			for i, r := range stream {
				recs = append(recs, r)
				if i == len(stream)/2 {
					for _, b := range bad {
						recs = append(recs, input{partition: 0, key: "bad", value: b.value})
					}
				}
			}
			inst := e.startInProcess()
			produce(t, e.in, recs)
			checkAgainstReplay(t, e, want)
			dlq := e.reader(e.dlq)
			dlq.readUntil(t, "3 dead letters", 30*time.Second, func(got []outRecord) bool { return len(got) >= len(bad) })
			for i, b := range bad {
				if got := dlq.got[i]; got.value != b.value || !strings.Contains(got.headers["error"], b.reason) {
					t.Errorf("dead letter %d: error %q, want one saying %q (value kept as it was: %v)", i, got.headers["error"], b.reason, got.value == b.value)
				}
			}
			if v, _ := inst.metric(t, "windowd_late_dropped_total"); v != 0 {
				t.Fatalf("windowd_late_dropped_total = %v, want 0", v)
			}
			if v, _ := inst.metric(t, "windowd_filtered_total"); exprs && v == 0 {
				t.Fatal("windowd_filtered_total = 0: the filter kept every record")
			}
			if err := inst.stop(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestRegistryOutagePausesConsumption: the registry cannot be reached
// (a proxy in front of it answers 503, then refuses connections) when
// windowd starts on an Avro topic. No record is dead-lettered and none
// is taken in: the partitions wait, windowd_schema_registry_up is 0 and
// windowd_schema_registry_waiting_partitions counts them. Once the proxy
// passes requests again, every pane replay computes is written, with
// allowed_lateness 0s and nothing dropped as late: the paused partitions
// resumed from the record that waited.
func TestRegistryOutagePausesConsumption(t *testing.T) {
	parallel(t, 25*time.Second)
	regURL := registryURL(t)
	var down atomic.Int32
	down.Store(registry503)
	e := formatEnv(t, "avro", registryProxy(t, regURL, &down), "")
	stream := formatStream(avroEncoder(t, srClient(t, regURL), uniqueName(t, "value")), e.partitions, 300)
	want := replayFormat(t, &e.cfg.Pipelines[0], regURL, stream, int(e.partitions))

	inst := e.startInProcess()
	produce(t, e.in, stream)
	waitFor(t, "both partitions waiting for the registry", 30*time.Second, func() bool {
		v, _ := inst.metric(t, "windowd_schema_registry_waiting_partitions")
		return v == float64(e.partitions)
	})
	waitFor(t, "the status page showing both partitions waiting", 30*time.Second, func() bool {
		_, body := httpGet(t, "http://"+inst.httpAddr+"/api/status")
		return gjson.Get(body, `pipelines.0.partitions.#(waiting_for_registry==true)#`).Get("#").Int() == int64(e.partitions)
	})
	down.Store(registryClosed)
	// Retries, against a registry that refuses connections now.
	waitFor(t, "a retry after the backoff", 30*time.Second, func() bool {
		v, _ := inst.metric(t, "windowd_schema_registry_failures_total")
		return v >= 3
	})
	if v, _ := inst.metric(t, "windowd_schema_registry_up"); v != 0 {
		t.Fatalf("windowd_schema_registry_up = %v during the outage, want 0", v)
	}
	for _, m := range []string{"windowd_dead_letters_total", "windowd_records_in_total"} {
		if v, _ := inst.metric(t, m); v != 0 {
			t.Fatalf("%s = %v during the outage, want 0", m, v)
		}
	}
	down.Store(registryUp)
	checkAgainstReplay(t, e, want)
	if v, _ := inst.metric(t, "windowd_schema_registry_up"); v != 1 {
		t.Fatalf("windowd_schema_registry_up = %v after the outage, want 1", v)
	}
	if v, _ := inst.metric(t, "windowd_schema_registry_waiting_partitions"); v != 0 {
		t.Fatalf("windowd_schema_registry_waiting_partitions = %v after the outage", v)
	}
	for _, m := range []string{"windowd_dead_letters_total", "windowd_late_dropped_total"} {
		if v, _ := inst.metric(t, m); v != 0 {
			t.Fatalf("%s = %v, want 0", m, v)
		}
	}
	if v, _ := inst.metric(t, "windowd_records_in_total"); v != float64(len(stream)) {
		t.Fatalf("windowd_records_in_total = %v, want %d (each record taken in once)", v, len(stream))
	}
	if err := inst.stop(); err != nil {
		t.Fatal(err)
	}
}

// TestRegistryWaitHoldsFrontier: partition 1 of an Avro topic has gone
// idle (idle_timeout 2s) when the registry stops answering and a record of
// a schema version windowd has not cached arrives there. The record waits,
// and meanwhile its partition holds the frontier as the record, taken in,
// would have: partition 0 runs a minute of event time on, the frontier
// stays behind the record, and once the registry answers every pane
// equals replay's, with allowed_lateness 0s and nothing late. Read
// directly, and through repartition: true (stage 1 waits, and its markers
// say the partition is not idle). Before, the waiting partition stayed
// idle, partition 0 carried the frontier past the record, and the record
// was dropped as late.
func TestRegistryWaitHoldsFrontier(t *testing.T) {
	for _, repartition := range []bool{false, true} {
		t.Run(fmt.Sprintf("repartition=%v", repartition), func(t *testing.T) {
			parallel(t, 15*time.Second)
			registryWaitHoldsFrontier(t, repartition)
		})
	}
}

func registryWaitHoldsFrontier(t *testing.T, repartition bool) {
	regURL := registryURL(t)
	var down atomic.Int32
	e := formatEnv(t, "avro", registryProxy(t, regURL, &down), ", idle_timeout: 2s")
	if repartition {
		e.cfg.Pipelines[0].Repartition = &config.Repartition{WatermarkInterval: config.DefaultWatermarkInterval}
	}
	enc := avroEncoder(t, srClient(t, regURL), uniqueName(t, "value"))
	from := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	rec := func(p int32, user string, ts int64, version int) input {
		return input{partition: p, key: user, value: string(enc(formatEvent{user: user, ts: ts, x: ts / 1000 % 100}, version))}
	}
	// 20 s of event time on both partitions, in schema version 1.
	var first []input
	for i := int64(0); i < 20; i++ {
		for p := int32(0); p < 2; p++ {
			first = append(first, rec(p, fmt.Sprintf("u%d-%d", p, i%3), from+i*1000, 0))
		}
	}
	// Version 2, which windowd has not read yet: on time when it arrives.
	waiting := rec(1, "u1-waits", from+21_000, 1)
	var ahead []input // partition 0 a minute on, in version 1
	for i := int64(22); i < 82; i++ {
		ahead = append(ahead, rec(0, fmt.Sprintf("u0-%d", i%3), from+i*1000, 0))
	}
	flush := []input{rec(0, "flush-0", from+600_000, 0), rec(1, "flush-1", from+600_000, 0)}
	want := replayFormat(t, &e.cfg.Pipelines[0], regURL, slices.Concat(first, []input{waiting}, ahead, flush), 2)

	inst := e.startInProcess()
	status := func() string {
		_, body := httpGet(t, "http://"+inst.httpAddr+"/api/status")
		return body
	}
	recordsIn := func(n int) func() bool {
		return func() bool {
			v, _ := inst.metric(t, "windowd_records_in_total")
			return v == float64(n)
		}
	}
	produce(t, e.in, first)
	waitFor(t, "the first records taken in", 30*time.Second, recordsIn(len(first)))
	if repartition {
		// Stage 1's idleness shows only in its markers.
		time.Sleep(3 * time.Second)
	} else {
		waitFor(t, "partition 1 idle", 30*time.Second, func() bool {
			return gjson.Get(status(), "pipelines.0.partitions.#(partition==1).idle").Bool()
		})
	}
	down.Store(registry503)
	produce(t, e.in, []input{waiting})
	waitFor(t, "partition 1 waiting for the registry", 30*time.Second, func() bool {
		v, _ := inst.metric(t, "windowd_schema_registry_waiting_partitions")
		return v == 1
	})
	produce(t, e.in, ahead)
	waitFor(t, "partition 0's minute taken in", 30*time.Second, recordsIn(len(first)+len(ahead)))
	// Commit cycles, ticks and markers pass: they would move a frontier
	// that left partition 1 out.
	time.Sleep(time.Second)
	st := status()
	if f := gjson.Get(st, "pipelines.0.frontier_ms").Int(); f >= from+20_000 {
		t.Fatalf("the frontier is at +%d ms while a record at +21000 ms waits for the registry (it closes the record's window)", f-from)
	}
	if !repartition && gjson.Get(st, "pipelines.0.partitions.#(partition==1).idle").Bool() {
		t.Fatal("partition 1 is idle while its record waits for the registry")
	}
	down.Store(registryUp)
	produce(t, e.in, flush)
	checkAgainstReplay(t, e, want)
	for _, m := range []string{"windowd_dead_letters_total", "windowd_late_dropped_total"} {
		if v, _ := inst.metric(t, m); v != 0 {
			t.Fatalf("%s = %v, want 0", m, v)
		}
	}
	if err := inst.stop(); err != nil {
		t.Fatal(err)
	}
}

// TestInputsBinaryFormats: a pipeline of two inputs, views in JSON and
// clicks in Avro, read co-partitioned (clicks' partitions follow views'),
// through repartition: true (stage 1 reads both topics), and joined
// (co-partitioned). windowd starts while the schema registry answers 503:
// the two clicks partitions wait for it
// (windowd_schema_registry_waiting_partitions), the consumer pausing
// clicks' own partitions, and nothing is dead-lettered. Once the registry
// answers, every final pane (every join row) equals replay's for the same
// bytes, with allowed_lateness 0s and nothing late. Before, run refused a
// second input in any format but json.
func TestInputsBinaryFormats(t *testing.T) {
	for _, mode := range []string{"co-partitioned", "repartition", "join"} {
		t.Run(mode, func(t *testing.T) {
			parallel(t, 20*time.Second)
			regURL := registryURL(t)
			var down atomic.Int32
			down.Store(registry503)
			proxy := registryProxy(t, regURL, &down)
			ie := newInputsEnv(t, "at_least_once", 2, 2, func(y string) string {
				y = strings.Replace(y, "pipelines:\n", "schema_registry: {url: \""+proxy+"\"}\npipelines:\n", 1)
				y = strings.Replace(y, "as: clicks}", "as: clicks, format: avro}", 1)
				switch mode {
				case "co-partitioned":
					y = coPartitioned(y)
				case "join":
					y = joinYAML(coPartitioned(y))
				}
				return y
			})
			views, clicks := ie.views, ie.clicks
			// Users u<p>-<n> of partition p in both topics: keyed alike.
			vrecs := formatStream(func(ev formatEvent, _ int) []byte {
				return fmt.Appendf(nil, `{"user":%q,"ts":%d,"x":%d}`, ev.user, ev.ts, ev.x)
			}, 2, 300)
			crecs := formatStream(avroEncoder(t, srClient(t, regURL), uniqueName(t, "value")), 2, 300)

			reg, err := schema.New(schema.Options{URL: regURL})
			if err != nil {
				t.Fatal(err)
			}
			var in strings.Builder
			for _, r := range vrecs {
				fmt.Fprintf(&in, "{\"topic\":%q,\"partition\":%d,\"value\":%s}\n", views.in, r.partition, r.value)
			}
			for _, r := range crecs {
				fmt.Fprintf(&in, "{\"topic\":%q,\"partition\":%d,\"value\":{\"base64\":%q}}\n", clicks.in, r.partition, base64.StdEncoding.EncodeToString([]byte(r.value)))
			}
			var out, errs strings.Builder
			if _, err := replay.Run(replay.Options{Pipeline: &views.cfg.Pipelines[0], Input: strings.NewReader(in.String()), Partitions: 2,
				StateDir: filepath.Join(t.TempDir(), "replay"), Out: &out, Errs: &errs, Registry: reg}); err != nil {
				t.Fatalf("replay: %v", err)
			}
			if errs.Len() > 0 {
				t.Fatalf("replay reported errors (the stream has no late or bad record): %s", errs.String())
			}
			var want []string
			both := 0 // panes of views and clicks; join rows with a click
			for _, p := range lines(out.String()) {
				if !strings.Contains(p, `"key":"flush-`) {
					want = append(want, p)
					if mode == "join" && gjson.Get(p, "matched").Bool() ||
						gjson.Get(p, "aggregates.clicks").Int() > 0 && gjson.Get(p, "aggregates.views").Int() > 0 {
						both++
					}
				}
			}
			if len(want) < 20 || both < len(want)/2 {
				t.Fatalf("test stream too small or one-sided: %d panes or rows, %d of both inputs", len(want), both)
			}

			inst := views.startInProcess()
			produce(t, views.in, vrecs)
			produce(t, clicks.in, crecs)
			waitFor(t, "the clicks partitions waiting for the registry", 30*time.Second, func() bool {
				v, _ := inst.metric(t, "windowd_schema_registry_waiting_partitions")
				return v == 2
			})
			if v, _ := inst.metric(t, "windowd_dead_letters_total"); v != 0 {
				t.Fatalf("windowd_dead_letters_total = %v while the registry is down, want 0", v)
			}
			down.Store(registryUp)
			if mode == "join" {
				rows := map[string]int{}
				for _, r := range want {
					rows[r]++
				}
				checkRowsOut(t, views, rows, views.reader(views.out), false)
			} else {
				checkAgainstReplay(t, views, want)
			}
			for _, m := range []string{"windowd_dead_letters_total", "windowd_late_dropped_total", "windowd_schema_registry_waiting_partitions"} {
				if v, _ := inst.metric(t, m); v != 0 {
					t.Fatalf("%s = %v, want 0", m, v)
				}
			}
			if err := inst.stop(); err != nil {
				t.Fatal(err)
			}
		})
	}
}
