package integration

import (
	"context"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/windowd/windowd/config"
	"github.com/windowd/windowd/internal/panetest"
	"github.com/windowd/windowd/windowing"
)

// outWindows are the window types a binary output format must carry,
// each as a pipeline's window setting.
var outWindows = []struct{ name, window string }{
	{"tumbling", "{type: tumbling, size: 10s}"},
	{"hopping", "{type: hopping, size: 20s, hop: 10s}"},
	{"session", "{type: session, gap: 5s}"},
	{"calendar", "{type: calendar, unit: hour, time_zone: Europe/Rome}"},
	{"cumulate", "{type: cumulate, size: 1m, step: 20s}"},
	{"sliding", "{type: sliding, size: 10s}"},
	{"count", "{type: count, size: 5}"},
	{"transaction", "{type: transaction, close_when: 'value.x >= 9.0', timeout: 1m}"},
}

// outAggregates are every aggregate op.
const outAggregates = `    aggregates:
      - {name: n, op: count}
      - {name: users, op: distinct_approx, field: user}
      - {name: total, op: sum, field: x}
      - {name: low, op: min, field: x}
      - {name: high, op: max, field: x}
      - {name: mean, op: avg, field: x}
      - {name: lat, op: quantiles, field: x, quantiles: [0.5, 0.99]}
      - {name: pages, op: top_k, field: page, k: 2}
`

// outStream is two partitions of four keys, a record every 700 ms of a
// key's partition, then a flush record on each partition three hours
// later that closes every window of the other keys.
func outStream() []input {
	var recs []input
	for i := 0; i < 240; i++ {
		p := int32(i % 2)
		u := fmt.Sprintf("u%d", i%4)
		recs = append(recs, input{partition: p, key: u, value: fmt.Sprintf(`{"user":%q,"ts":%d,"x":%d.5,"page":"/p%d"}`, u, base+int64(i)*350, i%10, i%3)})
	}
	for p := int32(0); p < 2; p++ {
		recs = append(recs, input{partition: p, key: "flush", value: fmt.Sprintf(`{"user":"flush","ts":%d,"x":0,"page":"/"}`, base+3*3600_000)})
	}
	return recs
}

