package schema

import (
	"encoding/base64"
	"strconv"
)

// program writes the payload of one schema (or, for Protobuf, one message
// type of it) as a JSON object.
type program interface {
	// appendJSON appends the JSON object payload decodes to, and sets ts
	// when the pipeline's timestamp field is an instant type of the schema
	// (an Avro timestamp logical type, a google.protobuf.Timestamp). An
	// error says why payload does not decode; dst may then hold part of
	// an object.
	appendJSON(dst, payload []byte, ts *Instant) ([]byte, error)
}

// Instant is the event time a schema typed as an instant: the pipeline's
// timestamp field read directly, whatever timestamp.format says.
type Instant struct {
	MS int64 // Unix milliseconds, floored
	OK bool  // the timestamp field was an instant in this record
}

// appendMillisDecimal appends v / 10^digits milliseconds (v in units of
// 10^-digits ms) as an exact JSON number: the integer part, and the
// fraction without trailing zeros.
func appendMillisDecimal(b []byte, v int64, digits int) []byte {
	unit := int64(1)
	for range digits {
		unit *= 10
	}
	q, r := v/unit, v%unit
	if r < 0 {
		r = -r
		if q == 0 {
			b = append(b, '-')
		}
	}
	b = strconv.AppendInt(b, q, 10)
	if r == 0 {
		return b
	}
	frac := strconv.AppendInt(make([]byte, 0, 20), r, 10)
	b = append(b, '.')
	for range digits - len(frac) {
		b = append(b, '0')
	}
	for len(frac) > 0 && frac[len(frac)-1] == '0' {
		frac = frac[:len(frac)-1]
	}
	return append(b, frac...)
}

// floorDiv is a/b rounded toward minus infinity (b > 0).
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

// appendBase64 appends bytes as a JSON string of their standard base64.
func appendBase64(b, v []byte) []byte {
	b = append(b, '"')
	b = base64.StdEncoding.AppendEncode(b, v)
	return append(b, '"')
}

// appendFloat appends f as a JSON number, or null when it is NaN or
// infinite (JSON has no such numbers).
func appendFloat(b []byte, f float64, bits int) []byte {
	if f != f || f > 1.7976931348623157e308 || f < -1.7976931348623157e308 {
		return append(b, "null"...)
	}
	return strconv.AppendFloat(b, f, 'g', -1, bits)
}
