package source

import (
	"encoding/binary"
	"math/bits"
	"unsafe"
)

// checkAndLookUp is CheckJSON, the object check and lookUp of Decode in one
// pass over the value b, for values not validated before: it validates
// every byte as gjson.ValidBytes does (FuzzDecode compares the two), and
// while it walks the top-level object it matches the fields. It returns
// Decode's reason for a bad value, or "".
func (d *Decoder) checkAndLookUp(b []byte) string {
	clear(d.results)
	d.found = 0
	fields := d
	if len(d.fields) > 64 {
		fields = nil // found has a bit per field: lookUp reads them one by one
	}
	why, object := checkObject(b, nil, fields, nil)
	switch {
	case why != "":
		return "value is " + why
	case len(d.fields) == 0:
		return ""
	case !object:
		return "value is not a JSON object"
	case fields == nil:
		d.lookUp(bytesString(b[skipSpace(b, 0):]))
	}
	return ""
}

// CheckObject is CheckJSON for b and, when b is a JSON object, a walk over
// its members, in one pass: it returns CheckJSON's reason, or "", and
// whether b is an object; for an object, member gets the name (unescaped)
// and the raw value of each member, in order, as the pass reaches them, so
// members before an error have been handed out when the reason is not "".
func CheckObject(b []byte, member func(name, value string)) (why string, object bool) {
	return checkObject(b, member, nil, nil)
}

// nesting asks validObject to match, during the same pass, the members of
// the first member named name, when that member's value is an object,
// against the fields of a decoder.
type nesting struct {
	name   string
	fields *Decoder
	met    bool // the first member named name was reached
	looked bool // and its members were matched
}

// checkObject is CheckObject, with fields and nest (see validObject)
// applied to the top-level object.
func checkObject(b []byte, member func(name, value string), fields *Decoder, nest *nesting) (why string, object bool) {
	if len(b) > deepCheckLen && tooDeep(b) {
		return "nested too deeply", false
	}
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return CheckJSON(b), false
	}
	end, ok := validObject(b, i+1, member, fields, nest)
	if !ok || skipSpace(b, end) != len(b) {
		return "not valid JSON", true
	}
	return "", true
}

// CheckLine is CheckObject for line, a JSON object one of whose members
// holds a record value (a replay line's "value"): when the first member
// named field has an object value, the decoder's fields are looked up in
// that object during the same pass, and found is true: DecodeFound then
// decodes a record whose Value is that member's raw value without reading
// it again. Otherwise Decode does the lookup as usual.
func (d *Decoder) CheckLine(line []byte, member func(name, value string), field string) (why string, object, found bool) {
	if len(d.fields) > 64 {
		why, object = checkObject(line, member, nil, nil)
		return why, object, false
	}
	clear(d.results)
	d.found = 0
	d.nest = nesting{name: field, fields: d}
	why, object = checkObject(line, member, nil, &d.nest)
	return why, object, d.nest.looked
}

// bytesString is a no-copy string view of b, valid while b is not changed.
func bytesString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// validValue returns the index after the valid JSON value at b[i] (no
// space before it), and whether there is one.
func validValue(b []byte, i int) (int, bool) {
	if i >= len(b) {
		return i, false
	}
	switch c := b[i]; {
	case c == '"':
		end, _, ok := validString(b, i+1)
		return end, ok
	case c == '{':
		return validObject(b, i+1, nil, nil, nil)
	case c == '[':
		return validArray(b, i+1)
	case c == '-' || (c >= '0' && c <= '9'):
		return validNumber(b, i)
	case c == 't':
		return validLiteral(b, i, "true")
	case c == 'f':
		return validLiteral(b, i, "false")
	case c == 'n':
		return validLiteral(b, i, "null")
	}
	return i, false
}

func validLiteral(b []byte, i int, lit string) (int, bool) {
	if len(b)-i >= len(lit) && string(b[i:i+len(lit)]) == lit {
		return i + len(lit), true
	}
	return i, false
}

// validString checks the string whose opening quote is before b[i]: it
// returns the index after the closing quote, and whether it holds an escape.
// It reads eight bytes at a time: a word's lowest marked byte
// (stringWordSpecials) is the first byte it must stop at; the last few
// bytes of b go through the stringSpecial table.
func validString(b []byte, i int) (end int, escaped, ok bool) {
	for {
		for {
			if len(b)-i < 8 {
				for i < len(b) && !stringSpecial[b[i]] {
					i++
				}
				break
			}
			if m := stringWordSpecials(binary.LittleEndian.Uint64(b[i:])); m != 0 {
				i += bits.TrailingZeros64(m) >> 3
				break
			}
			i += 8
		}
		if i >= len(b) {
			return i, escaped, false
		}
		switch c := b[i]; {
		case c == '"':
			return i + 1, escaped, true
		case c < ' ':
			return i, escaped, false
		}
		// A backslash.
		escaped = true
		if i++; i >= len(b) {
			return i, escaped, false
		}
		switch b[i] {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		case 'u':
			if len(b)-i <= 4 || !isHex(b[i+1]) || !isHex(b[i+2]) || !isHex(b[i+3]) || !isHex(b[i+4]) {
				return i, escaped, false
			}
			i += 4
		default:
			return i, escaped, false
		}
		i++
	}
}

