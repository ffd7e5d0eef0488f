// Package backoff spaces out retries: a capped exponential backoff with
// equal jitter, and a plain pause. Both end early when their context does.
package backoff

import (
	"context"
	"math/rand/v2"
	"time"
)

// Backoff is a capped exponential backoff with equal jitter: each wait is
// half its delay plus a random part of the other half, and the delay
// doubles, from lo up to hi. It belongs to one goroutine.
type Backoff struct {
	lo, hi, next time.Duration
}

// New returns a backoff whose first delay is lo and whose delays grow to
// hi at most.
func New(lo, hi time.Duration) *Backoff { return &Backoff{lo: lo, hi: hi, next: lo} }

// Reset makes the next delay lo again, after a success.
func (b *Backoff) Reset() { b.next = b.lo }

// Next is the next wait's delay before its jitter: the most it waits.
func (b *Backoff) Next() time.Duration { return b.next }

// Wait waits for the next delay, or until ctx ends; it reports whether ctx
// is still live.
func (b *Backoff) Wait(ctx context.Context) bool {
	d := b.next
	b.next = min(2*b.next, b.hi)
	return Pause(ctx, d/2+rand.N(d/2+1))
}

// Pause waits for d, and reports false if ctx ended first.
func Pause(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
