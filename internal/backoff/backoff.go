// Package backoff spaces out retries: a capped exponential backoff with
// jitter, and a plain pause. Both end early when their context does.
//
// The schedule is that of github.com/cenkalti/backoff's ExponentialBackOff,
// set so that each wait falls between half its delay and all of it, the
// delay doubling from lo up to hi: initial interval ¾·lo, multiplier 2,
// randomization factor ⅓ (a wait is its interval ±⅓, so ½ to 1 of the
// delay), max interval ¾·hi, and no max elapsed time (the library's
// ExponentialBackOff has none; a Backoff retries until its context ends).
package backoff

import (
	"context"
	"time"

	"github.com/cenkalti/backoff/v5"
)

// Backoff is a capped exponential backoff with jitter: the delay doubles
// from lo up to hi, and each wait lasts a random time between half the
// delay and all of it. It belongs to one goroutine.
type Backoff struct {
	exp  backoff.ExponentialBackOff
	next time.Duration // the next wait, drawn ahead so Next can tell it
}

// New returns a backoff whose first delay is lo and whose delays grow to
// hi at most.
func New(lo, hi time.Duration) *Backoff {
	b := &Backoff{exp: backoff.ExponentialBackOff{
		InitialInterval:     lo - lo/4,
		RandomizationFactor: 1.0 / 3,
		Multiplier:          2,
		MaxInterval:         hi - hi/4,
	}}
	b.Reset()
	return b
}

// Reset starts the delays over from lo, after a success.
func (b *Backoff) Reset() {
	b.exp.Reset()
	b.next = b.exp.NextBackOff()
}

// Next is how long the next Wait waits, jitter included; logs say it as
// "retrying in Next()".
func (b *Backoff) Next() time.Duration { return b.next }

// Wait waits for the next delay, or until ctx ends; it reports whether ctx
// is still live.
func (b *Backoff) Wait(ctx context.Context) bool {
	d := b.next
	b.next = b.exp.NextBackOff()
	return Pause(ctx, d)
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
