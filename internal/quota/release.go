package quota

import "context"

// A call that waits by design — a lock request queued behind the lock's
// holder, for as long as the holder keeps it — gives back its place under
// its principal's calls-in-flight bound ([quota] calls-in-flight) as it
// starts to wait: from then on what bounds it is the quota of what it
// waits as (lock-waiters). Otherwise a principal's waiting requests would
// fill its bound, and its other calls — the unlock that would grant them
// among them — would wait behind them, or be refused, for as long as the
// holder holds.

// Releaser gives back a call's place under its principal's calls in
// flight; a second Release does nothing.
type Releaser interface{ Release() }

type releaseKey struct{}

// WithReleaser returns ctx carrying r, the Releaser of the call ctx is
// the context of.
func WithReleaser(ctx context.Context, r Releaser) context.Context {
	return context.WithValue(ctx, releaseKey{}, r)
}

// Release gives back the place of the call ctx belongs to, if it holds
// one: a handler calls it as it starts a wait that may last.
func Release(ctx context.Context) {
	if r, ok := ctx.Value(releaseKey{}).(Releaser); ok {
		r.Release()
	}
}
