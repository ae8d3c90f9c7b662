package integration

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/windowd/windowd/config"
	"github.com/windowd/windowd/internal/panetest"
	"github.com/windowd/windowd/schema"
	"github.com/windowd/windowd/service"
)

// TestOutputSchemaEvolution (docs/SEMANTICS.md, Output): for each binary
// output.format, a pipeline restarted with an aggregate added registers a
// second version of its subject (a compatible change) and writes panes
// with it, the new aggregate read back; restarted with an aggregate's op
// changed so that its type changes, it does not start, and says why in
// the registry's words. The registry's compatibility check is the judge:
// the refusal needs a real one (WINDOWD_SCHEMA_REGISTRY; CI runs Apicurio
// with BACKWARD compatibility, Confluent's default).
func TestOutputSchemaEvolution(t *testing.T) {
	real := os.Getenv("WINDOWD_SCHEMA_REGISTRY") != ""
	for _, format := range []string{"avro", "protobuf", "json_schema"} {
		t.Run(format, func(t *testing.T) {
			parallel(t, 10*time.Second)
			url := registryURL(t)
			in, out := uniqueName(t, "in"), uniqueName(t, "out")
			createTopic(t, in, 1)
			e := &env{t: t, cfgPath: filepath.Join(t.TempDir(), "windowd.yaml"), partitions: 1}
			aggs := "[{name: n, op: count}, {name: mean, op: avg, field: x}]"
			write := func(aggs string) {
				writeFile(t, e.cfgPath, fmt.Sprintf(`kafka:
  brokers: [%s]
state: {dir: %s}
http: {listen: 127.0.0.1:0}
schema_registry: {url: %q}
pipelines:
  - name: p
    input: {topic: %s, group: %s}
    key: {field: user}
    timestamp: {field: ts}
    watermark: {max_delay: 0s}
    window: {type: tumbling, size: 10s}
    allowed_lateness: 0s
    aggregates: %s
    output: {topic: %s, format: %s}
    commit_interval: 100ms
`, strings.Join(quoteAll(brokers), ", "), filepath.Join(filepath.Dir(e.cfgPath), "state"), url, in, uniqueName(t, "g"), aggs, out, format))
				cfg, err := config.Load(e.cfgPath)
				if err != nil {
					t.Fatal(err)
				}
				e.cfg = cfg
			}
			r := e.reader(out)
			// run starts windowd on the config, writes a window's records
			// and a record that closes it, and returns the pane's schema
			// id and its value read back.
			run := func(window int64) (int, any) {
				inst := e.startInProcess()
				defer inst.stop()
				ts := base + window*10_000
				produce(t, in, []input{
					{key: "u", value: fmt.Sprintf(`{"user":"u","ts":%d,"x":1.5}`, ts)},
					{key: "u", value: fmt.Sprintf(`{"user":"u","ts":%d,"x":2.5}`, ts+1)},
					{key: "u", value: fmt.Sprintf(`{"user":"u","ts":%d,"x":0}`, ts+10_000)},
				})
				n := len(r.got)
				r.readUntil(t, "the window's pane", 30*time.Second, func(got []outRecord) bool { return len(got) > n })
				v := []byte(r.got[n].value)
				id := int(binary.BigEndian.Uint32(v[1:5]))
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				s, err := srClient(t, url).SchemaByID(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				var dec any
				switch format {
				case "avro":
					dec, err = panetest.Avro(s.Schema, v[5:])
				case "protobuf":
					md, merr := panetest.ProtoMessage(s.Schema)
					if merr != nil {
						t.Fatal(merr)
					}
					dec, err = panetest.Proto(md, v[6:])
				default:
					dec, err = panetest.Want(v[5:], nil, false)
				}
				if err != nil {
					t.Fatal(err)
				}
				dec, _ = panetest.Canonical(dec)
				return id, dec.(map[string]any)["aggregates"]
			}

			write(aggs)
			id1, a1 := run(0)
			if fmt.Sprint(a1) != "map[mean:2 n:2]" {
				t.Fatalf("first version's pane aggregates %v", a1)
			}
			aggs = strings.Replace(aggs, "]", ", {name: total, op: sum, field: x}]", 1)
			write(aggs)
			id2, a2 := run(2)
			if id2 == id1 || fmt.Sprint(a2) != "map[mean:2 n:2 total:4]" {
				t.Fatalf("with an aggregate added: schema id %d (first %d), aggregates %v", id2, id1, a2)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			versions, err := srClient(t, url).SubjectVersions(ctx, out+"-value")
			if err != nil || len(versions) != 2 {
				t.Fatalf("subject %s-value: versions %v, %v; want 2", out, versions, err)
			}

			if !real {
				t.Log("pkg/sr's fake registry checks no compatibility: the refused change needs WINDOWD_SCHEMA_REGISTRY")
				return
			}
			write(strings.Replace(aggs, "{name: mean, op: avg, field: x}", "{name: mean, op: top_k, field: user, k: 1}", 1))
			rctx, rcancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer rcancel()
			err = service.Run(rctx, e.cfg, service.Options{Log: zap.NewNop()})
			var refused *schema.Refused
			if !errors.As(err, &refused) || refused.Subject != out+"-value" || refused.Message == "" {
				t.Fatalf("an aggregate's type changed: windowd started, or failed otherwise: %v", err)
			}
			t.Logf("refused as it should be: %v", err)
		})
	}
}
