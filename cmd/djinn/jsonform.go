package main

import (
	"errors"
	"strconv"
	"time"

	"github.com/djinn-go/djinn"
)

// The JSON convention of every command, written once here (-o json, and
// -o yaml and -o template, which work on the same form):
//
//   - Integers that name or order something — transaction ids, event ids,
//     sequence numbers, mailbox indexes, fencing tokens, crash counts,
//     request ids, log indexes — are strings of decimal digits: they are
//     64-bit, and jq and JavaScript would round them as numbers. Counts and
//     sizes (leases in a set, items matching) are numbers.
//   - Durations are objects: {"seconds": 600, "human": "10m0s"}; seconds is
//     null for forever and any, which human spells out.
//   - Instants are RFC 3339 strings in UTC, with nanoseconds; an expiration
//     that never comes (a Forever lease) is null.
//   - IDs of 128 bits are 32 lowercase hex digits; references are
//     djinn://host:port/SERVICE/OBJECT; a lease is an object whose name is
//     its short name (its cookie in hex) and whose token is the printable
//     lease (landlord, cookie, expiration).
//   - Errors go to stderr as {"error": {"message", "kind", "exit_status"}};
//     notices as {"notice": {"message", …}}.
//   - Empty lists are [], never null; optional objects are absent or null
//     as each command's golden file (testdata/json) shows.

// durationJSON is a duration in JSON.
type durationJSON struct {
	Seconds *float64 `json:"seconds"`
	Human   string   `json:"human"`
}

// jsonDuration is d in JSON; Forever and Any have no seconds.
func jsonDuration(d time.Duration) durationJSON {
	if d == djinn.Forever || d == djinn.Any {
		return durationJSON{Human: djinn.FormatDuration(d)}
	}
	s := d.Seconds()
	return durationJSON{Seconds: &s, Human: d.String()}
}

// jsonInstant is t in JSON: RFC 3339 in UTC, or null for the end of time.
func jsonInstant(t time.Time) *string {
	if !t.Before(djinn.EndOfTime) {
		return nil
	}
	s := t.UTC().Format(time.RFC3339Nano)
	return &s
}

// textInstant is t as text: RFC 3339, or never.
func textInstant(t time.Time) string {
	if !t.Before(djinn.EndOfTime) {
		return "never"
	}
	return t.Format(time.RFC3339Nano)
}

// jsonUint is a 64-bit unsigned integer in JSON.
func jsonUint(n uint64) string { return strconv.FormatUint(n, 10) }

// jsonInt is a 64-bit integer in JSON.
func jsonInt(n int64) string { return strconv.FormatInt(n, 10) }

// jsonUints is a list of 64-bit unsigned integers in JSON; never null.
func jsonUints(ns []uint64) []string {
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = jsonUint(n)
	}
	return out
}

// orEmpty returns s, or an empty list for nil.
func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// errorsAs is errors.As, for the error helpers.
func errorsAs(err error, target any) bool { return errors.As(err, target) }
