package source

import (
	"errors"
	"time"
)

// parseRFC3339 reads an RFC 3339 date-time strictly, which Go's
// time.Parse(time.RFC3339Nano) does not quite do: RFC 3339 allows the "T"
// and "Z" in lower case (section 5.6), which Go refuses, and it allows
// neither a comma before the fraction nor an offset hour above 23, which
// Go accepts.
func parseRFC3339(s string) (time.Time, error) {
	if len(s) >= 20 && (s[10] == 't' || s[len(s)-1] == 'z') {
		b := []byte(s)
		if b[10] == 't' {
			b[10] = 'T'
		}
		if b[len(b)-1] == 'z' {
			b[len(b)-1] = 'Z'
		}
		s = string(b)
	}
	if len(s) > 19 && s[19] == ',' {
		return time.Time{}, errors.New("a comma before the fraction of a second (RFC 3339 takes a dot)")
	}
	if n := len(s); n >= 25 && (s[n-6] == '+' || s[n-6] == '-') && s[n-3] == ':' {
		if hh, mm := s[n-5:n-3], s[n-2:]; hh > "23" || mm > "59" {
			return time.Time{}, errors.New("offset " + s[n-6:] + " out of range")
		}
	}
	return time.Parse(time.RFC3339Nano, s)
}
