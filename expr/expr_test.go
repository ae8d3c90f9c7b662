package expr

import (
	"strings"
	"testing"
)

func mustCompile(t *testing.T, src string, want Want) *Program {
	t.Helper()
	p, errs := Compile(src, want)
	if errs != nil {
		t.Fatalf("Compile(%q): %v", src, errs)
	}
	return p
}

func act(value string) *Activation {
	a := &Activation{}
	a.Set([]byte(value), []byte("k1"), []Header{{Key: "h", Value: "v"}}, 3, 42, 1700000000000)
	return a
}

// Filters compare ints and doubles as a user expects; a missing member
// and a wrong type are errors, not false.
func TestFilter(t *testing.T) {
	f := mustCompile(t, `value.type == "purchase" && value.amount > 0`, Bool)
	for _, c := range []struct {
		value string
		want  bool
		err   string
	}{
		{`{"type":"purchase","amount":2.5}`, true, ""},
		{`{"type":"purchase","amount":3}`, true, ""},
		{`{"type":"purchase","amount":0}`, false, ""},
		{`{"type":"view","amount":1}`, false, ""},
		{`{"type":"purchase"}`, false, "no such key: amount"},
		{`{"type":"purchase","amount":"x"}`, false, "no such overload"},
	} {
		got, err := f.Filter(act(c.value))
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: err %v, want %q", c.value, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%s: %v, %v; want %v", c.value, got, err, c.want)
		}
	}
}

func TestVariablesAndResults(t *testing.T) {
	a := act(`{"price":2.5,"qty":3,"user":{"id":42,"name":"é \"q\", x"},"tags":["a",1],"ts":1700000000123,"when":"2026-03-29T01:30:00Z"}`)
	num := func(src string) float64 {
		v, err := mustCompile(t, src, Number).Number(a)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		return v
	}
	if v := num(`value.price * value.qty`); v != 7.5 {
		t.Errorf("price*qty = %v", v)
	}
	if v := num(`partition + offset`); v != 45 {
		t.Errorf("partition+offset = %v", v)
	}
	text := func(src string) string {
		v, err := mustCompile(t, src, Any).Text(a)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		return v
	}
	for src, want := range map[string]string{
		`value.user.id`:                  "42",
		`value.user.name`:                `é "q", x`,
		`value.user`:                     `{"id":42,"name":"é \"q\", x"}`,
		`value.tags`:                     `["a",1]`,
		`key + ":" + headers["h"]`:       "k1:v",
		`[value.user.name, value.price]`: `["é \"q\", x",2.5]`,
		`has(value.missing)`:             "false",
	} {
		if got := text(src); got != want {
			t.Errorf("%s = %s, want %s", src, got, want)
		}
	}
	ms := func(src string) int64 {
		v, err := mustCompile(t, src, Timestamp).Millis(a)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		return v
	}
	if v := ms(`value.ts`); v != 1700000000123 {
		t.Errorf("ts = %d", v)
	}
	if v := ms(`timestamp(value.when)`); v != 1774747800000 {
		t.Errorf("when = %d", v)
	}
	if v := ms(`timestamp`); v != 1700000000000 {
		t.Errorf("record timestamp = %d", v)
	}
	nullKey := &Activation{}
	nullKey.Set([]byte(`{}`), nil, nil, 0, 0, 0)
	if v, err := mustCompile(t, `key == null`, Bool).Filter(nullKey); err != nil || !v {
		t.Errorf("a null record key: %v %v", v, err)
	}
	if _, err := mustCompile(t, `int(value.qty) / (offset - 42)`, Number).Number(a); err == nil || !strings.Contains(err.Error(), "division by zero") {
		t.Errorf("integer division by zero: %v", err)
	}
	if _, err := mustCompile(t, `value.price / (value.qty - 3.0)`, Number).Number(a); err == nil || !strings.Contains(err.Error(), "not a finite number") {
		t.Errorf("a double divided by zero: %v", err)
	}
}

// Compile errors carry the position CEL gives, 1-based; a filter that
// can never be a bool is refused.
func TestCompileErrors(t *testing.T) {
	for _, c := range []struct {
		src       string
		want      Want
		line, col int
		msg       string
	}{
		{`value.a +`, Any, 1, 10, "Syntax error: mismatched input '<EOF>'"},
		{`1 + 'a'`, Any, 1, 3, "found no matching overload for '_+_' applied to '(int, string)'"},
		{`value.type`, Bool, 1, 1, ""},
		{`"x"`, Bool, 1, 1, "a filter must be a bool, this expression is a string"},
		{`"x"`, Number, 1, 1, "this aggregate needs a number, the expression is a string"},
		{`true`, Timestamp, 1, 1, "a timestamp expression must be a timestamp or an int of Unix ms, this one is a bool"},
	} {
		_, errs := Compile(c.src, c.want)
		if c.msg == "" {
			if errs != nil {
				t.Errorf("%s: %v", c.src, errs)
			}
			continue
		}
		if len(errs) == 0 || errs[0].Line != c.line || errs[0].Col != c.col || !strings.HasPrefix(errs[0].Msg, c.msg) {
			t.Errorf("%s: %v, want %d:%d: %s", c.src, errs, c.line, c.col, c.msg)
		}
	}
}

// An evaluation past MaxCost is an error, not a pipeline stuck on one
// record.
func TestCostLimit(t *testing.T) {
	p := mustCompile(t, `value.l.all(x, value.l.all(y, value.l.all(z, x + y + z >= 0.0)))`, Bool)
	var b strings.Builder
	b.WriteString(`{"l":[0`)
	for i := 1; i < 300; i++ {
		b.WriteString(",1")
	}
	b.WriteString(`]}`)
	if _, err := p.Filter(act(b.String())); err == nil || !strings.Contains(err.Error(), "cost") {
		t.Fatalf("27M steps: err %v, want the cost limit", err)
	}
	if ok, err := p.Filter(act(`{"l":[1,2,3]}`)); err != nil || !ok {
		t.Fatalf("small list: %v %v", ok, err)
	}
}
