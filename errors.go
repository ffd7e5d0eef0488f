package djinn

import (
	"context"
	"errors"
	"fmt"
)

// Kind is the kind of a djinn error: one per Jini exception (and a few that
// every network service needs). Kinds are errors themselves, so the sentinel
// errors below are Kinds and errors.Is(err, ErrUnknownLease) holds for any
// error of that kind, however it was wrapped and whichever side of the wire it
// came from.
type Kind string

// Error returns the kind in words, for example "unknown lease".
func (k Kind) Error() string {
	if s, ok := kindText[k]; ok {
		return s
	}
	return string(k)
}

// The error kinds and their sentinel errors. Match with errors.Is.
const (
	// InvalidArgument: an argument broke a rule (IllegalArgumentException,
	// NullPointerException).
	InvalidArgument Kind = "INVALID_ARGUMENT"
	// UnknownLease: the lease expired, was cancelled or never existed
	// (UnknownLeaseException).
	UnknownLease Kind = "UNKNOWN_LEASE"
	// LeaseDenied: the grantor refused the lease (LeaseDeniedException).
	LeaseDenied Kind = "LEASE_DENIED"
	// UnknownEvent: the listener is not interested in this kind of event
	// (UnknownEventException); the sender should stop sending it.
	UnknownEvent Kind = "UNKNOWN_EVENT"
	// NoSuchObject: the registration or object no longer exists
	// (NoSuchObjectException).
	NoSuchObject Kind = "NO_SUCH_OBJECT"
	// UnknownTransaction: the transaction is unknown to the manager.
	UnknownTransaction Kind = "UNKNOWN_TRANSACTION"
	// CannotJoin: the transaction is no longer active.
	CannotJoin Kind = "CANNOT_JOIN"
	// CannotCommit: the transaction cannot commit.
	CannotCommit Kind = "CANNOT_COMMIT"
	// CannotAbort: the transaction already committed.
	CannotAbort Kind = "CANNOT_ABORT"
	// CrashCount: a participant's crash count changed.
	CrashCount Kind = "CRASH_COUNT"
	// TimeoutExpired: a waitFor commit or abort did not finish in time.
	TimeoutExpired Kind = "TIMEOUT_EXPIRED"
	// LockNotHeld: unlock or change_mode of a lock not held.
	LockNotHeld Kind = "LOCK_NOT_HELD"
	// TransactionRolledBack: the transaction aborted while the call waited.
	TransactionRolledBack Kind = "TRANSACTION_ROLLED_BACK"
	// Deadlock: waiting would close a cycle of waiters; the request was
	// refused (its caller is the victim) and nothing changed.
	Deadlock Kind = "DEADLOCK"
	// ResourceExhausted: a quota or bound was reached; nothing was done.
	ResourceExhausted Kind = "RESOURCE_EXHAUSTED"
	// InvalidIterator: a stream of events was superseded by another
	// consumer of the same registration (InvalidIteratorException, River's
	// event mailbox): a newer pull, or push delivery enabled.
	InvalidIterator Kind = "INVALID_ITERATOR"
	// PermissionDenied: the call needs a role the caller does not hold
	// (the operator role, or a peer's identity); nothing was done.
	PermissionDenied Kind = "PERMISSION_DENIED"
	// Unsupported: the operation is not supported in this state
	// (UnsupportedOperationException).
	Unsupported Kind = "UNSUPPORTED"
	// Unavailable: the peer could not be reached or could not answer now
	// (RemoteException); the call may or may not have taken effect.
	Unavailable Kind = "UNAVAILABLE"
	// Internal: a bug or a broken invariant on the other side.
	Internal Kind = "INTERNAL"
)

