package replica

import (
	"errors"
	"io"

	"github.com/djinn-go/djinn/proto/statepb"
)

// StateMachine is the deterministic state the log drives.
//
// Apply, Snapshot and Restore are called from a single goroutine and never
// concurrently with each other. Apply must be deterministic: it may not read
// the clock (time comes in cmd.NowUnixNanos), do I/O or start goroutines. Its
// result is handed to the proposer; an error result is returned from Propose
// as the error.
type StateMachine interface {
	Apply(index uint64, cmd *statepb.Command) any
	// Snapshot captures the state and returns a function that writes it.
	// The function runs concurrently with later Applys, so Snapshot must
	// capture (copy or serialize) what it needs before returning.
	Snapshot() (func(w io.Writer) error, error)
	// Restore replaces the state with a snapshot written by Snapshot.
	Restore(r io.Reader) error
}

// Viewer is a StateMachine that takes a snapshot as a view, which it lets
// go when the snapshot is done with. The node prefers View to Snapshot:
// View is called between applies, write later while applies go on, and
// release once the snapshot is persisted, or given up without a write.
type Viewer interface {
	View() (write func(w io.Writer) error, release func(), err error)
}

// IsRefusal reports whether err is a state machine's refusal to apply
// what it was given — a snapshot or entry decided by rules newer than its
// binary knows — rather than damage: an error in its chain has a
// RefusesToApply method that returns true. No repair of the data helps;
// a newer binary does.
func IsRefusal(err error) bool {
	var r interface{ RefusesToApply() bool }
	return errors.As(err, &r) && r.RefusesToApply()
}
