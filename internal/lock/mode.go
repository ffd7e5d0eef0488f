package lock

import (
	"strconv"
	"strings"

	"github.com/djinn-go/djinn"
)

// Mode is a lock mode (spec 1.3.1, the IDL's lock_mode). The zero Mode is
// no mode: it is not valid in a request, and in Request.From it means "not a
// change_mode".
type Mode uint8

// The lock modes, weakest first.
const (
	IR Mode = iota + 1 // intention read
	R                  // read
	U                  // upgrade: a read lock that conflicts with itself
	IW                 // intention write
	W                  // write
)

// modes lists the valid modes, in order.
var modes = [...]Mode{IR, R, U, IW, W}

var modeNames = [...]string{IR: "ir", R: "r", U: "u", IW: "iw", W: "w"}

// longNames are the IDL's names, which ParseMode accepts too.
var longNames = [...]string{IR: "intention_read", R: "read", U: "upgrade", IW: "intention_write", W: "write"}

// String returns the mode's short name ("ir", "r", "u", "iw", "w"), or
// "mode(N)" for an invalid mode.
func (m Mode) String() string {
	if m.Valid() {
		return modeNames[m]
	}
	return "mode(" + strconv.Itoa(int(m)) + ")"
}

// Valid reports whether m is one of the five modes.
func (m Mode) Valid() bool { return m >= IR && m <= W }

// ParseMode parses a mode's short name (ir, r, u, iw, w) or its IDL name
// (intention_read, read, upgrade, intention_write, write), in any case.
func ParseMode(s string) (Mode, error) {
	l := strings.ToLower(strings.TrimSpace(s))
	for _, m := range modes {
		if l == modeNames[m] || l == longNames[m] {
			return m, nil
		}
	}
	return 0, djinn.Errorf(djinn.InvalidArgument, "lock mode %q: must be one of ir, r, u, iw, w", s)
}

// conflicting holds Table 1-1 (spec 1.3.1.3): conflicting[granted] has bit
// 1<<requested set when the two modes conflict. The table is symmetric.
var conflicting = [...]uint8{
	IR: 1 << W,
	R:  1<<IW | 1<<W,
	U:  1<<U | 1<<IW | 1<<W,
	IW: 1<<R | 1<<U | 1<<W,
	W:  1<<IR | 1<<R | 1<<U | 1<<IW | 1<<W,
}

// Conflicts reports whether a lock requested in mode requested conflicts
// with one granted in mode granted to another, unrelated client (Table 1-1).
// An invalid mode conflicts with nothing.
func Conflicts(granted, requested Mode) bool {
	if !granted.Valid() || !requested.Valid() {
		return false
	}
	return conflicting[granted]&(1<<requested) != 0
}

func checkMode(what string, m Mode) error {
	if !m.Valid() {
		return djinn.Errorf(djinn.InvalidArgument, "%s %d: must be one of ir, r, u, iw, w (1 to 5)", what, uint8(m))
	}
	return nil
}
