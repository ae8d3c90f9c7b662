package schema

import (
	"encoding/binary"
	"errors"
	"slices"
	"strconv"
	"strings"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/windowd/windowd/config"
)

// maxPrograms bounds the compiled programs one Decoder keeps; past it the
// cache starts over.
const maxPrograms = 1024

// Decoder turns the values of one pipeline, in the Confluent wire format,
// into JSON objects. It is not safe for concurrent use; Decoders of one
// Registry may run concurrently.
type Decoder struct {
	reg    *Registry
	format config.Format
	tsPath []string          // the pipeline's timestamp field; nil: none
	keep   func(string) bool // the top-level fields the pipeline reads; nil: all
	progs  map[progKey]program
	bad    map[progKey]string // schemas (or message indexes) that do not compile
	ts     Instant            // the last value's
	index  []int              // the last Protobuf value's message indexes
}

// progKey names a program: a schema id and, for Protobuf, the message
// indexes as text ("" for the first message).
type progKey struct {
	id    int
	index string
}

// NewDecoder returns a decoder of format (Avro or Protobuf) values with
// schemas from reg. tsField is the pipeline's timestamp field ("" when
// event time comes from elsewhere): an instant-typed value there is the
// record's event time (Instant). When members is not nil, only the
// top-level members it names need be written (the others are read and
// checked, not written).
func NewDecoder(reg *Registry, format config.Format, tsField string, members []string) *Decoder {
	d := &Decoder{reg: reg, format: format, progs: map[progKey]program{}, bad: map[progKey]string{}}
	if members != nil {
		d.keep = func(name string) bool { return slices.Contains(members, name) }
	}
	if tsField != "" {
		d.tsPath = strings.Split(tsField, ".")
	}
	return d
}

// AppendJSON appends the JSON object the wire-format value v decodes to.
// The error is a *BadRecord (dead-letter the record) or an *Unavailable
// (the registry: try again later).
func (d *Decoder) AppendJSON(dst, v []byte) ([]byte, Instant, error) {
	d.ts = Instant{}
	var header sr.ConfluentHeader // franz-go's reader of the wire format
	id, payload, err := header.DecodeID(v)
	if err != nil {
		return dst, Instant{}, &BadRecord{notWireFormat(v)}
	}
	key := progKey{id: id}
	var index []int
	if d.format == config.Protobuf {
		if index, payload, err = messageIndexes(d.index, payload); err != nil {
			return dst, Instant{}, &BadRecord{"value's message indexes (schema id " + strconv.Itoa(id) + ") " + err.Error()}
		}
		d.index = index
		if len(index) != 1 || index[0] != 0 {
			key.index = indexText(index)
		}
	}
	p, err := d.program(key, index)
	if err != nil {
		return dst, Instant{}, err
	}
	start := len(dst)
	out, err := p.appendJSON(dst, payload, &d.ts) // a field: a local would escape to the heap
	if err != nil {
		return dst[:start], Instant{}, &BadRecord{"value does not decode with schema id " + strconv.Itoa(id) + " (" + d.format.String() + "): " + err.Error()}
	}
	return out, d.ts, nil
}

// program returns the compiled program of key, compiling it on first use.
func (d *Decoder) program(key progKey, index []int) (program, error) {
	if p, ok := d.progs[key]; ok {
		return p, nil
	}
	if why, ok := d.bad[key]; ok {
		return nil, &BadRecord{why}
	}
	e, err := d.reg.lookup(key.id)
	if err != nil {
		return nil, err // not cached here: the registry keeps its own answers, for a while
	}
	p, err := d.compile(key.id, e, index)
	if len(d.progs)+len(d.bad) >= maxPrograms {
		clear(d.progs)
		clear(d.bad)
	}
	if err != nil {
		d.bad[key] = err.Error()
		return nil, &BadRecord{err.Error()}
	}
	d.progs[key] = p
	return p, nil
}

