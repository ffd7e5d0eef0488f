package event

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/djinn-go/djinn"
)

// holdA returns a Sender answer that holds every Send to targetA until its
// context is done, notes the cancellation, and then waits for release
// before answering with accepted events; Sends to other targets are accepted
// whole.
func holdA(cancelled *atomic.Int32, release <-chan struct{}, accepted int) func(context.Context, call) (int, error) {
	return func(ctx context.Context, c call) (int, error) {
		if c.target != targetA {
			return len(c.seqs), nil
		}
		<-ctx.Done()
		cancelled.Add(1)
		<-release
		return accepted, ctx.Err()
	}
}

// TestRetargetBlocks checks EM.4.1's blocking replacement: Retarget cancels
// the Send in flight to the old listener, returns only after it has
// finished, and then sends everything not accepted to the new listener.
func TestRetargetBlocks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var cancelled atomic.Int32
		release := make(chan struct{})
		fs := &fakeSender{answer: holdA(&cancelled, release, 1)}
		var rec recorder
		e := New(Config{Sender: fs, MaxBatch: 3, OnDelivered: rec.onDelivered, OnFailure: rec.onFailure(func(Item, error) Action { return Stop })})
		defer e.Close()
		if err := e.Push(keyA, targetA, items(keyA, 1, 4)...); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()

		var returned atomic.Bool
		done := make(chan struct{})
		go func() {
			e.Retarget(keyA, targetB)
			returned.Store(true)
			close(done)
		}()
		synctest.Wait()
		if cancelled.Load() != 1 {
			t.Fatal("the Send to the old listener was not cancelled")
		}
		if returned.Load() {
			t.Fatal("Retarget returned while the old Send was still running")
		}
		close(release)
		<-done
		synctest.Wait()

		calls := fs.Calls()
		want := []call{{target: targetA, seqs: []int64{1, 2, 3}}, {target: targetB, seqs: []int64{2, 3, 4}}}
		if len(calls) != len(want) {
			t.Fatalf("sends = %v, want %v", calls, want)
		}
		for i, c := range calls {
			if c.target != want[i].target || !slices.Equal(c.seqs, want[i].seqs) {
				t.Errorf("send %d = %v to %v, want %v to %v", i, c.seqs, c.target.Endpoint, want[i].seqs, want[i].target.Endpoint)
			}
		}
		if got := rec.Delivered(keyA); !slices.Equal(got, []uint64{1, 4}) {
			t.Errorf("delivered through %v, want [1 4]: the old listener accepted 1", got)
		}
		if f := rec.Failures(); len(f) != 0 {
			t.Errorf("failures %v, want none: a cancelled Send is not a failure", f)
		}
	})
}

// TestRetargetCutsBackoff checks that a retarget, by Retarget or by a Push
// naming a new listener, is tried at once rather than after the backoff
// meant for the old listener.
func TestRetargetCutsBackoff(t *testing.T) {
	for _, tt := range []struct {
		name     string
		retarget func(t *testing.T, e *Engine)
	}{
		{"Retarget", func(_ *testing.T, e *Engine) { e.Retarget(keyA, targetB) }},
		{"Push", func(t *testing.T, e *Engine) {
			if err := e.Push(keyA, targetB); err != nil {
				t.Fatalf("Push naming a new target: %v", err)
			}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				fs := &fakeSender{answer: func(_ context.Context, c call) (int, error) {
					if c.target == targetA {
						return 0, errDown
					}
					return len(c.seqs), nil
				}}
				e := New(Config{Sender: fs, MinBackoff: time.Hour, MaxBackoff: time.Hour})
				defer e.Close()
				start := time.Now()
				if err := e.Push(keyA, targetA, items(keyA, 1, 2)...); err != nil {
					t.Fatal(err)
				}
				synctest.Wait()
				tt.retarget(t, e)
				synctest.Wait()
				calls := fs.Calls()
				if len(calls) != 2 || calls[1].target != targetB {
					t.Fatalf("sends = %v, want one to A then one to B", calls)
				}
				if d := calls[1].at.Sub(start); d != 0 {
					t.Errorf("new listener tried after %v, want at once", d)
				}
				if s := e.Stats(); s.Queues != 0 || s.Delivered != 2 {
					t.Errorf("stats = %+v, want all delivered", s)
				}
			})
		})
	}
}

// TestRetargetIdleKey checks that Retarget of a key with nothing queued
// keeps nothing, and that a zero target disables delivery like Drop.
func TestRetargetIdleKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := &fakeSender{script: []reply{{0, errDown}}}
		e := New(Config{Sender: fs, MinBackoff: time.Minute})
		defer e.Close()
		e.Retarget(keyA, targetB)
		if s := e.Stats(); s.Queues != 0 {
			t.Errorf("Retarget of an idle key made a queue: %+v", s)
		}
		if err := e.Push(keyA, targetA, item(keyA, 1)); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		e.Retarget(keyA, djinn.Ref{})
		if s := e.Stats(); s.Queues != 0 || s.Queued != 0 {
			t.Errorf("stats after Retarget to no listener = %+v, want nothing queued", s)
		}
		elapse(time.Hour)
		if n := len(fs.Calls()); n != 1 {
			t.Errorf("%d sends, want 1", n)
		}
	})
}

