package windowing

import (
	"fmt"
	"testing"
	"time"
)

// The expected bounds in these tests are computed without the code under
// test: written out by hand from the zones' 2026 DST rules, or found by
// scanning the year minute by minute with the time package's conversion
// (every 2026 offset change of these zones is at a whole minute).

func calAssigner(t *testing.T, zone string, unit CalendarUnit, size, hop int64, weekStart time.Weekday) Assigner {
	t.Helper()
	loc, err := time.LoadLocation(zone)
	if err != nil {
		t.Fatal(err)
	}
	return NewAssigner(WindowSpec{Kind: Calendar, Calendar: &CalendarSpec{Unit: unit, Zone: loc, Size: size, Hop: hop, WeekStart: weekStart}})
}

func utc(s string) int64 {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t.UnixMilli()
}

func TestCalendarBoundsByHand(t *testing.T) {
	for _, tc := range []struct {
		zone       string
		unit       CalendarUnit
		weekStart  time.Weekday
		at         string // an instant in the unit
		start, end string // the unit, UTC
	}{
		// Europe/Rome: CET +01, CEST +02 from 2026-03-29 01:00Z to 2026-10-25 01:00Z.
		{"Europe/Rome", Day, 0, "2026-03-29T12:00:00Z", "2026-03-28T23:00:00Z", "2026-03-29T22:00:00Z"},            // 23 h
		{"Europe/Rome", Day, 0, "2026-03-29T22:00:00Z", "2026-03-29T22:00:00Z", "2026-03-30T22:00:00Z"},            // local midnight: the later day
		{"Europe/Rome", Day, 0, "2026-03-29T21:59:59.999Z", "2026-03-28T23:00:00Z", "2026-03-29T22:00:00Z"},        // its last ms
		{"Europe/Rome", Day, 0, "2026-10-25T12:00:00Z", "2026-10-24T22:00:00Z", "2026-10-25T23:00:00Z"},            // 25 h
		{"Europe/Rome", Day, 0, "2026-06-15T12:00:00Z", "2026-06-14T22:00:00Z", "2026-06-15T22:00:00Z"},            // 24 h
		{"Europe/Rome", Week, time.Monday, "2026-03-29T12:00:00Z", "2026-03-22T23:00:00Z", "2026-03-29T22:00:00Z"}, // Mon 23 Mar to Mon 30 Mar: 167 h
		{"Europe/Rome", Week, time.Sunday, "2026-03-29T12:00:00Z", "2026-03-28T23:00:00Z", "2026-04-04T22:00:00Z"}, // Sun 29 Mar to Sun 5 Apr
		{"Europe/Rome", Month, 0, "2026-02-10T00:00:00Z", "2026-01-31T23:00:00Z", "2026-02-28T23:00:00Z"},          // 28 days
		{"Europe/Rome", Month, 0, "2026-03-31T21:59:59Z", "2026-02-28T23:00:00Z", "2026-03-31T22:00:00Z"},          // 31 days less an hour
		{"Europe/Rome", Month, 0, "2026-04-30T12:00:00Z", "2026-03-31T22:00:00Z", "2026-04-30T22:00:00Z"},          // 30 days
		{"Europe/Rome", Month, 0, "2026-10-31T23:00:00Z", "2026-10-31T23:00:00Z", "2026-11-30T23:00:00Z"},          // 1 Nov 00:00 CET
		{"Europe/Rome", Year, 0, "2026-07-01T00:00:00Z", "2025-12-31T23:00:00Z", "2026-12-31T23:00:00Z"},           // 365 days
		{"America/New_York", Day, 0, "2026-03-08T12:00:00Z", "2026-03-08T05:00:00Z", "2026-03-09T04:00:00Z"},       // 23 h
		{"America/New_York", Day, 0, "2026-11-01T12:00:00Z", "2026-11-01T04:00:00Z", "2026-11-02T05:00:00Z"},       // 25 h
		{"America/New_York", Month, 0, "2026-11-15T00:00:00Z", "2026-11-01T04:00:00Z", "2026-12-01T05:00:00Z"},     // 30 days and an hour
		{"America/New_York", Hour, 0, "2026-11-01T05:30:00Z", "2026-11-01T05:00:00Z", "2026-11-01T06:00:00Z"},      // 01:00 EDT
		{"America/New_York", Hour, 0, "2026-11-01T06:30:00Z", "2026-11-01T06:00:00Z", "2026-11-01T07:00:00Z"},      // 01:00 EST: the repeated hour
		{"America/New_York", Hour, 0, "2026-03-08T06:30:00Z", "2026-03-08T06:00:00Z", "2026-03-08T07:00:00Z"},      // 01:00 EST, then 03:00 EDT
		{"America/New_York", Hour, 0, "2026-03-08T07:00:00Z", "2026-03-08T07:00:00Z", "2026-03-08T08:00:00Z"},      // 03:00 EDT
		// Australia/Lord_Howe: +10:30, +11 (DST) until 2026-04-04 15:00Z, from 2026-10-03 15:30Z.
		{"Australia/Lord_Howe", Day, 0, "2026-04-05T00:00:00Z", "2026-04-04T13:00:00Z", "2026-04-05T13:30:00Z"},  // 24.5 h
		{"Australia/Lord_Howe", Day, 0, "2026-10-04T00:00:00Z", "2026-10-03T13:30:00Z", "2026-10-04T13:00:00Z"},  // 23.5 h
		{"Australia/Lord_Howe", Hour, 0, "2026-04-04T14:30:00Z", "2026-04-04T14:00:00Z", "2026-04-04T15:00:00Z"}, // 01:00-02:00 +11
		{"Australia/Lord_Howe", Hour, 0, "2026-04-04T15:10:00Z", "2026-04-04T15:00:00Z", "2026-04-04T15:30:00Z"}, // 01:30-02:00 +10:30 again
		{"Australia/Lord_Howe", Hour, 0, "2026-04-04T15:30:00Z", "2026-04-04T15:30:00Z", "2026-04-04T16:30:00Z"}, // 02:00 +10:30
		{"Australia/Lord_Howe", Hour, 0, "2026-10-03T15:00:00Z", "2026-10-03T14:30:00Z", "2026-10-03T15:30:00Z"}, // 01:00 +10:30
		{"Australia/Lord_Howe", Hour, 0, "2026-10-03T15:45:00Z", "2026-10-03T15:30:00Z", "2026-10-03T16:00:00Z"}, // 02:30-03:00 +11
		{"America/Santiago", Day, 0, "2026-04-04T12:00:00Z", "2026-04-04T03:00:00Z", "2026-04-05T04:00:00Z"},     // 25 h (23:00 repeated)
		{"America/Santiago", Day, 0, "2026-09-06T12:00:00Z", "2026-09-06T04:00:00Z", "2026-09-07T03:00:00Z"},     // midnight skipped: 01:00 -03, 23 h
		{"America/Santiago", Day, 0, "2026-09-06T03:59:59.999Z", "2026-09-05T04:00:00Z", "2026-09-06T04:00:00Z"}, // the day before, 24 h
		{"Asia/Kathmandu", Day, 0, "2026-06-15T12:00:00Z", "2026-06-14T18:15:00Z", "2026-06-15T18:15:00Z"},       // +05:45
		{"Asia/Kathmandu", Hour, 0, "2026-06-15T12:00:00Z", "2026-06-15T11:15:00Z", "2026-06-15T12:15:00Z"},      // 17:00-18:00 local
		{"UTC", Week, time.Monday, "1970-01-01T00:00:00Z", "1969-12-29T00:00:00Z", "1970-01-05T00:00:00Z"},       // before the epoch's first Monday
		{"UTC", Day, 0, "1969-12-31T23:59:59.999Z", "1969-12-31T00:00:00Z", "1970-01-01T00:00:00Z"},              // negative times
		{"UTC", Hour, 0, "0001-01-02T00:00:00Z", "0001-01-02T00:00:00Z", "0001-01-02T01:00:00Z"},                 // the first instant calendars take
		{"Europe/Rome", Month, 0, "9999-12-29T23:59:59.999Z", "9999-11-30T23:00:00Z", "9999-12-31T23:00:00Z"},    // the last
		{"Europe/Rome", Hour, 0, "2099-03-29T01:30:00Z", "2099-03-29T01:00:00Z", "2099-03-29T02:00:00Z"},         // 03:00 CEST, by the zone's rule
		{"America/New_York", Hour, 0, "1970-01-01T05:00:00Z", "1970-01-01T05:00:00Z", "1970-01-01T06:00:00Z"},    // unit 0
		{"Asia/Kathmandu", Hour, 0, "1985-12-31T18:45:00Z", "1985-12-31T18:30:00Z", "1985-12-31T19:15:00Z"},      // +05:30 became +05:45 at 18:30Z (local 00:00 to 00:15): 45 min
	} {
		t.Run(fmt.Sprintf("%s/%s/%s", tc.zone, tc.unit, tc.at), func(t *testing.T) {
			a := calAssigner(t, tc.zone, tc.unit, 1, 1, tc.weekStart)
			got := a.Windows(nil, utc(tc.at))
			want := []Span{{utc(tc.start), utc(tc.end)}}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("Windows(%s) = %v, want [%s, %s) = %v", tc.at, got, tc.start, tc.end, want)
			}
		})
	}
}

