package sink

import (
	"math"
	"testing"
)

func TestTimeLimitsPast(t *testing.T) {
	const hour = 3600_000
	now := int64(1_800_000_000_000)
	for _, c := range []struct {
		name    string
		l       TimeLimits
		ts      int64
		want    string
		bounded bool
	}{
		{"no limits", TimeLimits{Retention: -1, BeforeMax: math.MaxInt64}, 0, "", false},
		{"within retention", TimeLimits{Retention: hour, BeforeMax: math.MaxInt64}, now - hour + 1, "", true},
		{"at the edge", TimeLimits{Retention: hour, BeforeMax: math.MaxInt64}, now - hour, "", true},
		{"past retention", TimeLimits{Retention: hour, BeforeMax: math.MaxInt64}, now - hour - 1, SettingRetention, true},
		{"refused first", TimeLimits{Retention: hour, BeforeMax: 2 * hour}, now - 3*hour, SettingBeforeMax, true},
		{"refused without retention", TimeLimits{Retention: -1, BeforeMax: hour}, now - 2*hour, SettingBeforeMax, true},
		{"log append time", TimeLimits{Retention: hour, BeforeMax: hour, LogAppendTime: true}, 0, "", false},
		{"future", TimeLimits{Retention: hour, BeforeMax: hour}, now + hour, "", true},
	} {
		if got := c.l.Past(c.ts, now); got != c.want {
			t.Errorf("%s: Past = %q, want %q", c.name, got, c.want)
		}
		if got := c.l.Bounded(); got != c.bounded {
			t.Errorf("%s: Bounded = %v, want %v", c.name, got, c.bounded)
		}
	}
}