// Bytes repeated in each of a word's eight bytes.
const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// stringWordSpecials marks (with its high bit) each of the eight bytes of
// x, read little-endian, that validString must stop at: a control byte
// (below 0x20), a quote or a backslash. Each test is the "has a byte less
// than n" word trick, where a borrow crosses into a higher byte only from
// a byte that matched: the lowest mark is exact (the first such byte, in
// the string's order), a higher one may be false, and no mark means none.
func stringWordSpecials(x uint64) uint64 {
	control := (x - ones*0x20) &^ x
	q := x ^ (ones * '"')
	quote := (q - ones) &^ q
	s := x ^ (ones * '\\')
	slash := (s - ones) &^ s
	return (control | quote | slash) & highs
}

// stringSpecial marks the bytes validString stops at inside a string: the
// quote, the backslash and the control characters.
var stringSpecial = func() (t [256]bool) {
	for c := 0; c < ' '; c++ {
		t[c] = true
	}
	t['"'], t['\\'] = true, true
	return t
}()

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// validNumber checks the JSON number at b[i].
func validNumber(b []byte, i int) (int, bool) {
	if b[i] == '-' {
		i++
	}
	switch {
	case i >= len(b) || !isDigit(b[i]):
		return i, false
	case b[i] == '0':
		i++
	default:
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || !isDigit(b[i]) {
			return i, false
		}
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || !isDigit(b[i]) {
			return i, false
		}
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	}
	return i, true
}

// validObject checks the object whose '{' is before b[i]. member, when not
// nil, is called with the name (unescaped) and the raw value of each member;
// otherwise fields, when not nil, matches each member against its fields
// not found yet (a direct call, and none once all are found); nest, when
// not nil, does that for the members of one member's object (nesting).
func validObject(b []byte, i int, member func(name, value string), fields *Decoder, nest *nesting) (int, bool) {
	i = skipSpace(b, i)
	if i < len(b) && b[i] == '}' {
		return i + 1, true
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return i, false
		}
		nameAt := i
		end, escaped, ok := validString(b, i+1)
		if !ok {
			return end, false
		}
		if i = skipSpace(b, end); i >= len(b) || b[i] != ':' {
			return i, false
		}
		start := skipSpace(b, i+1)
		if nest != nil && !nest.met && memberName(bytesString(b[nameAt:end]), escaped) == nest.name {
			nest.met = true
			if start < len(b) && b[start] == '{' {
				nest.looked = true
				i, ok = validObject(b, start+1, nil, nest.fields, nil)
			} else {
				i, ok = validValue(b, start)
			}
		} else {
			i, ok = validValue(b, start)
		}
		if !ok {
			return i, false
		}
		if member != nil {
			member(memberName(bytesString(b[nameAt:end]), escaped), bytesString(b[start:i]))
		} else if fields != nil && fields.found != fields.all {
			fields.match(&fields.found, memberName(bytesString(b[nameAt:end]), escaped), bytesString(b[start:i]))
		}
		closed := false
		if i, closed, ok = nextElement(b, i, '}'); !ok || closed {
			return i, ok
		}
	}
}

// nextElement reads what follows an element of an object or array that end
// closes: the index of the next element, or the index after end and
// closed; not ok when neither follows.
func nextElement(b []byte, i int, end byte) (next int, closed, ok bool) {
	if i = skipSpace(b, i); i >= len(b) {
		return i, false, false
	}
	switch b[i] {
	case end:
		return i + 1, true, true
	case ',':
		return skipSpace(b, i+1), false, true
	}
	return i, false, false
}

// validArray checks the array whose '[' is before b[i].
func validArray(b []byte, i int) (int, bool) {
	i = skipSpace(b, i)
	if i < len(b) && b[i] == ']' {
		return i + 1, true
	}
	for {
		var ok, closed bool
		if i, ok = validValue(b, i); !ok {
			return i, false
		}
		if i, closed, ok = nextElement(b, i, ']'); !ok || closed {
			return i, ok
		}
	}
}
