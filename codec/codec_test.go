package codec

import (
	"encoding/binary"
	"errors"
	"maps"
	"math"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	offs := map[int32]int64{0: 7, 3: -1, 12: 1 << 40}
	b := NewWriter(nil).Byte(2).Varint(-5).Uvarint(300).String("kéy").Offsets(offs).Varint(1<<31 - 1).Bytes()
	r := NewReader(b, "test")
	got := map[int32]int64{}
	if r.Byte() != 2 || r.Varint() != -5 || r.Uvarint() != 300 || r.String() != "kéy" {
		t.Fatalf("fields read back wrong: %v", r.Err())
	}
	r.Offsets(got)
	if p := r.Partition(); p != 1<<31-1 {
		t.Fatalf("partition %d", p)
	}
	if err := r.Done(); err != nil || !maps.Equal(got, offs) {
		t.Fatalf("offsets %v, err %v", got, err)
	}
}

// Every truncation and a trailing byte are errors that name the format,
// never a panic or a huge allocation.
func TestCorrupt(t *testing.T) {
	b := NewWriter(nil).String("abc").Offsets(map[int32]int64{1: 2}).Bytes()
	for i := 0; i < len(b); i++ {
		r := NewReader(b[:i], "offsets")
		_ = r.String()
		r.Offsets(map[int32]int64{})
		err := r.Done()
		var ce *CorruptError
		if !errors.Is(err, ErrCorrupt) || !errors.As(err, &ce) || ce.What != "offsets" || err.Error() != "corrupt offsets" {
			t.Fatalf("truncated to %d bytes: err %v", i, err)
		}
	}
	r := NewReader(append(b, 0), "x")
	_ = r.String()
	r.Offsets(map[int32]int64{})
	if r.Err() != nil || r.Done() == nil {
		t.Fatal("a trailing byte is not reported by Done")
	}
	// A count larger than the input is refused before allocating.
	r = NewReader(NewWriter(nil).Uvarint(1<<60).Bytes(), "x")
	if n := r.Count(); n != 0 || r.Err() == nil {
		t.Fatalf("count %d accepted", n)
	}
	if p := NewReader(NewWriter(nil).Varint(-1).Bytes(), "x"); p.Partition() != 0 || p.Err() == nil {
		t.Fatal("negative partition accepted")
	}
}

// TestReaderFloatAndNext: Float64 and Next read what a key state holds
// (windowing's decoder), and a value cut short fails, with every later read
// a zero value.
func TestReaderFloatAndNext(t *testing.T) {
	b := binary.LittleEndian.AppendUint64(nil, math.Float64bits(2.5))
	b = append(b, "abc"...)
	r := ReaderOf(b, "test")
	if v := r.Float64(); v != 2.5 || r.Len() != 3 {
		t.Fatalf("Float64 %v, %d left", v, r.Len())
	}
	if v := string(r.Next(3)); v != "abc" || r.Done() != nil {
		t.Fatalf("Next %q, %v", v, r.Done())
	}
	r = ReaderOf(b[:5], "test")
	if v := r.Float64(); v != 0 || !errors.Is(r.Err(), ErrCorrupt) || r.Varint() != 0 {
		t.Fatalf("a cut value: %v, %v", v, r.Err())
	}
	r = ReaderOf([]byte("ab"), "test")
	if r.Next(3) != nil || r.Err() == nil {
		t.Fatalf("Next past the end: %v", r.Err())
	}
}