// compile builds the program of schema id (entry e) for the decoder's format.
func (d *Decoder) compile(id int, e *entry, index []int) (program, error) {
	what := "schema id " + strconv.Itoa(id)
	typ := e.schema.Type
	switch {
	case d.format == config.Avro && typ != sr.TypeAvro, d.format == config.Protobuf && typ != sr.TypeProtobuf:
		return nil, errors.New(what + " is a " + typ.String() + " schema, but input.format is " + d.format.String())
	case d.format == config.Avro:
		cache := &avro.SchemaCache{}
		// References first, so the main schema's names resolve. Each is
		// parsed once; one that needs another not parsed yet is tried
		// again after the rest.
		pending := make([]string, 0, len(e.deps))
		for _, text := range e.deps {
			pending = append(pending, text)
		}
		for len(pending) > 0 {
			var next []string
			var lastErr error
			for _, text := range pending {
				if _, err := avro.ParseWithCache(text, "", cache); err != nil {
					next, lastErr = append(next, text), err
				}
			}
			if len(next) == len(pending) {
				return nil, errors.New(what + "'s references cannot be read: " + lastErr.Error())
			}
			pending = next
		}
		s, err := avro.ParseWithCache(e.schema.Schema, "", cache)
		if err != nil {
			return nil, errors.New(what + " cannot be read: " + err.Error())
		}
		return newAvroProgram(s, d.tsPath, d.keep)
	default:
		fd, err := compileProtoFile(e.schema.Schema, e.deps)
		if err != nil {
			return nil, errors.New(what + " cannot be read: " + err.Error())
		}
		p, err := newProtoProgram(fd, index, d.tsPath, d.keep)
		if err != nil {
			return nil, errors.New(what + ", message " + indexText(index) + ": " + err.Error())
		}
		return p, nil
	}
}

// notWireFormat says why v is not in the Confluent wire format.
func notWireFormat(v []byte) string {
	switch {
	case len(v) == 0:
		return "value is empty, not in the schema registry wire format (magic byte 0, a 4-byte schema id, the payload)"
	case v[0] != 0:
		return "value is not in the schema registry wire format: it starts with byte 0x" + strconv.FormatUint(uint64(v[0]), 16) + ", not the magic byte 0"
	}
	return "value is not in the schema registry wire format: " + strconv.Itoa(len(v)) + " bytes, too short for the magic byte and a 4-byte schema id"
}

// maxIndexes bounds the message indexes of a Protobuf value: a nesting
// deeper than any schema has.
const maxIndexes = 100

// messageIndexes reads the Protobuf message indexes at the start of b: a
// zigzag varint count (0 stands for [0]), then the indexes, as zigzag
// varints. They are appended to index[:0]. (pkg/sr's DecodeIndex reads
// the same, with two allocations per value.)
func messageIndexes(index []int, b []byte) ([]int, []byte, error) {
	index = index[:0]
	count, n := binary.Varint(b)
	switch {
	case n <= 0:
		return nil, nil, errors.New("are cut short")
	case count == 0:
		return append(index, 0), b[n:], nil
	case count < 0:
		return nil, nil, errors.New("have a negative count")
	case count > maxIndexes:
		return nil, nil, errors.New("are more than " + strconv.Itoa(maxIndexes))
	}
	b = b[n:]
	for range count {
		x, n := binary.Varint(b)
		if n <= 0 {
			return nil, nil, errors.New("are cut short")
		}
		if x < 0 || x > 1<<30 {
			return nil, nil, errors.New("hold a bad index " + strconv.FormatInt(x, 10))
		}
		index, b = append(index, int(x)), b[n:]
	}
	return index, b, nil
}

// indexText is the message indexes as "[0, 1]".
func indexText(index []int) string {
	b := []byte{'['}
	for i, x := range index {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = strconv.AppendInt(b, int64(x), 10)
	}
	return string(append(b, ']'))
}
