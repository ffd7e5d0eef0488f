package client_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/internal/server"
	"github.com/djinn-go/djinn/internal/server/servertest"
)

// TestPullFollowsTheCluster: a Pull whose serving member goes away goes on
// through the others, after the last event it yielded, as every client
// call of a client dialled at several endpoints does: it yields each
// event once, in order, and no error, and ends with nil when its context
// does.
func TestPullFollowsTheCluster(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 3*servertest.Failover)
	defer cancel()
	c, dead := dialServingLeaderFirst(ctx, t)
	reg, err := c.Mailbox().Register(ctx, 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	src := djinn.Ref{Service: djinn.NewID(), Object: djinn.NewID()}
	notify := func(seq int64) {
		t.Helper()
		servertest.EventuallyWithin(t, servertest.Failover, "an event stored", func() bool {
			err := client.Notify(ctx, c, reg.Listener, &client.RemoteEvent{Source: src, ID: 1, Seq: seq})
			if err != nil && !errors.Is(err, djinn.ErrUnavailable) {
				t.Fatalf("notify %d: %v", seq, err)
			}
			return err == nil
		})
	}
	notify(1)
	pullCtx, stop := context.WithCancel(ctx)
	got, ended := make(chan client.StoredEvent), make(chan error, 1)
	go func() {
		for e, err := range reg.Pull(pullCtx, 0) {
			if err != nil {
				ended <- err
				return
			}
			select {
			case got <- e:
			case <-pullCtx.Done():
			}
		}
		ended <- nil
	}()
	next := func(what string) client.StoredEvent {
		t.Helper()
		select {
		case e := <-got:
			return e
		case err := <-ended:
			t.Fatalf("%s: Pull ended with %v", what, err)
		case <-ctx.Done():
			t.Fatalf("%s: none came", what)
		}
		return client.StoredEvent{}
	}
	if e := next("the event stored before"); e.Index != 1 || e.Event.Seq != 1 {
		t.Fatalf("first event: index %d seq %d, want 1 1", e.Index, e.Event.Seq)
	}
	if err := dead.Close(); err != nil {
		t.Fatalf("close the serving member: %v", err)
	}
	notify(2)
	if e := next("the event stored after the member went away"); e.Index != 2 || e.Event.Seq != 2 {
		t.Fatalf("after failover: index %d seq %d, want 2 2 (each event once, in order)", e.Index, e.Event.Seq)
	}
	stop()
	if err := <-ended; err != nil {
		t.Fatalf("Pull ended by its context with %v, want nil", err)
	}
}

// TestReceiveFollowsTheCluster: the Receives of two registrations, sharing
// their connection's delivery stream, go on at the next leader when the
// serving member goes away: each handles every event of its registration
// once, in order (what was handled is not handed again within a Receive),
// and ends with nil when its context does.
func TestReceiveFollowsTheCluster(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 3*servertest.Failover)
	defer cancel()
	c, dead := dialServingLeaderFirst(ctx, t)
	src := djinn.Ref{Service: djinn.NewID(), Object: djinn.NewID()}
	type got struct {
		reg int
		e   client.StoredEvent
	}
	events, ended := make(chan got), make(chan error, 2)
	recvCtx, stop := context.WithCancel(ctx)
	var regs []*client.MailboxRegistration
	for i := range 2 {
		reg, err := c.Mailbox().Register(ctx, 10*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		regs = append(regs, reg)
		go func() {
			ended <- reg.Receive(recvCtx, func(_ context.Context, e client.StoredEvent) error {
				select {
				case events <- got{i, e}:
				case <-recvCtx.Done():
				}
				return nil
			})
		}()
	}
	notify := func(seq int64) {
		t.Helper()
		for _, reg := range regs {
			servertest.EventuallyWithin(t, servertest.Failover, "an event stored", func() bool {
				err := client.Notify(ctx, c, reg.Listener, &client.RemoteEvent{Source: src, ID: 1, Seq: seq})
				if err != nil && !errors.Is(err, djinn.ErrUnavailable) {
					t.Fatalf("notify %d: %v", seq, err)
				}
				return err == nil
			})
		}
	}
	take := func(what string, seq int64) {
		t.Helper()
		seen := map[int]bool{}
		for len(seen) < len(regs) {
			select {
			case g := <-events:
				if seen[g.reg] || g.e.Index != uint64(seq) || g.e.Event.Seq != seq {
					t.Fatalf("%s: registration %d got index %d seq %d, want index and seq %d, once", what, g.reg, g.e.Index, g.e.Event.Seq, seq)
				}
				seen[g.reg] = true
			case err := <-ended:
				t.Fatalf("%s: Receive ended with %v", what, err)
			case <-ctx.Done():
				t.Fatalf("%s: %d of %d registrations got it", what, len(seen), len(regs))
			}
		}
	}
	notify(1)
	take("the first events", 1)
	if err := dead.Close(); err != nil {
		t.Fatalf("close the serving member: %v", err)
	}
	notify(2)
	take("the events stored after the member went away", 2)
	stop()
	for range regs {
		if err := <-ended; err != nil {
			t.Fatalf("Receive ended by its context with %v, want nil", err)
		}
	}
}

// dialServingLeaderFirst starts a cluster of three and dials it with its
// serving leader first, so a client's calls and streams go there until it
// goes away; it returns the client (closed when the test ends) and that
// leader.
func dialServingLeaderFirst(ctx context.Context, t *testing.T) (*client.Client, *server.Server) {
	ss := servertest.StartCluster(t, 3, servertest.Steady)
	dead := servertest.ServingLeader(t, ss...)
	addrs := []string{dead.Addr()}
	for _, s := range ss {
		if s != dead {
			addrs = append(addrs, s.Addr())
		}
	}
	c, err := client.Dial(ctx, strings.Join(addrs, ","))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, dead
}