func TestCalendarOutOfRange(t *testing.T) {
	a := calAssigner(t, "Europe/Rome", Day, 1, 1, 0)
	for _, at := range []int64{utc("0001-01-01T12:00:00Z"), utc("9999-12-31T00:00:00Z"), -1 << 62, 1<<63 - 1} {
		if got := a.Windows(nil, at); len(got) != 0 {
			t.Errorf("Windows(%d) = %v, want none", at, got)
		}
	}
}

// scanUnits returns the boundaries of the units of a zone from..to, found
// minute by minute: a unit starts at every minute whose key differs from
// the minute before.
func scanUnits(loc *time.Location, from, to int64, key func(time.Time) string) []int64 {
	var bounds []int64
	prev := ""
	for t := from; t <= to; t += 60_000 {
		k := key(time.UnixMilli(t).In(loc))
		if k != prev && prev != "" {
			bounds = append(bounds, t)
		}
		prev = k
	}
	return bounds
}

var unitKeys = map[CalendarUnit]func(time.Time) string{
	Hour: func(t time.Time) string {
		_, off := t.Zone()
		return fmt.Sprint(t.Format("2006-01-02T15"), off)
	},
	Day: func(t time.Time) string { return t.Format("2006-01-02") },
	Week: func(t time.Time) string {
		// The Monday on or before the local date.
		y, m, d := t.Date()
		back := (int(t.Weekday()) + 6) % 7
		return time.Date(y, m, d-back, 0, 0, 0, 0, time.UTC).Format("2006-01-02")
	},
	Month: func(t time.Time) string { return t.Format("2006-01") },
}