// TestDropBlocks checks that Drop cancels the Send in flight, returns only
// after it has finished, and that no callback runs after it returns.
func TestDropBlocks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var cancelled atomic.Int32
		release := make(chan struct{})
		fs := &fakeSender{answer: holdA(&cancelled, release, 1)}
		var rec recorder
		e := New(Config{Sender: fs, MaxBatch: 2, OnDelivered: rec.onDelivered, OnFailure: rec.onFailure(func(Item, error) Action { return Retry })})
		defer e.Close()
		if err := e.Push(keyA, targetA, items(keyA, 1, 5)...); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()

		var returned atomic.Bool
		done := make(chan struct{})
		go func() {
			e.Drop(keyA)
			rec.close()
			returned.Store(true)
			close(done)
		}()
		synctest.Wait()
		if cancelled.Load() != 1 {
			t.Fatal("the Send in flight was not cancelled")
		}
		if returned.Load() {
			t.Fatal("Drop returned while the Send was still running")
		}
		close(release)
		<-done
		elapse(time.Hour)

		if n := rec.Late(); n != 0 {
			t.Errorf("%d callbacks after Drop returned", n)
		}
		if n := len(fs.Calls()); n != 1 {
			t.Errorf("%d sends, want 1", n)
		}
		if s := e.Stats(); s.Queues != 0 || s.Queued != 0 || s.Delivered != 1 || s.Failed != 0 {
			t.Errorf("stats = %+v, want nothing queued and the one accepted event delivered", s)
		}
		// The key starts afresh.
		if err := e.Push(keyA, targetB, items(keyA, 1, 2)...); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if got := fs.Got(keyA); !slices.Equal(got, []int64{1, 1, 2}) {
			t.Errorf("accepted %v, want [1] then [1 2]", got)
		}
	})
}

// TestDiscard checks that Discard removes matching queued items, never
// those in flight, and lets a worker with nothing left stop waiting.
func TestDiscard(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		var once sync.Once
		fs := &fakeSender{answer: func(_ context.Context, c call) (int, error) {
			once.Do(func() { <-release })
			return len(c.seqs), nil
		}}
		e := New(Config{Sender: fs, MaxBatch: 2})
		defer e.Close()
		if err := e.Push(keyA, targetA, items(keyA, 1, 6)...); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		var offered []uint64
		e.Discard(keyA, func(it Item) bool {
			offered = append(offered, it.Cursor)
			return it.Cursor%2 == 0
		})
		if !slices.Equal(offered, []uint64{3, 4, 5, 6}) {
			t.Errorf("Discard offered %v, want the queued items 3..6 and not those in flight", offered)
		}
		if s := e.Stats(); s.Queued != 4 {
			t.Errorf("%d queued after Discard, want 4", s.Queued)
		}
		e.Discard(djinn.ID{0xff}, func(Item) bool { t.Error("match called for an unknown key"); return true })
		close(release)
		synctest.Wait()
		if got := callSeqs(fs.Calls()); !slices.EqualFunc(got, [][]int64{{1, 2}, {3, 5}}, slices.Equal) {
			t.Errorf("sends = %v, want [[1 2] [3 5]]", got)
		}

		// A key waiting out a long backoff stops as soon as Discard empties it.
		fs.answer = func(context.Context, call) (int, error) { return 0, errDown }
		e2 := New(Config{Sender: fs, MinBackoff: time.Hour, MaxBackoff: time.Hour})
		defer e2.Close()
		if err := e2.Push(keyA, targetA, item(keyA, 9)); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		e2.Discard(keyA, func(Item) bool { return true })
		synctest.Wait()
		if s := e2.Stats(); s.Queues != 0 || s.Queued != 0 {
			t.Errorf("stats = %+v, want the emptied key gone at once", s)
		}
	})
}

// TestClose checks that Close stops workers in a Send, in a backoff and in
// the MaxInFlight queue, waits for them, and leaves an engine that refuses
// Pushes and ignores everything else.
func TestClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := &fakeSender{answer: func(ctx context.Context, c call) (int, error) {
			if c.target == targetB {
				return 0, errDown // the key backs off
			}
			<-ctx.Done() // the key holds the only MaxInFlight token
			return 0, ctx.Err()
		}}
		var rec recorder
		e := New(Config{Sender: fs, MaxInFlight: 1, MinBackoff: time.Hour, OnDelivered: rec.onDelivered, OnFailure: rec.onFailure(func(Item, error) Action { return Retry })})
		for i, target := range []djinn.Ref{targetB, targetA, targetA} {
			if err := e.Push(keyN(i), target, item(keyN(i), 1)); err != nil {
				t.Fatal(err)
			}
			synctest.Wait()
		}
		if s := e.Stats(); s.Queues != 3 {
			t.Fatalf("stats = %+v, want 3 queues", s)
		}
		failures := len(rec.Failures())
		e.Close()
		rec.close()
		if s := e.Stats(); s.Queues != 0 || s.Queued != 0 {
			t.Errorf("stats after Close = %+v, want nothing queued", s)
		}
		if got := len(rec.Failures()); got != failures {
			t.Errorf("%d failures reported while closing, want none", got-failures)
		}
		if err := e.Push(keyA, targetA, item(keyA, 1)); err == nil {
			t.Error("Push after Close succeeded")
		}
		e.Retarget(keyN(0), targetA)
		e.Drop(keyN(1))
		e.Discard(keyN(2), func(Item) bool { return true })
		e.Close()
		if n := rec.Late(); n != 0 {
			t.Errorf("%d callbacks after Close", n)
		}
	})
}
