package source

import (
	"math/bits"

	"github.com/tidwall/gjson"
)

// lookUp sets d.results for the JSON object obj (valid JSON, starting with
// '{') in one walk over its members: each field's first segment is matched
// against every member name (an empty segment matches the member named "",
// as in gjson), the first member of a name wins, and only a nested field
// then reads further, inside that member's value. The results are what
// fieldPath.get returns for each field (FuzzDecode compares them); a
// separate gjson.Get per field would walk the members before it once per
// field. Values not validated before go through checkAndLookUp instead.
func (d *Decoder) lookUp(obj string) {
	clear(d.results)
	if len(d.fields) > 64 {
		for i := range d.fields {
			d.results[i] = d.fields[i].get(obj)
		}
		return
	}
	var found uint64
	all := uint64(1)<<len(d.fields) - 1
	eachMember(obj, func(name, value string) bool {
		d.match(&found, name, value)
		return found != all
	})
}

// match sets the result of each field not found yet (a bit of found, which
// it sets) whose first segment is the member name, from the member's raw
// value: the first member of a name wins.
func (d *Decoder) match(found *uint64, name, value string) {
	for m := d.byLen[min(len(name), len(d.byLen)-1)] &^ *found; m != 0; m &= m - 1 {
		j := bits.TrailingZeros64(m)
		f := &d.fields[j]
		if f.first == name {
			*found |= 1 << j
			if len(f.segs) > 1 {
				d.results[j] = f.rest(ParseMember(value, f.numeric))
			} else {
				d.results[j] = ParseMember(value, f.numeric) // no copies through rest
			}
		}
	}
}

// memberName is the name of a member from its quoted form.
func memberName(quoted string, escaped bool) string {
	if escaped {
		return gjson.Parse(quoted).Str
	}
	return quoted[1 : len(quoted)-1]
}

// eachMember calls fn with the name (unescaped) and the raw value of each
// member of the JSON object obj, in order, until fn returns false. obj must
// be valid JSON and start with '{' (it skips values without checking them).
func eachMember(obj string, fn func(name, value string) bool) {
	n := len(obj)
	for i := 1; ; {
		i = skipSpace(obj, i)
		if i >= n || obj[i] != '"' {
			return // '}': no more members
		}
		end, escaped := stringEnd(obj, i)
		name := memberName(obj[i:end], escaped)
		i = skipSpace(obj, end)
		if i >= n || obj[i] != ':' {
			return
		}
		i = skipSpace(obj, i+1)
		start := i
		i = valueEnd(obj, i)
		if !fn(name, obj[start:i]) {
			return
		}
		i = skipSpace(obj, i)
		if i < n && obj[i] == ',' {
			i++
		}
	}
}

// skipSpace returns the index of the first byte at or after i that is not
// JSON whitespace. Compact JSON has none: a byte above the space ends the
// loop with one comparison.
func skipSpace[T string | []byte](s T, i int) int {
	for i < len(s) {
		if c := s[i]; c > ' ' || c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			break
		}
		i++
	}
	return i
}

// stringEnd returns the index after the string that starts at s[i] == '"',
// and whether it holds a backslash escape.
func stringEnd(s string, i int) (int, bool) {
	escaped := false
	for i++; i < len(s); i++ {
		switch s[i] {
		case '\\':
			escaped = true
			i++
		case '"':
			return i + 1, escaped
		}
	}
	return len(s), escaped
}

// valueEnd returns the index after the JSON value that starts at s[i].
func valueEnd(s string, i int) int {
	if i >= len(s) {
		return i
	}
	switch s[i] {
	case '"':
		end, _ := stringEnd(s, i)
		return end
	case '{', '[':
		depth := 0
		for i < len(s) {
			switch s[i] {
			case '"':
				i, _ = stringEnd(s, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return i
	}
	for i < len(s) {
		switch s[i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return i
		}
		i++
	}
	return i
}
