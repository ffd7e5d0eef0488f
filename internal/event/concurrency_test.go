package event

import (
	"context"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// TestManyKeys pushes to many keys from several goroutines while others
// retarget, discard nothing and read stats, with a listener that refuses or
// half-accepts some batches. Every key must get exactly its items, in
// order, with never two Sends in flight for it. Run it with -race.
func TestManyKeys(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const (
			keys    = 300
			perKey  = 40
			pushers = 6
		)
		var mu sync.Mutex
		calls := 0
		fs := &fakeSender{answer: func(_ context.Context, c call) (int, error) {
			mu.Lock()
			calls++
			n := calls
			mu.Unlock()
			switch {
			case n%7 == 0:
				return 0, errDown
			case n%5 == 0:
				return len(c.seqs) / 2, errDown
			}
			return len(c.seqs), nil
		}}
		var rec recorder
		e := New(Config{Sender: fs, MaxBatch: 7, MaxInFlight: 64, MinBackoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond, OnDelivered: rec.onDelivered})
		defer e.Close()

		var wg sync.WaitGroup
		for p := range pushers {
			wg.Go(func() {
				r := rand.New(rand.NewPCG(uint64(p), 1))
				next := map[int]uint64{}
				for {
					var mine []int
					for k := p; k < keys; k += pushers {
						if next[k] < perKey {
							mine = append(mine, k)
						}
					}
					if len(mine) == 0 {
						return
					}
					k := mine[r.IntN(len(mine))]
					from := next[k] + 1
					to := min(from+uint64(r.IntN(5)), perKey)
					target := targetA
					if r.IntN(2) == 0 {
						target = targetB
					}
					if err := e.Push(keyN(k), target, items(keyN(k), from, to)...); err != nil {
						t.Errorf("Push(%v, %d..%d): %v", keyN(k), from, to, err)
						return
					}
					next[k] = to
				}
			})
		}
		for m := range 2 {
			wg.Go(func() {
				r := rand.New(rand.NewPCG(uint64(m), 2))
				for range 200 {
					k := keyN(r.IntN(keys))
					switch r.IntN(3) {
					case 0:
						e.Retarget(k, targetB)
					case 1:
						e.Discard(k, func(Item) bool { return false })
					default:
						_ = e.Stats()
					}
				}
			})
		}
		wg.Wait()
		elapse(time.Hour)

		for k := range keys {
			if got := fs.Got(keyN(k)); !slices.Equal(got, seqs(1, perKey)) {
				t.Errorf("key %d accepted %v, want 1..%d in order", k, got, perKey)
			}
			if d := rec.Delivered(keyN(k)); len(d) == 0 || d[len(d)-1] != perKey || !slices.IsSorted(d) {
				t.Errorf("key %d delivered through %v, want increasing up to %d", k, d, perKey)
			}
		}
		fs.mu.Lock()
		overlaps := fs.overlaps
		fs.mu.Unlock()
		if overlaps != 0 {
			t.Errorf("%d Sends overlapped another for the same key", overlaps)
		}
		s := e.Stats()
		if s.Queues != 0 || s.Queued != 0 || s.Delivered != keys*perKey || s.Failed != 0 || s.Retried == 0 {
			t.Errorf("stats = %+v, want %d delivered, some retried, nothing left", s, keys*perKey)
		}
	})
}

// TestIdleWorkersExit checks that a key holds no worker once its queue is
// empty, that at most maxIdleWorkers goroutines are kept for the next
// keys, and that those end after idleTimeout.
func TestIdleWorkersExit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := New(Config{Sender: &fakeSender{}})
		defer e.Close()
		for k := range 1000 {
			if err := e.Push(keyN(k), targetA, item(keyN(k), 1)); err != nil {
				t.Fatal(err)
			}
		}
		synctest.Wait()
		if s := e.Stats(); s.Queues != 0 || s.Delivered != 1000 {
			t.Errorf("stats = %+v, want 1000 delivered and no queue left", s)
		}
		if n := workers(); n != 0 {
			t.Errorf("%d delivery workers left after delivery, want none", n)
		}
		if n := pooled(); n < 1 || n > maxIdleWorkers {
			t.Errorf("%d idle workers kept, want 1 to %d", n, maxIdleWorkers)
		}
		time.Sleep(idleTimeout)
		synctest.Wait()
		if n := pooled(); n != 0 {
			t.Errorf("%d idle workers left after %v idle, want none", n, idleTimeout)
		}
	})
}

// TestIdleWorkersServeNextKeys checks that keys that become active one
// after the other, each once the one before was delivered, are served by
// the one worker kept idle, in order, and that Close ends it.
func TestIdleWorkersServeNextKeys(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := &fakeSender{}
		e := New(Config{Sender: fs})
		defer e.Close()
		for k := range 50 {
			key, from := keyN(k%5), uint64(k/5)*3+1
			if err := e.Push(key, targetA, items(key, from, from+2)...); err != nil {
				t.Fatal(err)
			}
			synctest.Wait()
			if n := pooled(); n != 1 {
				t.Fatalf("after key %d: %d workers, want the one kept idle", k, n)
			}
		}
		for k := range 5 {
			if got := fs.Got(keyN(k)); !slices.Equal(got, seqs(1, 30)) {
				t.Errorf("key %d got %v, want 1..30 in order", k, got)
			}
		}
		e.Close()
		if n := pooled(); n != 0 {
			t.Errorf("%d workers after Close, want none", n)
		}
	})
}

// TestMaxInFlight checks that Sends across keys never exceed MaxInFlight.
func TestMaxInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		var mu sync.Mutex
		now, peak := 0, 0
		fs := &fakeSender{answer: func(_ context.Context, c call) (int, error) {
			mu.Lock()
			now++
			peak = max(peak, now)
			mu.Unlock()
			<-release
			mu.Lock()
			now--
			mu.Unlock()
			return len(c.seqs), nil
		}}
		e := New(Config{Sender: fs, MaxInFlight: 3})
		defer e.Close()
		for k := range 10 {
			if err := e.Push(keyN(k), targetA, items(keyN(k), 1, 2)...); err != nil {
				t.Fatal(err)
			}
		}
		synctest.Wait()
		if n := len(fs.Calls()); n != 3 {
			t.Errorf("%d Sends in flight, want 3", n)
		}
		close(release)
		synctest.Wait()
		if peak != 3 {
			t.Errorf("peak of %d Sends in flight, want 3", peak)
		}
		if s := e.Stats(); s.Delivered != 20 || s.Queues != 0 {
			t.Errorf("stats = %+v, want 20 delivered", s)
		}
	})
}

// workers counts the goroutines running a queue's delivery loop. It reads
// stacks rather than runtime.NumGoroutine, which also counts goroutines of
// the runtime and the test framework that come and go on their own.
func workers() int { return countFrames("event.(*Engine).run(") }

// pooled returns how many goroutines the pools of this package run, busy
// or idle.
func pooled() int { return countFrames("event.(*pool[...]).loop(") }

func countFrames(frame string) int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Count(string(buf[:n]), frame)
		}
		buf = make([]byte, 2*len(buf))
	}
}
