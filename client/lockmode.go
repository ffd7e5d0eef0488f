package client

import (
	"strconv"
	"strings"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// LockMode is a lock mode (CC 2.1.1's lock_mode, CC 1.3.1). Its values are
// the wire's: LockMode(pb) and djinnpb.LockMode(m) convert between the two.
// The zero LockMode is no mode, which no call accepts.
type LockMode int32

// The lock modes, weakest first, with Table 1-1's compatibility (CC
// 1.3.1.3): IR conflicts with W; R with IW and W; U with U, IW and W; IW
// with R, U and W; W with everything.
const (
	LockIR = LockMode(djinnpb.LockMode_LOCK_MODE_INTENTION_READ)  // intention read (CC 1.3.1.2)
	LockR  = LockMode(djinnpb.LockMode_LOCK_MODE_READ)            // read (CC 1.3.1.1)
	LockU  = LockMode(djinnpb.LockMode_LOCK_MODE_UPGRADE)         // upgrade: a read lock that conflicts with itself
	LockIW = LockMode(djinnpb.LockMode_LOCK_MODE_INTENTION_WRITE) // intention write (CC 1.3.1.2)
	LockW  = LockMode(djinnpb.LockMode_LOCK_MODE_WRITE)           // write (CC 1.3.1.1)
)

// LockModes returns the five modes, weakest first.
func LockModes() []LockMode { return []LockMode{LockIR, LockR, LockU, LockIW, LockW} }

var (
	lockModeNames = [...]string{LockIR: "ir", LockR: "r", LockU: "u", LockIW: "iw", LockW: "w"}
	// lockModeIDLNames are the IDL's names (CC 2.1), which ParseLockMode
	// accepts too.
	lockModeIDLNames = [...]string{LockIR: "intention_read", LockR: "read", LockU: "upgrade", LockIW: "intention_write", LockW: "write"}
)

// String returns the mode's short name: "ir", "r", "u", "iw" or "w";
// "none" for the zero mode and "LockMode(N)" for a value that is no mode.
func (m LockMode) String() string {
	switch {
	case m == 0:
		return "none"
	case m.valid():
		return lockModeNames[m]
	}
	return "LockMode(" + strconv.Itoa(int(m)) + ")"
}

func (m LockMode) valid() bool { return m >= LockIR && m <= LockW }

// ParseLockMode parses a mode's short name (ir, r, u, iw, w) or its IDL
// name (intention_read, read, upgrade, intention_write, write; CC 2.1), in
// any case. Anything else is djinn.ErrInvalidArgument naming s.
func ParseLockMode(s string) (LockMode, error) {
	l := strings.ToLower(s)
	for _, m := range LockModes() {
		if l == lockModeNames[m] || l == lockModeIDLNames[m] {
			return m, nil
		}
	}
	return 0, djinn.Errorf(djinn.InvalidArgument, "lock mode %q: want ir, r, u, iw or w (or the IDL's intention_read, read, upgrade, intention_write, write)", abbrev(s))
}

// checkLockMode refuses a value that is no mode; what names the argument.
func checkLockMode(what string, m LockMode) error {
	if !m.valid() {
		return djinn.Errorf(djinn.InvalidArgument, "%s %s: want ir, r, u, iw or w", what, m)
	}
	return nil
}
