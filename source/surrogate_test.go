package source

import (
	"testing"

	"github.com/tidwall/gjson"
)

func TestLoneSurrogate(t *testing.T) {
	for raw, want := range map[string]string{
		`"plain"`:                    ``,
		`"\u00e9\n"`:                 ``,
		`"\ud83d\ude00"`:             ``,
		`"\uD83D\uDE00x"`:            ``,
		`"\\ud800"`:                  ``,
		`"\\\ud800"`:                 `\ud800`,
		`"\ud800"`:                   `\ud800`,
		`"a\udfff"`:                  `\udfff`,
		`"\ud83dx"`:                  `\ud83d`,
		`"\ud83d\u0041"`:             `\ud83d`,
		`"\ud83d\ud83d\ude00"`:       `\ud83d`,
		`"\ude00\ud83d"`:             `\ude00`,
		`"ok \ud83d\ude00 \uDBFF"`:   `\uDBFF`,
		`"\u12"`:                     ``, // not valid JSON: gjson's, not ours
		`"\ud83d\ude00\ud83d\ude00"`: ``,
	} {
		r := gjson.Parse(raw)
		if got := LoneSurrogate(&r); got != want {
			t.Errorf("LoneSurrogate(%s) = %q, want %q", raw, got, want)
		}
	}
	if r := gjson.Parse(`123`); LoneSurrogate(&r) != "" {
		t.Error("a number has no lone surrogate")
	}
}
