package backoff

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

// TestWait: each wait lasts between half its delay and all of it; the
// delays double up to the cap; Reset starts them over.
func TestWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		b := New(100*time.Millisecond, time.Second)
		check := func(want time.Duration) {
			t.Helper()
			if got := b.Next(); got != want {
				t.Fatalf("next delay %s, want %s", got, want)
			}
			start := time.Now()
			if !b.Wait(ctx) {
				t.Fatal("Wait reported the context ended")
			}
			if took := time.Since(start); took < want/2 || took > want {
				t.Errorf("a wait of delay %s took %s, want %s to %s", want, took, want/2, want)
			}
		}
		for _, d := range []time.Duration{100, 200, 400, 800, 1000, 1000} {
			check(d * time.Millisecond)
		}
		b.Reset()
		check(100 * time.Millisecond)
	})
}

// TestEndsWithContext: Wait and Pause return false as soon as their
// context ends, not after their delay.
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
		if !Pause(t.Context(), time.Minute) {
			t.Error("Pause reported an ended context after its full wait")
		}
	})
}
