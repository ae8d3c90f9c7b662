package replay

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/tidwall/gjson"

	"github.com/windowd/windowd/config"
)

// TestStoreSalesQuietExample: the README's quiet inputs example gives the
// panes it shows: the evening's last hour on time by the quiet advance,
// before the next morning's sale.
func TestStoreSalesQuietExample(t *testing.T) {
	var b strings.Builder
	for _, v := range exampleReplay(t, "../configs/store-sales-quiet.yaml", "../testdata/store-sales.jsonl", 2) {
		b.WriteString(fmt.Sprintln(v.Get("key").Str, v.Get("window.start").Int(), v.Get("pane.timing").Str, v.Get("pane.index").Int(),
			v.Get("pane.final").Bool(), v.Get("pane.quiet").Bool()))
	}
	want := `rome-1 1764878400000 ON_TIME 0 false true
rome-2 1764878400000 ON_TIME 0 false true
rome-1 1764878400000 LATE 1 true false
rome-2 1764878400000 LATE 1 true false
rome-1 1764918000000 ON_TIME 0 true false
`
	if b.String() != want {
		t.Fatalf("panes:\n%s\nwant:\n%s", b.String(), want)
	}
}

// exampleReplay replays the input file of a README example through the
// first pipeline of its config file and returns its panes.
func exampleReplay(t *testing.T, configFile, inputFile string, partitions int) []gjson.Result {
	t.Helper()
	cfg, err := config.Load(configFile)
	if err != nil {
		t.Fatal(err)
	}
	in, err := os.ReadFile(inputFile)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if _, err := Run(Options{Pipeline: &cfg.Pipelines[0], Input: bytes.NewReader(in), Partitions: partitions, FS: vfs.NewMem(), Out: &out, Errs: io.Discard}); err != nil {
		t.Fatal(err)
	}
	var panes []gjson.Result
	for _, line := range lines(out.Bytes()) {
		panes = append(panes, gjson.Parse(line))
	}
	return panes
}
