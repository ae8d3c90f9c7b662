package service

import (
	"reflect"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/windowd/windowd/state"
	"github.com/windowd/windowd/watermark"
)

func TestMarkerRoundTrip(t *testing.T) {
	m := marker{position: 901, gen: watermark.Generator{MaxTS: 1700000123456, Seen: 42, Watermark: 1700000121456}, frontier: -5}
	got, err := decodeMarker(encodeMarker(m))
	if err != nil || !reflect.DeepEqual(got, m) {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	b := encodeMarker(m)
	for _, bad := range [][]byte{nil, {2}, b[:len(b)-1], append(append([]byte(nil), b...), 0)} {
		if _, err := decodeMarker(bad); err == nil {
			t.Errorf("decodeMarker(%v) accepted a corrupt marker", bad)
		}
	}
	// Co-partitioned inputs: the followers' positions and generators
	// (coinputs.go), one not yet known.
	m.follow = []followMark{{position: 77, gen: watermark.Generator{MaxTS: 5, Seen: 2, Watermark: 3}}, {position: -1, gen: watermark.NewGenerator()}}
	b = encodeMarker(m)
	if got, err := decodeMarker(b); err != nil || !reflect.DeepEqual(got, m) || b[0] != markerVersionInputs {
		t.Fatalf("round trip with followers: %+v, %v", got, err)
	}
	if _, err := decodeMarker(b[:len(b)-1]); err == nil {
		t.Error("decodeMarker accepted a cut marker with followers")
	}
}

func TestSkipSetsRoundTrip(t *testing.T) {
	in := map[int32]*skipSet{
		0: {keys: map[string]int64{"u1": 10, "": 3, "u\x00bin": 12}, max: 12},
		7: {keys: map[string]int64{"k": 1 << 40}, max: 1 << 40},
	}
	out, err := decodeSkip(encodeSkip(in))
	if err != nil || !reflect.DeepEqual(out, in) {
		t.Fatalf("round trip: %+v, %v", out, err)
	}
	if out, err := decodeSkip(nil); err != nil || len(out) != 0 {
		t.Fatalf("absent: %+v, %v", out, err)
	}
	b := encodeSkip(in)
	if _, err := decodeSkip(b[:len(b)-2]); err == nil {
		t.Fatal("truncated skip sets accepted")
	}
}

func TestOffsetsRoundTrip(t *testing.T) {
	in := map[int32]int64{0: 0, 3: 12345, 9: -1}
	out := map[int32]int64{}
	if err := decodeOffsets(encodeOffsets(in), out); err != nil || !reflect.DeepEqual(out, in) {
		t.Fatalf("round trip: %v, %v", out, err)
	}
}

// TestTrackingStoreKeepsLoggedValues checks what the commit cycle logs
// without reading state back: each changed key's last value, copied (the
// engine reuses its encoding buffer), nil for a deleted key, nothing for
// untracked writes; forget starts the next cycle empty.
func TestTrackingStoreKeepsLoggedValues(t *testing.T) {
	db, err := state.Open("db", state.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	s := &trackingStore{DB: db, dirty: map[int32]map[string][]byte{}}
	buf := []byte("v1")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(s.PutKey(0, "a", buf))
	copy(buf, "XX") // the engine's next encoding in the same buffer
	must(s.PutKey(0, "b", []byte("b1")))
	must(s.PutKey(0, "b", []byte("b2")))
	must(s.PutKey(3, "c", []byte("c1")))
	must(s.DeleteKey(3, "c"))
	must(s.untracked(func() error { return s.PutKey(0, "restored", []byte("r")) }))
	want := map[int32]map[string][]byte{0: {"a": []byte("v1"), "b": []byte("b2")}, 3: {"c": nil}}
	if !reflect.DeepEqual(s.dirty, want) {
		t.Fatalf("dirty = %q, want %q", s.dirty, want)
	}
	if v, err := db.GetKey(0, "b"); err != nil || string(v) != "b2" {
		t.Fatalf("the store holds %q, %v", v, err)
	}
	if s.writes != 5 {
		t.Fatalf("writes = %d, want 5", s.writes)
	}
	s.forget()
	must(s.PutKey(0, "a", []byte("v2")))
	if want := map[int32]map[string][]byte{0: {"a": []byte("v2")}}; !reflect.DeepEqual(s.dirty, want) {
		t.Fatalf("after forget: dirty = %q, want %q", s.dirty, want)
	}
}
