package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/backoff"
)

// ErrNotReady is in the chain of the error of a server that answers but
// is still starting: its cluster has no service id yet (it has not
// bootstrapped, or has not been added to a cluster yet), it knows no
// leader, or its leader's services are not serving yet. Such an error is
// djinn.ErrUnavailable too. Asking again later may succeed: WaitReady does.
var ErrNotReady = errors.New("server not ready")

// notReadyError is the error of a server still starting: Unavailable, and
// ErrNotReady.
type notReadyError struct {
	addr string
	err  error
}

func (e *notReadyError) Error() string   { return e.err.Error() }
func (e *notReadyError) Unwrap() []error { return []error{e.err, ErrNotReady} }

func notReady(addr, format string, args ...any) error {
	return &notReadyError{addr: addr, err: djinn.Errorf(djinn.Unavailable, format, args...)}
}

// NotReadyServer returns the address of the server that err says is still
// starting, and whether err says so.
func NotReadyServer(err error) (string, bool) {
	var e *notReadyError
	if errors.As(err, &e) {
		return e.addr, true
	}
	return "", false
}

// Ready asks the server c is dialled to whether it is ready, as its
// /readyz has it: nil when it is, an error that is ErrNotReady when it
// answers but is still starting, or the error of the call.
func (c *Client) Ready(ctx context.Context) error {
	st, err := c.Status(ctx)
	if err != nil {
		return err
	}
	return st.Ready()
}

// WaitReady calls find until it returns anything but ErrNotReady, waiting
// between tries with a growing backoff, for at most limit (never beyond
// ctx). Before its first wait it calls waiting, when not nil, with the
// error that made it wait: once, to say what it waits for. When the time
// runs out it returns that error, saying how long it waited; the first
// try too is bounded by limit (or a second, if limit is shorter). With
// limit zero or less it calls find once.
func WaitReady[T any](ctx context.Context, limit time.Duration, waiting func(error), find func(context.Context) (T, error)) (T, error) {
	return waitWhile(ctx, limit, waiting, find, func(err error) bool { return errors.Is(err, ErrNotReady) })
}

// WaitStarted is WaitReady for a server that may not answer at all yet —
// one just started in the background, not listening yet, or restarting:
// it also asks again while find fails as unavailable (djinn.Unavailable:
// nothing listens there, the connection failed). Each try should dial
// afresh, so that a server that starts listening is reached at once, not
// after a failed connection's own backoff.
func WaitStarted[T any](ctx context.Context, limit time.Duration, waiting func(error), find func(context.Context) (T, error)) (T, error) {
	return waitWhile(ctx, limit, waiting, find, func(err error) bool { return djinn.KindOf(err) == djinn.Unavailable })
}

// firstTry is the least time a wait gives its first try.
const firstTry = time.Second

// waitWhile calls find until again says no to its error, as WaitReady
// describes.
func waitWhile[T any](ctx context.Context, limit time.Duration, waiting func(error), find func(context.Context) (T, error), again func(error) bool) (T, error) {
	if limit <= 0 {
		return find(ctx)
	}
	// The limit bounds the first try too — a server that takes the
	// connection and never answers is not waited for past it — but gives
	// it at least firstTry, so that a limit too short for any answer
	// still asks once.
	first, cancelFirst := context.WithTimeout(ctx, max(limit, firstTry))
	v, err := find(first)
	timedOut := err != nil && first.Err() != nil && ctx.Err() == nil
	cancelFirst()
	if timedOut {
		return v, fmt.Errorf("%w (gave up after waiting %s: no answer)", err, max(limit, firstTry))
	}
	bounded, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	if err == nil || !again(err) {
		return v, err
	}
	if waiting != nil {
		waiting(err)
	}
	for b := backoff.New(50*time.Millisecond, time.Second); b.Wait(bounded); {
		next, nerr := find(bounded)
		if nerr != nil && bounded.Err() != nil {
			break // the bound ran out during the call: the server had not become ready
		}
		if nerr == nil || !again(nerr) {
			return next, nerr
		}
		v, err = next, nerr
	}
	if ctx.Err() != nil { // the caller stopped the wait, not the limit
		return v, fmt.Errorf("%w (stopped waiting: %v)", err, context.Cause(ctx))
	}
	return v, fmt.Errorf("%w (gave up after waiting %s)", err, limit)
}
