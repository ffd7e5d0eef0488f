package server

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/djinn-go/djinn/proto/djinnpb"
)

// timedCall is a call context with a deadline d from now, bounded by ds.
func timedCall(ds *callDeadlines, d time.Duration) *callCtx {
	c := &callCtx{values: context.Background(), at: -1, deadline: time.Now().Add(d)}
	ds.add(c)
	return c
}

// TestCallContextDeadline: a session call's context ends at its deadline
// as context.WithDeadline's does — DeadlineExceeded from Err and Cause,
// Done closed, the deadline reported, contexts made from it ended — and
// not a moment before; the calls of a session end in deadline order
// whatever order they came in.
func TestCallContextDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var ds callDeadlines
		defer ds.stop()
		late, early := timedCall(&ds, 2*time.Second), timedCall(&ds, time.Second)
		child, stopChild := context.WithCancel(early)
		defer stopChild()
		if dl, ok := early.Deadline(); !ok || !dl.Equal(time.Now().Add(time.Second)) {
			t.Errorf("Deadline() = %v, %v; want now+1s, true", dl, ok)
		}
		time.Sleep(time.Second - time.Nanosecond)
		synctest.Wait()
		if early.Err() != nil || child.Err() != nil {
			t.Fatalf("before its deadline: Err %v, a child's %v; want nil", early.Err(), child.Err())
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		<-early.Done()
		<-child.Done()
		if !errors.Is(early.Err(), context.DeadlineExceeded) || !errors.Is(context.Cause(early), context.DeadlineExceeded) ||
			!errors.Is(child.Err(), context.DeadlineExceeded) {
			t.Errorf("at its deadline: Err %v, Cause %v, a child's Err %v; want DeadlineExceeded", early.Err(), context.Cause(early), child.Err())
		}
		if late.Err() != nil {
			t.Errorf("a later deadline ended early: %v", late.Err())
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if !errors.Is(late.Err(), context.DeadlineExceeded) {
			t.Errorf("the later call at its deadline: %v, want DeadlineExceeded", late.Err())
		}
	})
}

// TestCallContextAnswered: a call answered before its deadline is ended
// Canceled and leaves the deadlines; the next call's deadline still
// comes on time; AfterFunc runs once at the end unless stopped.
func TestCallContextAnswered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var ds callDeadlines
		defer ds.stop()
		first, second := timedCall(&ds, time.Second), timedCall(&ds, 3*time.Second)
		ran, stopped := make(chan struct{}), false
		context.AfterFunc(first, func() { close(ran) })
		stop := first.AfterFunc(func() { stopped = true })
		if !stop() {
			t.Error("stop before the end reported false")
		}
		ds.remove(first)
		first.end(context.Canceled)
		<-ran
		ds.mu.Lock()
		left := len(ds.calls)
		ds.mu.Unlock()
		if !errors.Is(first.Err(), context.Canceled) || left != 1 {
			t.Errorf("an answered call: Err %v, %d deadlines left; want Canceled, 1", first.Err(), left)
		}
		time.Sleep(3*time.Second - time.Nanosecond)
		synctest.Wait()
		if second.Err() != nil {
			t.Fatalf("before its deadline: %v", second.Err())
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if !errors.Is(second.Err(), context.DeadlineExceeded) || stopped {
			t.Errorf("at its deadline: %v (a stopped AfterFunc ran: %v); want DeadlineExceeded", second.Err(), stopped)
		}
		if first.AfterFunc(func() {}) == nil {
			t.Error("AfterFunc on an ended context returned no stop function")
		}
	})
}

// TestCallPartsOneAllocation: a session call's context, the transport
// stream in it and its reply are made in one allocation, and the context's
// values in one more (three before, and the reply apart).
func TestCallPartsOneAllocation(t *testing.T) {
	ss := &session{ctx: context.Background(), values: context.Background()}
	call := &djinnpb.SessionCall{Id: 1, Method: "/djinn.v1.LockService/Unlock"}
	n := testing.AllocsPerRun(100, func() {
		p := ss.callContext(call)
		p.reply.Id = call.GetId()
	})
	if n > 2 {
		t.Fatalf("a call's parts: %.0f allocations, want 2 (its parts and its context's values)", n)
	}
}
