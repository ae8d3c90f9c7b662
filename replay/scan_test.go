package replay

import (
	"bytes"
	"fmt"
	"io"
	"math/rand"
	"strings"
	"testing"

	"github.com/windowd/windowd/config"
)

// TestScanPartitionsAtEqualsSerial: the partition count a scan cut into
// ranges finds is the serial scan's, for inputs of one and of two topics
// whose largest partition sits on one line anywhere (first, last, at a
// cut), with invalid lines carrying larger partitions, blank and CRLF
// lines, and lines that start with a byte order mark (skipped as a file's
// only at the input's start).
func TestScanPartitionsAtEqualsSerial(t *testing.T) {
	one, err := config.Parse("c.yaml", []byte(`pipelines:
  - name: p
    input: {topic: in}
    timestamp: {field: ts}
    window: {type: tumbling, size: 10s}
    aggregates: [{name: n, op: count}]
    output: {topic: out}
`))
	if err != nil {
		t.Fatal(err)
	}
	two, err := config.Parse("c.yaml", []byte(`pipelines:
  - name: p
    inputs: [{topic: a}, {topic: b}]
    key: {field: user}
    timestamp: {field: ts}
    window: {type: tumbling, size: 10s}
    aggregates: [{name: n, op: count}]
    output: {topic: out}
`))
	if err != nil {
		t.Fatal(err)
	}
	wrap := func(r io.Reader) io.Reader { return r }
	for seed := int64(1); seed <= 12; seed++ {
		rng := rand.New(rand.NewSource(seed))
		p := &one.Pipelines[0]
		topic := ""
		if seed%2 == 0 {
			p = &two.Pipelines[0]
		}
		var b bytes.Buffer
		lines := 20_000 + rng.Intn(5000)
		at := rng.Intn(lines)
		switch seed % 3 {
		case 0:
			at = 0
		case 1:
			at = lines - 1
		}
		for i := range lines {
			if p == &two.Pipelines[0] {
				topic = fmt.Sprintf(`"topic":%q,`, []string{"a", "b"}[rng.Intn(2)])
			}
			part := rng.Intn(8)
			if i == at {
				part = 40 + int(seed)
			}
			switch r := rng.Intn(40); {
			case r == 0:
				fmt.Fprintf(&b, "{%s\"partition\":%d,\"key\":\"k\",\"value\":{\"ts\":\"nope\"}}\n", topic, 90) // invalid: adds nothing
				continue
			case r == 1:
				b.WriteString("\n")
			case r == 2 && i > 0:
				b.WriteString(utf8BOM)
				fmt.Fprintf(&b, "{%s\"partition\":%d,\"key\":\"k\",\"value\":{\"user\":\"u\",\"ts\":%d}}\n", topic, 95, i) // invalid mid-file
				continue
			}
			fmt.Fprintf(&b, "{%s\"partition\":%d,\"key\":\"k\",\"value\":{\"user\":\"u\",\"ts\":%d}}", topic, part, i)
			if rng.Intn(10) == 0 {
				b.WriteString("\r")
			}
			b.WriteString("\n")
		}
		data := b.Bytes()
		want, err := ScanPartitions(p, nil, bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		if want != 41+int(seed) {
			t.Fatalf("seed %d: serial scan found %d partitions, want %d", seed, want, 41+seed)
		}
		for n := 2; n <= 5; n++ {
			got, err := ScanPartitionsAt(p, nil, bytes.NewReader(data), int64(len(data)), n, wrap)
			if err != nil || got != want {
				t.Fatalf("seed %d, %d ranges: %d partitions (%v), the serial scan %d", seed, n, got, err, want)
			}
		}
	}
	// A mark at the start of a cut's line is passed over.
	data := []byte(strings.Repeat("x\n", 10) + utf8BOM + "y\nz\n")
	if at, err := lineStart(bytes.NewReader(data), 20, int64(len(data))); err != nil || at != 20+int64(len(utf8BOM))+2 {
		t.Fatalf("lineStart at a marked line: %d %v, want %d", at, err, 20+len(utf8BOM)+2)
	}
}
