package codec

import (
	"math/rand"
	"strconv"
	"testing"
	"unicode/utf8"

	"github.com/tidwall/gjson"
)

// unescapeLossless reads a JSON string literal as AppendJSONString writes
// it (docs/SEMANTICS.md, Output): \udc80 … \udcff are the bytes 0x80 … 0xff.
func unescapeLossless(t *testing.T, lit string) string {
	t.Helper()
	if !gjson.Valid(lit) {
		t.Fatalf("%s is not valid JSON", lit)
	}
	var b []byte
	for i := 1; i < len(lit)-1; i++ {
		c := lit[i]
		if c != '\\' {
			b = append(b, c)
			continue
		}
		i++
		switch lit[i] {
		case 'n':
			b = append(b, '\n')
		case 'r':
			b = append(b, '\r')
		case 't':
			b = append(b, '\t')
		case 'u':
			v, err := strconv.ParseUint(lit[i+1:i+5], 16, 32)
			if err != nil {
				t.Fatalf("%s: bad escape", lit)
			}
			i += 4
			if v >= 0xdc80 && v <= 0xdcff {
				b = append(b, byte(v-0xdc00))
			} else {
				b = utf8.AppendRune(b, rune(v))
			}
		default:
			b = append(b, lit[i])
		}
	}
	return string(b)
}

// Keys are byte-exact in output: every byte string is rendered as valid
// JSON, in ASCII or valid UTF-8, and reads back to the same bytes, so no
// two keys print alike.
func TestAppendJSONStringLossless(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	alphabet := []string{"a", "é", "\u2028", "\ufffd", "\xff", "\x80", "\xed\xa0\x80", "\xc3", "\"", "\\", "\n", "\x00", "😀", "\xf0\x9f"}
	seen := map[string]string{}
	for n := 0; n < 20000; n++ {
		var s string
		for k := rng.Intn(6); k > 0; k-- {
			s += alphabet[rng.Intn(len(alphabet))]
		}
		lit := string(AppendJSONString(nil, s))
		if !utf8.ValidString(lit) {
			t.Fatalf("%q renders as invalid UTF-8 %q", s, lit)
		}
		if back := unescapeLossless(t, lit); back != s {
			t.Fatalf("%q renders as %s, which reads back as %q", s, lit, back)
		}
		if other, ok := seen[lit]; ok && other != s {
			t.Fatalf("%q and %q both render as %s", s, other, lit)
		}
		seen[lit] = s
		if utf8.ValidString(s) && gjson.Parse(lit).Str != s {
			t.Fatalf("valid UTF-8 %q renders as %s, which JSON reads as %q", s, lit, gjson.Parse(lit).Str)
		}
	}
}

func TestAppendJSONString(t *testing.T) {
	for in, want := range map[string]string{
		`plain`:        `"plain"`,
		"q\"b\\s":      `"q\"b\\s"`,
		"nl\n\t\r\x01": `"nl\n\t\r\u0001"`,
		"bad\xffutf8":  `"bad\udcffutf8"`,
		"\xed\xa0\x80": `"\udced\udca0\udc80"`, // UTF-8 of a surrogate is not valid UTF-8
		"\ufffd":       "\"\ufffd\"",
		"é\u2028":      `"é\u2028"`,
	} {
		if got := string(AppendJSONString(nil, in)); got != want {
			t.Errorf("AppendJSONString(%q) = %s, want %s", in, got, want)
		}
	}
}

// TestAppendJSONText: a record's JSON value with bytes that are not UTF-8
// (in a field name or a string) comes out valid UTF-8 JSON, each such byte
// escaped as in keys, everything else as it was.
func TestAppendJSONText(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	// Each piece: its bytes and how a JSON text holds them inside a
	// string literal, invalid bytes raw (as a producer may write them).
	pieces := [][2]string{{"a", "a"}, {"é", "é"}, {"\xff", "\xff"}, {"\x80", "\x80"}, {"\xed\xa0\x80", "\xed\xa0\x80"},
		{"\xc3", "\xc3"}, {"\"", `\"`}, {"\\", `\\`}, {"\n", `\n`}, {"😀", "😀"}, {"\xf0\x9f", "\xf0\x9f"}}
	for n := 0; n < 20000; n++ {
		var s [2]string    // the field name's bytes and the string's
		var text [2]string // as the JSON text holds them
		for j := range s {
			for k := rng.Intn(5); k > 0; k-- {
				p := pieces[rng.Intn(len(pieces))]
				s[j] += p[0]
				text[j] += p[1]
			}
		}
		v := `{"n": 1.5e3, "` + text[0] + `": ["` + text[1] + `", true]}`
		out := string(AppendJSONText([]byte("x"), v))[1:]
		if !utf8.ValidString(out) || !gjson.Valid(out) {
			t.Fatalf("%q renders as %q, not valid UTF-8 JSON", v, out)
		}
		if utf8.ValidString(v) && out != v {
			t.Fatalf("valid UTF-8 %q renders as %q", v, out)
		}
		var name, str string // the last field's name and its array's first element
		gjson.Parse(out).ForEach(func(k, val gjson.Result) bool {
			name, str = k.Raw, val.Get("0").Raw
			return true
		})
		if back := unescapeLossless(t, name); back != s[0] {
			t.Fatalf("%q: the field name renders as %s, which reads back as %q", v, name, back)
		}
		if back := unescapeLossless(t, str); back != s[1] {
			t.Fatalf("%q: the string renders as %s, which reads back as %q", v, str, back)
		}
	}
}
