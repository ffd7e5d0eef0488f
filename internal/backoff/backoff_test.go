package backoff

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

const (
	lo = 100 * time.Millisecond
	hi = time.Second
)

// delays is the delay of each wait of New(lo, hi): doubling from lo, up to hi.
var delays = []time.Duration{lo, 2 * lo, 4 * lo, 8 * lo, hi, hi, hi}

// waitNext checks that b's next wait is within half its delay and all of
// it, that Wait waits exactly that long, and returns it.
func waitNext(t *testing.T, b *Backoff, delay time.Duration) time.Duration {
	t.Helper()
	next := b.Next()
	if next < delay/2 || next > delay {
		t.Fatalf("next wait %s, want %s to %s (delay %s)", next, delay/2, delay, delay)
	}
	start := time.Now()
	if !b.Wait(t.Context()) {
		t.Fatal("Wait reported its context ended")
	}
	if took := time.Since(start); took != next {
		t.Fatalf("Wait took %s, but Next said %s", took, next)
	}
	return next
}

// TestWait: each wait lasts between half its delay and all of it, as Next
// says; the delays double up to the cap, so waits never shrink before it;
// Reset starts them over.
func TestWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := New(lo, hi)
		for round := range 3 {
			var prev time.Duration
			for i, d := range delays {
				w := waitNext(t, b, d)
				if d < hi && w < prev {
					t.Errorf("round %d: wait %d (%s) shorter than the one before (%s)", round, i, w, prev)
				}
				prev = w
			}
			b.Reset()
		}
	})
}

// TestJitter: waits of the same delay differ, and spread over the range
// from half the delay to all of it.
func TestJitter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		seen := map[time.Duration]bool{}
		lowest, highest := hi, time.Duration(0)
		for range 200 {
			b := New(lo, hi)
			for _, d := range delays[:len(delays)-1] {
				waitNext(t, b, d)
			}
			w := waitNext(t, b, hi)
			seen[w] = true
			lowest, highest = min(lowest, w), max(highest, w)
		}
		if len(seen) < 100 {
			t.Errorf("200 capped waits took only %d distinct values: too little jitter", len(seen))
		}
		if lowest > 6*hi/10 || highest < 9*hi/10 {
			t.Errorf("capped waits spread over %s to %s, want about %s to %s", lowest, highest, hi/2, hi)
		}
	})
}

// TestEndsWithContext: Wait and Pause return false as soon as their
// context ends, not after their delay; Reset after an ended Wait starts
// over from lo.
func TestEndsWithContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		start := time.Now()
		if Pause(ctx, time.Hour) {
			t.Error("Pause reported a full wait though its context ended first")
		}
		if took := time.Since(start); took != time.Second {
			t.Errorf("Pause returned after %s, want when the context ended (1s)", took)
		}
		if New(time.Hour, time.Hour).Wait(ctx) {
			t.Error("Wait on an ended context reported it live")
		}

		ctx, cancel = context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		b := New(time.Hour, 2*time.Hour)
		start = time.Now()
		if b.Wait(ctx) {
			t.Error("Wait reported a full wait though its context ended first")
		}
		if took := time.Since(start); took != time.Minute {
			t.Errorf("Wait returned after %s, want when the context ended (1m)", took)
		}
		b.Reset()
		if next := b.Next(); next < 30*time.Minute || next > time.Hour {
			t.Errorf("after Reset the next wait is %s, want 30m to 1h", next)
		}
		if !Pause(t.Context(), time.Minute) {
			t.Error("Pause reported an ended context after its full wait")
		}
	})
}
