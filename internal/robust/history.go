package robust

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
	"google.golang.org/grpc"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/grpcerr"
)

// Outcome is what a call's answer says about whether it took effect.
type Outcome int

const (
	Done    Outcome = iota // it took effect (its answer came back)
	NotDone                // it did not: a definite refusal (not the leader, a semantic error)
	Unknown                // it may or may not have: a timeout, a reset, a lost leadership
)

// outcome classifies a call's error.
func outcome(err error) Outcome {
	if err == nil {
		return Done
	}
	e := grpcerr.FromStatus(err)
	msg := e.Error()
	switch {
	case strings.Contains(msg, "may or may not"):
		return Unknown
	case errors.Is(e, context.DeadlineExceeded), errors.Is(e, context.Canceled):
		return Unknown
	case errors.Is(e, djinn.ErrUnavailable):
		if strings.Contains(msg, "not the leader") || strings.Contains(msg, "not ready") {
			return NotDone
		}
		return Unknown
	}
	return NotDone
}

// notLeader reports a refusal that another member may not give.
func notLeader(err error) bool {
	if err == nil {
		return false
	}
	e := grpcerr.FromStatus(err)
	return errors.Is(e, djinn.ErrUnavailable) && outcome(err) == NotDone
}

// Clock reads the suite's time: nanoseconds since the run began, on the
// monotonic clock the histories share.
type Clock struct{ start time.Time }

// Now returns the time since the run began.
func (c Clock) Now() int64 { return int64(time.Since(c.start)) }

// History records operations for porcupine, one client id per worker.
type History struct {
	mu  sync.Mutex
	ops []porcupine.Operation // guarded by mu
}

// Add records an operation.
func (h *History) Add(op porcupine.Operation) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ops = append(h.ops, op)
}

// Ops returns the recorded operations.
func (h *History) Ops() []porcupine.Operation {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]porcupine.Operation(nil), h.ops...)
}

// never is the return time of an operation whose outcome is unknown: it
// may take effect at any time after its call.
const never = int64(1) << 62

// Caller makes a worker's calls to a replicated service: to the member
// that answered last, moving on to the next when one refuses because it
// is not the leader or cannot be reached in time.
type Caller struct {
	nodes   []*Node
	next    int
	as      Principal
	attempt time.Duration // each attempt's deadline
}

// NewCaller returns a caller over the cluster's members starting at first,
// calling as worker first's principal.
func NewCaller(c *Cluster, first int) *Caller {
	return &Caller{nodes: c.Nodes, next: first % len(c.Nodes), as: principalOf(first), attempt: 2 * time.Second}
}

// Call calls f until a member answers or refuses definitely, or ctx ends;
// a call whose outcome is unknown is not made again (the caller decides,
// as only it knows whether the call may be repeated). It returns what the
// last answer says and its error.
func (c *Caller) Call(ctx context.Context, f func(ctx context.Context, cc *grpc.ClientConn) error) (Outcome, error) {
	for tries := 0; ; tries++ {
		n := c.nodes[c.next]
		if !n.Up() {
			c.next = (c.next + 1) % len(c.nodes)
			if err := c.pause(ctx, tries); err != nil {
				return NotDone, err
			}
			continue
		}
		actx, cancel := context.WithTimeout(ctx, c.attempt)
		err := f(actx, n.Conn(c.as))
		cancel()
		o := outcome(err)
		if o == Unknown && ctx.Err() == nil && isUnreached(err) {
			// Not sent: the connection was not up. Another member may be.
			o = NotDone
		}
		if !(o == NotDone && (notLeader(err) || isUnreached(err))) {
			return o, err
		}
		c.next = (c.next + 1) % len(c.nodes)
		if perr := c.pause(ctx, tries); perr != nil {
			return NotDone, err
		}
	}
}

// pause waits a little after each round of the members.
func (c *Caller) pause(ctx context.Context, tries int) error {
	if tries%len(c.nodes) != len(c.nodes)-1 {
		return ctx.Err()
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(50 * time.Millisecond):
		return nil
	}
}

// isUnreached reports a call that failed before it was sent: gRPC could
// not connect.
func isUnreached(err error) bool {
	return err != nil && strings.Contains(err.Error(), "connection refused")
}