// TestOutputFormats (docs/SEMANTICS.md, Output): windowd registers the
// pane schema of each binary output.format under <topic>-value and writes
// the Confluent wire format; every pane of every window type, with every
// aggregate, read back with the registered schema by a decoder windowd
// does not write with (hamba/avro, dynamicpb; json_schema: the JSON as it
// is), equals replay's pane JSON. Against the real registry in CI.
func TestOutputFormats(t *testing.T) {
	parallel(t, 30*time.Second)
	url := registryURL(t)
	in := uniqueName(t, "in")
	createTopic(t, in, 2)
	e, outs := outFormatsEnv(t, in, url, []string{"avro", "protobuf", "json_schema"}, outWindows)
	cfg := e.cfg
	recs := outStream()
	produce(t, in, recs)
	inst := e.startInProcess()
	defer inst.stop()

	cl := srClient(t, url)
	schemas := map[int]string{}
	schemaOf := func(id int) string {
		if s, ok := schemas[id]; ok {
			return s
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s, err := cl.SchemaByID(ctx, id)
		if err != nil {
			t.Fatalf("schema id %d: %v", id, err)
		}
		schemas[id] = s.Schema
		return s.Schema
	}
	for i := range cfg.Pipelines {
		p := &cfg.Pipelines[i]
		t.Run(p.Name, func(t *testing.T) {
			var aggs []panetest.Agg
			for _, s := range p.Spec.Aggregates {
				aggs = append(aggs, panetest.Agg{Name: s.Name, Quantiles: s.Op == windowing.Quantiles, TopK: s.Op == windowing.TopK})
			}
			panes, errs := runReplay(t, p, recs, 2)
			if len(errs) > 0 {
				t.Fatalf("replay: %v", errs)
			}
			want := map[string]string{} // pane id -> pane JSON
			for _, pn := range panes {
				v := gjson.Parse(pn)
				if v.Get("key").Str != "flush" {
					want[paneID(v)] = pn
				}
			}
			if len(want) < 4 { // a pane of each key at least
				t.Fatalf("replay gives %d panes: too few for a test", len(want))
			}
			out := e.reader(outs[p.Name])
			got := map[string]any{}
			out.readUntil(t, fmt.Sprintf("the %d panes of replay", len(want)), 60*time.Second, func(recs []outRecord) bool {
				return len(recs) >= len(want)
			})
			out.poll(500 * time.Millisecond)
			if len(out.got) != len(want) {
				t.Fatalf("%d records on the output topic, replay has %d panes", len(out.got), len(want))
			}
			for _, r := range out.got {
				v := []byte(r.value)
				if len(v) < 5 || v[0] != 0 {
					t.Fatalf("value without the wire format's magic byte: % x", v[:min(len(v), 8)])
				}
				text := schemaOf(int(binary.BigEndian.Uint32(v[1:5])))
				var dec any
				var err error
				protobuf := p.OutputFormat == config.Protobuf
				switch p.OutputFormat {
				case config.Avro:
					dec, err = panetest.Avro(text, v[5:])
				case config.Protobuf:
					if v[5] != 0 {
						t.Fatalf("message indexes %x, want [0] (a single 0 byte)", v[5])
					}
					md, merr := panetest.ProtoMessage(text)
					if merr != nil {
						t.Fatal(merr)
					}
					dec, err = panetest.Proto(md, v[6:])
				case config.JSONSchema:
					if !strings.Contains(text, `"title":"windowd.Pane"`) {
						t.Fatalf("registered schema %s", text)
					}
					dec, err = panetest.Want(v[5:], aggs, false)
				}
				if err != nil {
					t.Fatalf("decoding %x: %v", v, err)
				}
				if dec, err = panetest.Canonical(dec); err != nil {
					t.Fatal(err)
				}
				id := r.headers["pane_id"]
				line, ok := want[id]
				if !ok {
					t.Fatalf("pane %s is not replay's", id)
				}
				w, err := panetest.Want([]byte(line), aggs, protobuf)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(dec, w) {
					t.Fatalf("pane %s:\n got %v\nwant %v", id, dec, w)
				}
				got[id] = dec
			}
			if len(got) != len(want) {
				t.Fatalf("%d distinct panes, replay has %d", len(got), len(want))
			}
		})
	}
}

// outFormatsEnv is the env of a windowd with a pipeline per output format
// and window (named <format>-<window>, with every aggregate) reading
// topic in, and the output topic of each pipeline by name.
func outFormatsEnv(t *testing.T, in, registry string, formats []string, windows []struct{ name, window string }) (*env, map[string]string) {
	var b strings.Builder
	fmt.Fprintf(&b, "kafka:\n  brokers: [%s]\nstate: {dir: %s}\nhttp: {listen: 127.0.0.1:0}\nschema_registry: {url: %q}\npipelines:\n",
		strings.Join(quoteAll(brokers), ", "), filepath.Join(t.TempDir(), "state"), registry)
	outs := map[string]string{}
	for _, f := range formats {
		for _, w := range windows {
			name := strings.ReplaceAll(f, "_", "-") + "-" + w.name
			outs[name] = uniqueName(t, name)
			lateness := "    allowed_lateness: 0s\n"
			if w.name == "count" {
				lateness = "" // count windows have no event-time end
			}
			fmt.Fprintf(&b, `  - name: %s
    input: {topic: %s, group: %s}
    key: {field: user}
    timestamp: {field: ts}
    watermark: {max_delay: 0s}
    window: %s
%s%s    output: {topic: %s, format: %s}
    commit_interval: 200ms
`, name, in, uniqueName(t, name+"-g"), w.window, lateness, outAggregates, outs[name], f)
		}
	}
	e := &env{t: t, cfgPath: filepath.Join(t.TempDir(), "windowd.yaml"), partitions: 2}
	writeFile(t, e.cfgPath, b.String())
	cfg, err := config.Load(e.cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	e.cfg = cfg
	return e, outs
}

// paneID is a pane JSON's pane id, as its pane_id header has it.
func paneID(v gjson.Result) string {
	id := fmt.Sprintf("%s/%d/%d/%d", v.Get("key").Str, v.Get("window.start").Int(), v.Get("window.end").Int(), v.Get("pane.index").Int())
	if p := v.Get("pane.partition"); p.Exists() {
		id += fmt.Sprintf("@%d", p.Int())
	}
	return id
}
