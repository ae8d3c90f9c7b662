package sink

import "math"

// Topic settings that decide whether a record written with a given
// timestamp stays (docs/OPERATIONS.md, Topic retention).
const (
	SettingRetention = "retention.ms"
	SettingBeforeMax = "message.timestamp.before.max.ms"
	SettingTimeType  = "message.timestamp.type"
)

// TimeLimits are what a topic does with a record's timestamp: with
// CreateTime timestamps the broker refuses a record older than BeforeMax
// and deletes a segment once its newest record is older than Retention,
// both counted back from the broker's clock. With LogAppendTime the broker
// stamps records itself and neither applies.
type TimeLimits struct {
	Retention     int64 // retention.ms; < 0: no time-based deletion
	BeforeMax     int64 // message.timestamp.before.max.ms; < 0 or MaxInt64: none
	LogAppendTime bool  // message.timestamp.type is LogAppendTime
}

// Bounded says whether some record timestamp falls foul of l.
func (l *TimeLimits) Bounded() bool {
	return !l.LogAppendTime && (l.Retention >= 0 || (l.BeforeMax >= 0 && l.BeforeMax < math.MaxInt64))
}

// Past returns the setting that a record stamped ts (Unix ms) falls foul
// of when written at now (Unix ms), and "" when it stays: BeforeMax (the
// broker refuses it) before Retention (the broker may delete it at its
// next retention check, as soon as the rest of its segment is as old).
func (l *TimeLimits) Past(ts, now int64) string {
	if l.LogAppendTime {
		return ""
	}
	if l.BeforeMax >= 0 && l.BeforeMax < math.MaxInt64 && ts < now-l.BeforeMax {
		return SettingBeforeMax
	}
	if l.Retention >= 0 && ts < now-l.Retention {
		return SettingRetention
	}
	return ""
}
