package replay

import (
	"fmt"
	"strings"
	"testing"
)

// TestCTRExample: the README's several inputs example gives the panes it
// shows: per campaign and minute the impressions, the valid clicks, their
// ratio and the impressions' cost; a minute closes only once both topics
// passed it.
func TestCTRExample(t *testing.T) {
	var b strings.Builder
	for _, v := range exampleReplay(t, "../configs/ctr.yaml", "../testdata/ad-events.jsonl", 1) {
		b.WriteString(fmt.Sprintln(v.Get("key").Str, v.Get("window.start").Int(), v.Get("pane.timing").Str, v.Get("pane.final").Bool(), v.Get("aggregates").Raw))
	}
	want := `spring 1796378400000 ON_TIME true {"impressions":4,"clicks":2,"ctr":0.5,"cost":0.08}
winter 1796378400000 ON_TIME true {"impressions":1,"clicks":0,"ctr":0,"cost":0.05}
spring 1796378460000 ON_TIME true {"impressions":1,"clicks":0,"ctr":0,"cost":0.02}
winter 1796378460000 ON_TIME true {"impressions":2,"clicks":2,"ctr":1,"cost":0.1}
`
	if b.String() != want {
		t.Fatalf("panes:\n%s\nwant:\n%s", b.String(), want)
	}
}
