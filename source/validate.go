package source

import (
	"unsafe"

	"github.com/tidwall/gjson"
)

// checkAndLookUp is CheckJSON, the object check and lookUp of Decode in one
// pass over the value b, for values not validated before: it validates
// every byte as gjson.ValidBytes does (FuzzDecode compares the two), and
// while it walks the top-level object it matches the fields. It returns
// Decode's reason for a bad value, or "".
func (d *Decoder) checkAndLookUp(b []byte) string {
	if len(b) > deepCheckLen && tooDeep(b) {
		return "value is nested too deeply"
	}
	i := skipSpaceBytes(b, 0)
	if i >= len(b) || b[i] != '{' || len(d.fields) > 64 {
		if why := CheckJSON(b); why != "" {
			return "value is " + why
		}
		if len(d.fields) == 0 {
			return ""
		}
		if i >= len(b) || b[i] != '{' {
			return "value is not a JSON object"
		}
		d.lookUp(bytesString(b[i:]))
		return ""
	}
	clear(d.results)
	var found uint64
	all := uint64(1)<<len(d.fields) - 1
	obj := bytesString(b)
	i = skipSpaceBytes(b, i+1)
	if i < len(b) && b[i] == '}' {
		i++
	} else {
		for {
			if i >= len(b) || b[i] != '"' {
				return "value is not valid JSON"
			}
			end, escaped, ok := validString(b, i+1)
			if !ok {
				return "value is not valid JSON"
			}
			nameStart := i
			i = skipSpaceBytes(b, end)
			if i >= len(b) || b[i] != ':' {
				return "value is not valid JSON"
			}
			i = skipSpaceBytes(b, i+1)
			start := i
			if i, ok = validValue(b, i); !ok {
				return "value is not valid JSON"
			}
			if found != all {
				name := obj[nameStart+1 : end-1]
				if escaped {
					name = gjson.Parse(obj[nameStart:end]).Str
				}
				for j := range d.fields {
					f := &d.fields[j]
					if found&(1<<j) == 0 && f.first == name {
						found |= 1 << j
						d.results[j] = f.rest(gjson.Parse(obj[start:i]))
					}
				}
			}
			i = skipSpaceBytes(b, i)
			if i < len(b) && b[i] == ',' {
				i = skipSpaceBytes(b, i+1)
				continue
			}
			if i < len(b) && b[i] == '}' {
				i++
				break
			}
			return "value is not valid JSON"
		}
	}
	if skipSpaceBytes(b, i) != len(b) {
		return "value is not valid JSON"
	}
	return ""
}

// bytesString is a no-copy string view of b, valid while b is not changed.
func bytesString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

func skipSpaceBytes(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

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
		return validObject(b, i+1)
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
func validString(b []byte, i int) (end int, escaped, ok bool) {
	for ; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			return i + 1, escaped, true
		case c < ' ':
			return i, escaped, false
		case c == '\\':
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
		}
	}
	return i, escaped, false
}

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

// validObject checks the object whose '{' is before b[i].
func validObject(b []byte, i int) (int, bool) {
	i = skipSpaceBytes(b, i)
	if i < len(b) && b[i] == '}' {
		return i + 1, true
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return i, false
		}
		var ok bool
		if i, _, ok = validString(b, i+1); !ok {
			return i, false
		}
		if i = skipSpaceBytes(b, i); i >= len(b) || b[i] != ':' {
			return i, false
		}
		if i, ok = validValue(b, skipSpaceBytes(b, i+1)); !ok {
			return i, false
		}
		if i = skipSpaceBytes(b, i); i >= len(b) {
			return i, false
		}
		switch b[i] {
		case '}':
			return i + 1, true
		case ',':
			i = skipSpaceBytes(b, i+1)
		default:
			return i, false
		}
	}
}

// validArray checks the array whose '[' is before b[i].
func validArray(b []byte, i int) (int, bool) {
	i = skipSpaceBytes(b, i)
	if i < len(b) && b[i] == ']' {
		return i + 1, true
	}
	for {
		var ok bool
		if i, ok = validValue(b, i); !ok {
			return i, false
		}
		if i = skipSpaceBytes(b, i); i >= len(b) {
			return i, false
		}
		switch b[i] {
		case ']':
			return i + 1, true
		case ',':
			i = skipSpaceBytes(b, i+1)
		default:
			return i, false
		}
	}
}
