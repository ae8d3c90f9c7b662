package expr

import (
	"fmt"
	"math"
	"math/rand"
	"testing"

	"github.com/google/cel-go/common/types"
)

// TestFastAgreesWithCEL: wherever the fast path answers, CEL gives the
// same value; wherever CEL fails, the fast path punts. Expressions ×
// records, both drawn to hit every operator with every kind of operand,
// missing members, overflows and divisions by zero.
func TestFastAgreesWithCEL(t *testing.T) {
	exprs := []string{
		`value.type == "purchase" && value.amount > 0`,
		`value.amount > 0 || value.type == "view"`,
		`!(value.flag) && value.n >= 2`,
		`value.a * value.b + 1.5`,
		`value.a - value.b / 2.0`,
		`value.n + 1`, `value.i * 3`, `2 * 3 + partition - offset / 2`,
		`9223372036854775807 + partition`, `offset * 9223372036854775807`, `10 / (partition - 3)`,
		`-value.a`, `-(partition - 1)`, `-9223372036854775807 - 1 - partition`,
		`value.user.id`, `value.user.name + "/" + value.region`, `value.user`,
		`has(value.user) ? value.user.id : value.n`, `has(value.user.id)`, `has(value.nope)`,
		`value.s < value.t`, `value.s == value.t`, `value.flag == true`, `value.z == null`, `value.flag != value.z`,
		`value.a == value.n`, `value.a < 3`, `value.big > 9007199254740993`,
		`key == null ? "none" : key`, `timestamp - 1000`, `value.a / 0.0`,
		`value.arr`, `value.user.missing`, `value.a.b`, `value.s * 2.0`,
		`value.amount > 0 && value.type == "purchase"`,
		`value.flag || value.amount > 0`,
	}
	rng := rand.New(rand.NewSource(1))
	scalars := []string{`1`, `2.5`, `-3`, `0`, `1e300`, `"x"`, `"purchase"`, `"view"`, `true`, `false`, `null`, `{"id":7,"name":"n"}`, `[1,2]`}
	fields := []string{"type", "amount", "flag", "n", "a", "b", "i", "user", "region", "s", "t", "z", "arr", "big"}
	answered := 0
	for _, src := range exprs {
		p, errs := Compile(src, Any)
		if errs != nil {
			t.Fatalf("%s: %v", src, errs)
		}
		if p.fast == nil {
			t.Fatalf("%s: outside the fast path, so this test shows nothing for it", src)
		}
		for n := 0; n < 300; n++ {
			value := "{"
			for i, f := range fields {
				if rng.Intn(4) == 0 {
					continue
				}
				if i > 0 && value != "{" {
					value += ","
				}
				v := scalars[rng.Intn(len(scalars))]
				if f == "user" && rng.Intn(2) == 0 {
					v = fmt.Sprintf(`{"id":%d,"name":"u%d"}`, rng.Intn(3), rng.Intn(3))
				}
				if f == "big" {
					v = "9007199254740993"
				}
				value += fmt.Sprintf("%q:%s", f, v)
			}
			value += "}"
			a := &Activation{}
			var key []byte
			if rng.Intn(2) == 0 {
				key = []byte("k")
			}
			a.Set([]byte(value), key, nil, int32(rng.Intn(5)), int64(rng.Intn(5)), 1000)
			fv := p.fast(a)
			cv, err := p.Eval(a)
			if fv.k == kPunt {
				continue
			}
			answered++
			if err != nil {
				t.Fatalf("%s over %s: fast %+v, CEL error %v", src, value, fv, err)
			}
			if fv.k == kObject {
				if o, ok := cv.(*object); !ok || o.raw != fv.s {
					t.Fatalf("%s over %s: fast object %s, CEL %v", src, value, fv.s, cv)
				}
				continue
			}
			if d, ok := cv.(types.Double); ok && fv.k == kDouble && math.IsNaN(fv.f) && math.IsNaN(float64(d)) {
				continue
			}
			if fv.refVal().Equal(cv) != types.True || fv.refVal().Type() != cv.Type() {
				t.Fatalf("%s over %s: fast %v (%s), CEL %v (%s)", src, value, fv.refVal(), fv.refVal().Type(), cv, cv.Type())
			}
		}
	}
	if answered < 3000 {
		t.Fatalf("the fast path answered only %d times", answered)
	}
	// Outside the fast path: CEL alone.
	for _, src := range []string{`timestamp(value.when)`, `size(value.s)`, `value.s.startsWith("x")`, `headers["h"]`, `[value.a]`} {
		if p, _ := Compile(src, Any); p == nil || p.fast != nil {
			t.Errorf("%s: expected CEL only", src)
		}
	}
}
