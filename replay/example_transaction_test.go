package replay

import (
	"fmt"
	"strings"
	"testing"
)

// TestShopVisitsExample: the README's transaction windows example gives
// the panes it shows: v-1's visit ends at its checkout, which arrived
// after a later view and cuts it off; v-2's abandoned visit emits
// nothing; visits without a checkout time out.
func TestShopVisitsExample(t *testing.T) {
	var b strings.Builder
	for _, v := range exampleReplay(t, "../configs/shop-visits.yaml", "../testdata/shop-visits.jsonl", 1) {
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
