package replay

import (
	"fmt"
	"strings"
	"testing"
)

// TestUnpaidOrdersExample: the README's join example gives the rows it
// shows: orders paid within 15 minutes matched, the others unmatched, each
// once and final; a payment without an order gives no row (a left join).
func TestUnpaidOrdersExample(t *testing.T) {
	var b strings.Builder
	for _, v := range exampleReplay(t, "../configs/unpaid-orders.yaml", "../testdata/orders-payments.jsonl", 1) {
		b.WriteString(fmt.Sprintln(v.Get("key").Str, v.Get("matched").Bool(), v.Get("paid.method").Str, v.Get("pane.timing").Str, v.Get("pane.final").Bool()))
	}
	want := `A-100 true card ON_TIME true
A-101 false  ON_TIME true
A-102 false  ON_TIME true
A-103 true wallet ON_TIME true
A-104 false  ON_TIME true
`
	if b.String() != want {
		t.Fatalf("rows:\n%s\nwant:\n%s", b.String(), want)
	}
}
