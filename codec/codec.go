// Package codec is the one encoding of windowd's small binary formats:
// the offsets, changelog positions, skip sets and upstream tables kept in
// local state, the changelog's partition markers, and the repartition
// topic's marker and upstream headers, and JSON string literals
// (jsonstring.go). Each binary format is a sequence of
// varints, bytes and length-prefixed strings written by a Writer and read
// back by a Reader; every format is versioned by its owner where it lives
// on a topic.
//
// Invariants: a Reader never panics and never allocates more than its
// input can hold (a count is checked against the bytes left); the first
// malformed field makes every later read a zero value and Err/Done a
// *CorruptError naming the format, which errors.Is matches to ErrCorrupt.
package codec

import (
	"encoding/binary"
	"errors"
	"math"
)

// ErrCorrupt is what every decoding error of this package matches
// (errors.Is).
var ErrCorrupt = errors.New("corrupt encoding")

// CorruptError names the format that could not be read.
type CorruptError struct{ What string }

func (e *CorruptError) Error() string { return "corrupt " + e.What }

// Is makes errors.Is(err, ErrCorrupt) true.
func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }

// Writer appends a format's fields to a byte slice.
type Writer struct{ b []byte }

// NewWriter appends to b (nil: a new slice).
func NewWriter(b []byte) *Writer { return &Writer{b: b} }

// Bytes is what was written.
func (w *Writer) Bytes() []byte { return w.b }

// Byte appends one byte.
func (w *Writer) Byte(v byte) *Writer { w.b = append(w.b, v); return w }

// Varint appends a signed varint.
func (w *Writer) Varint(v int64) *Writer { w.b = binary.AppendVarint(w.b, v); return w }

// Uvarint appends an unsigned varint (counts, lengths).
func (w *Writer) Uvarint(v uint64) *Writer { w.b = binary.AppendUvarint(w.b, v); return w }

// String appends a length-prefixed string.
func (w *Writer) String(s string) *Writer {
	w.b = binary.AppendUvarint(w.b, uint64(len(s)))
	w.b = append(w.b, s...)
	return w
}

// Offsets appends a map of partition to offset (count, then pairs).
func (w *Writer) Offsets(m map[int32]int64) *Writer {
	w.Uvarint(uint64(len(m)))
	for part, off := range m {
		w.Varint(int64(part)).Varint(off)
	}
	return w
}

// Reader reads a format's fields back; see the package's invariants.
type Reader struct {
	b    []byte
	what string
	err  error
}

// NewReader reads b, a value of the format what (for errors: "offsets").
func NewReader(b []byte, what string) *Reader {
	r := ReaderOf(b, what)
	return &r
}

// ReaderOf is NewReader as a value, for a decoder that embeds it (no
// allocation per value read).
func ReaderOf(b []byte, what string) Reader { return Reader{b: b, what: what} }

// Len is the number of bytes not read yet: a count read from the value
// can be checked against it before anything is allocated for it.
func (r *Reader) Len() int { return len(r.b) }

// Float64 reads 8 bytes, a float64 in little-endian IEEE 754.
func (r *Reader) Float64() float64 {
	if len(r.b) < 8 {
		r.fail()
		return 0
	}
	v := math.Float64frombits(binary.LittleEndian.Uint64(r.b))
	r.b = r.b[8:]
	return v
}

// Next reads n bytes; the slice aliases the value read.
func (r *Reader) Next(n uint64) []byte {
	if n > uint64(len(r.b)) {
		r.fail()
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (r *Reader) fail() {
	if r.err == nil {
		r.err = &CorruptError{What: r.what}
	}
	r.b = nil
}

// Fail marks the value corrupt: a field was read but is out of its range.
func (r *Reader) Fail() { r.fail() }

// Err is the first decoding error.
func (r *Reader) Err() error { return r.err }

// Done is Err, or an error when bytes are left over.
func (r *Reader) Done() error {
	if r.err == nil && len(r.b) != 0 {
		r.fail()
	}
	return r.err
}

// Rest returns the bytes not read yet and stops reading them.
func (r *Reader) Rest() []byte {
	b := r.b
	r.b = nil
	return b
}

// Byte reads one byte.
func (r *Reader) Byte() byte {
	if len(r.b) == 0 {
		r.fail()
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

// Varint reads a signed varint.
func (r *Reader) Varint() int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail()
		return 0
	}
	r.b = r.b[n:]
	return v
}

// Uvarint reads an unsigned varint.
func (r *Reader) Uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail()
		return 0
	}
	r.b = r.b[n:]
	return v
}

// Partition reads a varint that must be a partition number (0..MaxInt32).
func (r *Reader) Partition() int32 {
	v := r.Varint()
	if v < 0 || v > math.MaxInt32 {
		r.fail()
		return 0
	}
	return int32(v)
}

// Count reads a count of items that take at least one byte each: it
// cannot exceed the bytes left.
func (r *Reader) Count() int {
	v := r.Uvarint()
	if v > uint64(len(r.b)) {
		r.fail()
		return 0
	}
	return int(v)
}

// String reads a length-prefixed string.
func (r *Reader) String() string {
	n := r.Uvarint()
	if n > uint64(len(r.b)) {
		r.fail()
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

// Offsets reads what Writer.Offsets wrote into dst.
func (r *Reader) Offsets(dst map[int32]int64) {
	for n := r.Count(); n > 0 && r.err == nil; n-- {
		part := r.Varint()
		off := r.Varint()
		if r.err == nil {
			dst[int32(part)] = off
		}
	}
}
