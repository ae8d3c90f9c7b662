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

// TestShopVisitsExample: the README's transaction windows example gives
// the panes it shows: v-1's visit ends at its checkout, which arrived
// after a later view and cuts it off; v-2's abandoned visit emits
// nothing; visits without a checkout time out.
func TestShopVisitsExample(t *testing.T) {
	cfg, err := config.Load("../configs/shop-visits.yaml")
	if err != nil {
		t.Fatal(err)
	}
	in, err := os.ReadFile("../testdata/shop-visits.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if _, err := Run(Options{Pipeline: &cfg.Pipelines[0], Input: bytes.NewReader(in), Partitions: 1, FS: vfs.NewMem(), Out: &out, Errs: io.Discard}); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, line := range lines(out.Bytes()) {
		v := gjson.Parse(line)
		b.WriteString(fmt.Sprintln(v.Get("key").Str, v.Get("window.start").Int(), v.Get("window.end").Int(), v.Get("pane.timeout").Bool(),
			v.Get("aggregates.events").Int(), v.Get("aggregates.spent").Float()))
	}
	want := `v-1 1796378400000 1796378820001 false 4 25
v-1 1796378940000 1796380740000 true 1 0
v-3 1796379000000 1796380920000 true 2 0
v-2 1796383800000 1796385600000 true 1 0
`
	if b.String() != want {
		t.Fatalf("panes:\n%s\nwant:\n%s", b.String(), want)
	}
}
