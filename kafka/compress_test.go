package kafka

import (
	"bytes"
	"fmt"
	"io"
	"testing"

	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestCompressorLz4Frames: kafka.compression's default writes each batch
// as one lz4 frame of 64 KiB blocks (the frame descriptor's block size
// code 4; franz-go's own lz4 writer gives 7, 4 MiB) that decodes to the
// batch, also for a batch larger than one block.
func TestCompressorLz4Frames(t *testing.T) {
	for _, name := range []string{"", "lz4"} {
		comp, err := Compressor(name)
		if err != nil {
			t.Fatalf("Compressor(%q): %v", name, err)
		}
		var src []byte
		for i := 0; len(src) < 200<<10; i++ {
			src = fmt.Appendf(src, `{"key":"u%d","window":{"start":%d},"aggregates":{"n":%d}}`, i%977, i*10000, i%13)
		}
		for _, batch := range [][]byte{src[:300], src} {
			out, codec := comp.Compress(new(bytes.Buffer), batch)
			if codec != kgo.CodecLz4 {
				t.Fatalf("Compressor(%q): codec %d, want lz4 (%d)", name, codec, kgo.CodecLz4)
			}
			// Frame: magic (4 bytes), FLG, BD; BD's bits 4-6 are the block size.
			if len(out) < 6 || out[5]>>4&7 != 4 {
				t.Fatalf("Compressor(%q): frame descriptor % x, want block size code 4 (64 KiB)", name, out[:min(6, len(out))])
			}
			got, err := io.ReadAll(lz4.NewReader(bytes.NewReader(out)))
			if err != nil || !bytes.Equal(got, batch) {
				t.Fatalf("Compressor(%q): %d bytes decode to %d bytes (err %v), want the batch's %d", name, len(out), len(got), err, len(batch))
			}
		}
	}
	for _, name := range []string{"snappy", "zstd", "gzip", "none"} {
		if _, err := Compressor(name); err != nil {
			t.Fatalf("Compressor(%q): %v", name, err)
		}
	}
	if _, err := Compressor("brotli"); err == nil {
		t.Fatal(`Compressor("brotli") gave no error`)
	}
}
