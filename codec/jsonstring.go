package codec

import "unicode/utf8"

// This file holds the one writer of JSON string literals: pane keys and
// aggregate names, dead-letter and late-record fields, and the strings an
// Avro or Protobuf value decodes to, so that a key prints alike wherever
// it appears; and AppendJSONText, which copies a record's JSON value with
// the same escape of bytes that are not UTF-8.

const hexDigits = "0123456789abcdef"

// plainJSONByte marks the bytes a JSON string literal holds as they are:
// printable ASCII but for the quote and the backslash.
var plainJSONByte = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// plainPrefix returns the length of the longest prefix of s that needs
// no escape in a JSON string literal: len(s) for most keys, which
// AppendJSONString then copies whole.
func plainPrefix(s string) int {
	for i := 0; i < len(s); i++ {
		if !plainJSONByte[s[i]] {
			return i
		}
	}
	return len(s)
}

// AppendJSONString appends s as a JSON string literal. It is lossless
// (docs/SEMANTICS.md, Output): a byte that is not part of valid UTF-8 is
// written as the lone surrogate escape \udc80 … \udcff of its value (0x80 …
// 0xff, Python's "surrogateescape"), which no valid UTF-8 text is written
// as, so strings that differ in an invalid byte print differently. Valid
// UTF-8 takes the plain paths below, unchanged.
func AppendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	i := plainPrefix(s)
	if i == len(s) {
		b = append(b, s...)
		return append(b, '"')
	}
	start := 0
	for i < len(s) {
		c := s[i]
		if plainJSONByte[c] {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = appendInvalidByte(append(b, s[start:i]...), c)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// appendInvalidByte appends the escape of c, a byte that is not part of
// valid UTF-8: the lone surrogate \udc80 … \udcff of its value.
func appendInvalidByte(b []byte, c byte) []byte {
	return append(b, '\\', 'u', 'd', 'c', hexDigits[c>>4], hexDigits[c&0xf])
}

// AppendJSONText appends the JSON text v (valid JSON, such as a record's
// value) as it is, but for each byte that is not part of valid UTF-8,
// which it escapes as AppendJSONString does (appendInvalidByte). In valid
// JSON such a byte can only be inside a string literal, where the escape
// belongs, so the result is valid JSON and valid UTF-8 (docs/SEMANTICS.md,
// Byte-exact keys).
func AppendJSONText(b []byte, v string) []byte {
	if utf8.ValidString(v) {
		return append(b, v...)
	}
	start := 0
	for i := 0; i < len(v); {
		if v[i] < utf8.RuneSelf {
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(v[i:])
		if r == utf8.RuneError && size == 1 {
			b = appendInvalidByte(append(b, v[start:i]...), v[i])
			start = i + 1
		}
		i += size
	}
	return append(b, v[start:]...)
}