// TestCalendarUnitsScanned checks every unit of 2026 in five zones against
// a minute-by-minute scan, at its first and last ms and in its middle.
func TestCalendarUnitsScanned(t *testing.T) {
	if testing.Short() {
		t.Skip("scans a year minute by minute")
	}
	from, to := utc("2025-12-20T00:00:00Z"), utc("2027-01-10T00:00:00Z")
	for _, zone := range []string{"Europe/Rome", "America/New_York", "Australia/Lord_Howe", "America/Santiago", "Asia/Kathmandu"} {
		for _, unit := range []CalendarUnit{Hour, Day, Week, Month} {
			t.Run(zone+"/"+unit.String(), func(t *testing.T) {
				t.Parallel()
				a := calAssigner(t, zone, unit, 1, 1, time.Monday)
				loc, _ := time.LoadLocation(zone)
				bounds := scanUnits(loc, from, to, unitKeys[unit])
				lengths := map[int64]int{}
				for i := 0; i+1 < len(bounds); i++ {
					lo, hi := bounds[i], bounds[i+1]
					lengths[(hi-lo)/60_000]++
					for _, at := range []int64{lo, lo + (hi-lo)/2, hi - 1} {
						got := a.Windows(nil, at)
						if len(got) != 1 || got[0] != (Span{lo, hi}) {
							t.Fatalf("Windows(%s) = %v, want [%s, %s)", time.UnixMilli(at).UTC(), got,
								time.UnixMilli(lo).UTC(), time.UnixMilli(hi).UTC())
						}
					}
				}
				t.Logf("unit lengths in minutes: %v", lengths)
			})
		}
	}
}

// TestCalendarHopping checks size 7, hop 1 and size 7, hop 7 days against
// scanned days and day numbers counted from 1970-01-01.
func TestCalendarHopping(t *testing.T) {
	for _, zone := range []string{"Europe/Rome", "America/Santiago", "Australia/Lord_Howe"} {
		loc, _ := time.LoadLocation(zone)
		days := scanUnits(loc, utc("2026-02-20T00:00:00Z"), utc("2026-11-10T00:00:00Z"), unitKeys[Day])
		dayNumber := func(t int64) int64 {
			y, m, d := time.UnixMilli(t).In(loc).Date()
			return time.Date(y, m, d, 0, 0, 0, 0, time.UTC).Unix() / 86400
		}
		sliding := calAssigner(t, zone, Day, 7, 1, 0)
		weekly := calAssigner(t, zone, Day, 7, 7, 0)
		for i := 7; i+8 < len(days); i++ {
			at := days[i] + 3_600_000
			got := sliding.Windows(nil, at)
			var want []Span
			for j := i - 6; j <= i; j++ {
				want = append(want, Span{days[j], days[j+7]})
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("%s: 7/1 Windows(%s) = %v, want %v", zone, time.UnixMilli(at).UTC(), got, want)
			}
			w := weekly.Windows(nil, at)
			if len(w) != 1 || dayNumber(w[0].Start)%7 != 0 || w[0].Start > at || at >= w[0].End {
				t.Fatalf("%s: 7/7 Windows(%s) = %v: not one window from a day number divisible by 7", zone, time.UnixMilli(at).UTC(), w)
			}
			k := dayNumber(w[0].Start)
			if dayNumber(w[0].End-1) != k+6 || dayNumber(w[0].End) != k+7 {
				t.Fatalf("%s: 7/7 window %v is not 7 local days", zone, w)
			}
		}
	}
}
