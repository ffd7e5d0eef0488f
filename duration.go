package djinn

import (
	"math"
	"time"
)

// Lease duration constants, mirroring the leasing specification's
// Lease.FOREVER and Lease.ANY (LE.2.2).
const (
	// Forever asks for a lease that never expires.
	Forever time.Duration = math.MaxInt64
	// Any asks the grantor for the duration it finds most convenient.
	Any time.Duration = -1
)

// FormatDuration prints a lease duration, naming Forever and Any.
func FormatDuration(d time.Duration) string {
	switch d {
	case Forever:
		return "forever"
	case Any:
		return "any"
	}
	return d.String()
}

// ParseDuration parses a lease duration: a Go duration ("30s", "1h"), or
// "forever" or "any".
func ParseDuration(s string) (time.Duration, error) {
	switch s {
	case "forever", "Forever", "FOREVER":
		return Forever, nil
	case "any", "Any", "ANY":
		return Any, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, Errorf(InvalidArgument, "lease duration %q: not a duration, forever or any", s)
	}
	return d, nil
}

// CheckLeaseDuration enforces the argument rule shared by every call that asks
// for a lease: the duration is positive, Forever or Any (for example EM.3,
// LR.2). what names the argument in the error.
func CheckLeaseDuration(what string, d time.Duration) error {
	if d > 0 || d == Any {
		return nil
	}
	return Errorf(InvalidArgument, "%s %s: must be positive, Forever or Any", what, FormatDuration(d))
}

// AddDuration returns t+d, saturating at the largest representable time
// instead of overflowing (a Forever lease expires at the end of time).
func AddDuration(t time.Time, d time.Duration) time.Time {
	if d == Forever {
		return EndOfTime
	}
	u := t.Add(d)
	if d > 0 && u.Before(t) {
		return EndOfTime
	}
	if u.After(EndOfTime) {
		return EndOfTime
	}
	return u
}

// EndOfTime is the expiration of a Forever lease: the largest instant whose
// UnixNano is representable.
var EndOfTime = time.Unix(0, math.MaxInt64).UTC()

// Remaining returns how long from now until t, Forever for EndOfTime and
// never negative.
func Remaining(t, now time.Time) time.Duration {
	if !t.Before(EndOfTime) {
		return Forever
	}
	if d := t.Sub(now); d > 0 {
		return d
	}
	return 0
}
