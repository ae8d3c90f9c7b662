package repartition

import "github.com/windowd/windowd/codec"

// Repartitioning (docs/SEMANTICS.md, Repartitioning): stage 1 writes every
// decoded record to the internal repartition topic keyed by its group key,
// in the partition KeyPartition names, with the upstream header; it writes
// watermark markers to every partition with the marker header. Stage 2 reads
// both.
const (
	// HeaderUpstream is on every repartitioned record: Upstream's encoding
	// of the input partition and offset it came from.
	HeaderUpstream = "windowd-upstream"
	// HeaderMarker marks a watermark marker record (value: Marker's
	// encoding); markers are never data.
	HeaderMarker = "windowd-marker"
)

// KeyPartition is the repartition partition of a group key among n: Kafka's
// default partitioner (murmur2 of the key bytes, positive, modulo n), so
// other Kafka clients agree on where a key lives.
func KeyPartition(key string, n int32) int32 {
	return int32(uint32(murmur2(key))&0x7fffffff) % n
}

// murmur2 is the hash of Kafka's Utils.murmur2.
func murmur2(s string) int32 {
	const (
		seed uint32 = 0x9747b28c
		m    uint32 = 0x5bd1e995
		r           = 24
	)
	n := len(s)
	h := seed ^ uint32(n)
	i := 0
	for ; i+4 <= n; i += 4 {
		k := uint32(s[i]) | uint32(s[i+1])<<8 | uint32(s[i+2])<<16 | uint32(s[i+3])<<24
		k *= m
		k ^= k >> r
		k *= m
		h *= m
		h ^= k
	}
	switch n - i {
	case 3:
		h ^= uint32(s[i+2]) << 16
		fallthrough
	case 2:
		h ^= uint32(s[i+1]) << 8
		fallthrough
	case 1:
		h ^= uint32(s[i])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return int32(h)
}

// Source is an input partition as the wire names it: partition P of the
// pipeline's input In (its place in `inputs`; 0 for a pipeline of one
// input). Upstream partition numbers (Layout) are a process's own: they
// shift when an input earlier in `inputs` gains partitions, so records and
// markers that outlive a process, or reach one started with other
// partition counts, name the input and its partition instead.
type Source struct{ In, P int32 }

// Marker is a watermark marker of one upstream (input) partition.
type Marker struct {
	Upstream  int32 // input partition (in a Layout's numbering)
	Watermark int64 // its watermark (watermark.MinTime: none yet)
	Idle      bool
	Time      int64 // processing time it was written, Unix ms (for the lag metric)
	// Quiet: the quiet advance raised Watermark above Base, the input
	// partition's own watermark (watermark.Spec.QuietAdvance). Without
	// it Base is Watermark.
	Quiet bool
	Base  int64
}

const markerEncoding = 1

// AppendMarker appends the encoding of m, a marker of input partition s
// (which stands for m.Upstream on the wire), to b.
//
// Flags: 1 idle, 2 quiet (then Base follows Time), 4 an input other than
// the first (its index follows).
func AppendMarker(b []byte, s Source, m Marker) []byte {
	flags := byte(0)
	if m.Idle {
		flags |= 1
	}
	if m.Quiet {
		flags |= 2
	}
	if s.In > 0 {
		flags |= 4
	}
	w := codec.NewWriter(b).Byte(markerEncoding).Byte(flags).
		Varint(int64(s.P)).Varint(m.Watermark).Varint(m.Time)
	if m.Quiet {
		w.Varint(m.Base)
	}
	if s.In > 0 {
		w.Varint(int64(s.In))
	}
	return w.Bytes()
}

// DecodeMarker reads what AppendMarker wrote: the input partition, and
// the marker (its Upstream left 0: the reader's Layout numbers it).
func DecodeMarker(b []byte) (Source, Marker, error) {
	r := codec.NewReader(b, "watermark marker")
	version, flags := r.Byte(), r.Byte()
	var s Source
	s.P = r.Partition()
	m := Marker{Idle: flags&1 != 0, Quiet: flags&2 != 0, Watermark: r.Varint(), Time: r.Varint()}
	m.Base = m.Watermark
	if m.Quiet {
		m.Base = r.Varint()
	}
	if flags&4 != 0 {
		if s.In = r.Partition(); s.In == 0 {
			r.Fail()
		}
	}
	if version != markerEncoding || flags > 7 {
		r.Fail()
	}
	if err := r.Done(); err != nil {
		return Source{}, Marker{}, err
	}
	return s, m, nil
}

// AppendUpstream appends the upstream header value of a record from input
// partition s at offset off: the partition and the offset, then the input
// when it is not the first (so a pipeline of one input writes what it
// always wrote).
func AppendUpstream(b []byte, s Source, off int64) []byte {
	w := codec.NewWriter(b).Varint(int64(s.P)).Varint(off)
	if s.In > 0 {
		w.Varint(int64(s.In))
	}
	return w.Bytes()
}

// DecodeUpstream reads what AppendUpstream wrote.
func DecodeUpstream(b []byte) (s Source, off int64, ok bool) {
	r := codec.NewReader(b, "upstream header")
	s.P, off = r.Partition(), r.Varint()
	if r.Len() > 0 {
		if s.In = r.Partition(); s.In == 0 {
			r.Fail()
		}
	}
	if r.Done() != nil {
		return Source{}, 0, false
	}
	return s, off, true
}
