package main

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"
)

// replay --schema-registry takes an Avro dump as {"base64": ...} values and
// overrides the configuration's registry; without it, a registry that cannot
// be reached stops the replay with the reason.
func TestReplaySchemaRegistryFlag(t *testing.T) {
	fake := srfake.New()
	defer fake.Close()
	id, _, err := fake.RegisterSchema("e-value", sr.Schema{Schema: `{"type":"record","name":"E","fields":[{"name":"user","type":"string"},{"name":"ts","type":"long"}]}`})
	if err != nil {
		t.Fatal(err)
	}
	path := writeConfig(t, `schema_registry: {url: "http://127.0.0.1:1"}
pipelines:
  - name: p
    input: {topic: in, format: avro}
    key: {field: user}
    timestamp: {field: ts}
    window: {type: tumbling, size: 1s}
    aggregates: [{name: n, op: count}]
    output: {topic: out}
`)
	// user "u", ts 1500 (zigzag varints).
	value := []byte{0, byte(id >> 24), byte(id >> 16), byte(id >> 8), byte(id), 2, 'u', 0xb8, 0x17}
	line := `{"value":{"base64":"` + base64.StdEncoding.EncodeToString(value) + `"}}` + "\n"
	code, out, errs := runCLI(t, line, "replay", "--config", path, "--input", "-", "--schema-registry", fake.URL())
	if code != 0 || !strings.Contains(out, `"key":"u","window":{"start":1000,"end":2000}`) {
		t.Errorf("replay with --schema-registry: exit %d, %q %q", code, out, errs)
	}
	code, _, errs = runCLI(t, line, "replay", "--config", path, "--input", "-")
	if code != 1 || !strings.Contains(errs, "schema registry http://127.0.0.1:1 unavailable") {
		t.Errorf("replay against an unreachable registry: exit %d, %q", code, errs)
	}
}
