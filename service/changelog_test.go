package service

import (
	"reflect"
	"testing"

	"github.com/windowd/windowd/watermark"
)

func TestMarkerRoundTrip(t *testing.T) {
	m := marker{position: 901, gen: watermark.Generator{MaxTS: 1700000123456, Seen: 42, Watermark: 1700000121456}, frontier: -5}
	got, err := decodeMarker(encodeMarker(m))
	if err != nil || got != m {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	b := encodeMarker(m)
	for _, bad := range [][]byte{nil, {2}, b[:len(b)-1], append(append([]byte(nil), b...), 0)} {
		if _, err := decodeMarker(bad); err == nil {
			t.Errorf("decodeMarker(%v) accepted a corrupt marker", bad)
		}
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
