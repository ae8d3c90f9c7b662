package source

import (
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/gjson"
)

// This file holds reading event time from a field: the timestamp formats,
// exactly, and the reasons a bad one is dead-lettered with.

// msText is ms milliseconds as a Go duration string when it fits one.
func msText(ms uint64) string {
	if ms > uint64(math.MaxInt64/int64(time.Millisecond)) {
		return strconv.FormatUint(ms, 10) + "ms"
	}
	return time.Duration(int64(ms) * int64(time.Millisecond)).String()
}

// eventTime reads the timestamp field; it returns the time in Unix ms, or a
// non-empty reason.
func (d *Decoder) eventTime(r *gjson.Result) (int64, string) {
	if r.Type == gjson.Null { // missing or JSON null
		return 0, d.errs.tsMissing
	}
	if d.rfc3339 {
		if r.Type != gjson.String {
			return 0, d.errs.tsNotString
		}
		t, err := parseRFC3339(r.Str)
		if err != nil {
			return 0, d.errs.tsNotRFC3339 + quoteBounded(r.Str) + parseErrorDetail(err)
		}
		return t.UnixMilli(), "" // floors: nanoseconds are in [0, 1e9)
	}
	var text string
	switch r.Type {
	case gjson.Number:
		text = r.Raw
	case gjson.String:
		text = r.Str
		if !isJSONNumber(text) {
			return 0, d.errs.tsNotNumber
		}
	default:
		return 0, d.errs.tsNotNumber
	}
	ms, ok := unixMillis(text, d.tsScale)
	if !ok {
		return 0, d.errs.tsOutOfRange
	}
	return ms, ""
}

// quoteBounded quotes s, cut to maxQuoted bytes.
func quoteBounded(s string) string {
	if len(s) > maxQuoted {
		return strconv.Quote(s[:maxQuoted]) + "..."
	}
	return strconv.Quote(s)
}

// parseErrorDetail returns ": <what>" for a time.ParseError that says more
// than "cannot parse" (such as "month out of range"), else "".
func parseErrorDetail(err error) string {
	if pe, ok := err.(*time.ParseError); ok && pe.Message != "" {
		return ": " + strings.TrimPrefix(pe.Message, ": ")
	}
	return ""
}

// skipDigits returns the index of the first non-digit of s at or after i.
func skipDigits(s string, i int) int {
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return i
}

// isJSONNumber reports whether s is a number in JSON syntax.
func isJSONNumber(s string) bool {
	i := 0
	if i < len(s) && s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && s[i] >= '1' && s[i] <= '9':
		i = skipDigits(s, i)
	default:
		return false
	}
	if i < len(s) && s[i] == '.' {
		j := skipDigits(s, i+1)
		if j == i+1 {
			return false
		}
		i = j
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		j := skipDigits(s, i)
		if j == i {
			return false
		}
		i = j
	}
	return i == len(s)
}

// unixMillis returns floor(x * 10^scale) for the JSON number text s, or
// false when that is outside int64. Integers are read with strconv.ParseInt;
// fractions, exponents and integers beyond int64 are scaled exactly in decimal, so that, say,
// 1700000000.123 seconds is 1700000000123 ms and not one less, as a float64
// product can give.
func unixMillis(s string, scale int) (int64, bool) {
	if v, ok := shortInt(s); ok {
		return scaleInt(v, scale)
	}
	if strings.ContainsAny(s, ".eE") {
		return scaleDecimal(s, scale)
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		// Beyond int64 in its own unit; it may still fit in ms (say, 2^63 ns).
		return scaleDecimal(s, scale)
	}
	return scaleInt(v, scale)
}

// shortInt reads the JSON number s when it is an integer of at most 18
// digits (below 10^18, within int64), the usual timestamp.
func shortInt(s string) (int64, bool) {
	i, neg := 0, s != "" && s[0] == '-'
	if neg {
		i = 1
	}
	if len(s)-i < 1 || len(s)-i > 18 {
		return 0, false
	}
	var v int64
	for ; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int64(c-'0')
	}
	if neg {
		v = -v
	}
	return v, true
}

// scaleInt returns floor(v * 10^scale), or false when that is outside int64.
func scaleInt(v int64, scale int) (int64, bool) {
	switch scale {
	case 3:
		if v > math.MaxInt64/1000 || v < math.MinInt64/1000 {
			return 0, false
		}
		return v * 1000, true
	case 0:
		return v, true
	case -3:
		return floorDiv(v, 1000), true
	default: // -6
		return floorDiv(v, 1000000), true
	}
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

// scaleDecimal returns floor(x * 10^scale) for the JSON number text s
// (with a fraction or exponent), or false when that is outside int64.
func scaleDecimal(s string, scale int) (int64, bool) {
	neg := s[0] == '-'
	if neg {
		s = s[1:]
	}
	mant, exp := s, 0
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		mant = s[:i]
		e := s[i+1:]
		eneg := false
		if e[0] == '+' || e[0] == '-' {
			eneg = e[0] == '-'
			e = e[1:]
		}
		for k := 0; k < len(e); k++ {
			if exp < 1<<30 { // saturate: far beyond any int64 anyway
				exp = exp*10 + int(e[k]-'0')
			}
		}
		if eneg {
			exp = -exp
		}
	}
	ip, fp := mant, ""
	if i := strings.IndexByte(mant, '.'); i >= 0 {
		ip, fp = mant[:i], mant[i+1:]
	}
	// The digits are ip followed by fp; x = digits * 10^(exp - len(fp)).
	n := len(ip) + len(fp)
	digit := func(i int) byte {
		if i < len(ip) {
			return ip[i]
		}
		return fp[i-len(ip)]
	}
	first := 0
	for first < n && digit(first) == '0' {
		first++
	}
	if first == n {
		return 0, true
	}
	e := exp - len(fp) + scale
	last := n - 1
	for digit(last) == '0' {
		last--
		e++
	}
	// x * 10^scale = D * 10^e, D = digits[first..last] with no leading or
	// trailing zeros.
	l := last - first + 1
	var mag uint64
	if e >= 0 {
		if l+e > 19 { // >= 10^19 > 2^63
			return 0, false
		}
		for i := first; i <= last; i++ {
			mag = mag*10 + uint64(digit(i)-'0')
		}
		for ; e > 0; e-- {
			mag *= 10
		}
	} else {
		// Drop the last -e digits; they are not all zero (D's last digit
		// is not), so the value has a fraction.
		keep := l + e
		if keep > 19 {
			return 0, false
		}
		for i := first; i < first+keep; i++ {
			mag = mag*10 + uint64(digit(i)-'0')
		}
		if neg {
			mag++ // floor toward minus infinity
		}
	}
	if neg {
		if mag > 1<<63 {
			return 0, false
		}
		return int64(-mag), true
	}
	if mag > math.MaxInt64 {
		return 0, false
	}
	return int64(mag), true
}