// The sentinel errors, one per kind, for errors.Is.
var (
	ErrInvalidArgument       error = InvalidArgument
	ErrUnknownLease          error = UnknownLease
	ErrLeaseDenied           error = LeaseDenied
	ErrUnknownEvent          error = UnknownEvent
	ErrNoSuchObject          error = NoSuchObject
	ErrUnknownTransaction    error = UnknownTransaction
	ErrCannotJoin            error = CannotJoin
	ErrCannotCommit          error = CannotCommit
	ErrCannotAbort           error = CannotAbort
	ErrCrashCount            error = CrashCount
	ErrTimeoutExpired        error = TimeoutExpired
	ErrLockNotHeld           error = LockNotHeld
	ErrDeadlock              error = Deadlock
	ErrTransactionRolledBack error = TransactionRolledBack
	ErrResourceExhausted     error = ResourceExhausted
	ErrInvalidIterator       error = InvalidIterator
	ErrPermissionDenied      error = PermissionDenied
	ErrUnsupported           error = Unsupported
	ErrUnavailable           error = Unavailable
	ErrInternal              error = Internal
)

var kindText = map[Kind]string{
	InvalidArgument:       "invalid argument",
	UnknownLease:          "unknown lease",
	LeaseDenied:           "lease denied",
	UnknownEvent:          "unknown event",
	NoSuchObject:          "no such object",
	UnknownTransaction:    "unknown transaction",
	CannotJoin:            "cannot join",
	CannotCommit:          "cannot commit",
	CannotAbort:           "cannot abort",
	CrashCount:            "crash count",
	TimeoutExpired:        "timeout expired",
	LockNotHeld:           "lock not held",
	TransactionRolledBack: "transaction rolled back",
	Deadlock:              "deadlock",
	ResourceExhausted:     "resource exhausted",
	InvalidIterator:       "invalid iterator",
	PermissionDenied:      "permission denied",
	Unsupported:           "unsupported operation",
	Unavailable:           "unavailable",
	Internal:              "internal error",
}

// Kinds lists every kind, for tables and tests.
func Kinds() []Kind {
	return []Kind{InvalidArgument, UnknownLease, LeaseDenied, UnknownEvent, NoSuchObject,
		UnknownTransaction, CannotJoin, CannotCommit, CannotAbort, CrashCount, TimeoutExpired,
		LockNotHeld, TransactionRolledBack, Deadlock, ResourceExhausted, InvalidIterator, PermissionDenied, Unsupported, Unavailable, Internal}
}

// Error is an error of a kind with its own message. errors.Is(err, k) holds
// for an *Error of kind k.
type Error struct {
	Kind    Kind
	Message string
	// Committed is set for TimeoutExpired: whether the transaction committed.
	Committed bool
}

func (e *Error) Error() string {
	if e.Message == "" {
		return e.Kind.Error()
	}
	return e.Message
}

// Is reports whether target is e's kind.
func (e *Error) Is(target error) bool {
	k, ok := target.(Kind)
	return ok && k == e.Kind
}

// Errorf returns an *Error of kind k with a formatted message. By the
// project's rule the message is lower case, unpunctuated, and names the bad
// value: "lease duration -5s: must be positive, Forever or Any".
func Errorf(k Kind, format string, args ...any) error {
	return &Error{Kind: k, Message: fmt.Sprintf(format, args...)}
}

// KindOf returns the kind of err: the kind of the first *Error or Kind in its
// chain, Unavailable for context errors, and Internal for anything else. It
// returns "" for a nil error.
func KindOf(err error) Kind {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	var k Kind
	if errors.As(err, &k) {
		return k
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return Unavailable
	}
	return Internal
}

// IsDefinite reports whether err says that retrying cannot help: the
// "definite exceptions" of the lease renewal specification (LR.1: bad object,
// bad invocation and lease exceptions), as opposed to indefinite ones such as
// communication failures, which may succeed if tried again.
func IsDefinite(err error) bool {
	switch KindOf(err) {
	case "", Unavailable, ResourceExhausted, Internal, TimeoutExpired:
		return false
	}
	return true
}
