package client_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/internal/server/servertest"
)

// notReadyYet is the error of a server still starting, as the client
// makes it, for a find that stands in for one.
func notReadyYet(t *testing.T) error {
	t.Helper()
	s := servertest.OpenWaiting(t, servertest.Start(t, servertest.Config(t))) // no service id until a member adds it
	err := servertest.Dial(t, s.Addr()).Ready(t.Context())
	if !errors.Is(err, client.ErrNotReady) || !errors.Is(err, djinn.ErrUnavailable) {
		t.Fatalf("Ready of a server with no service id: %v, want not ready and unavailable", err)
	}
	if addr, ok := client.NotReadyServer(err); !ok || addr != s.Addr() {
		t.Fatalf("NotReadyServer(%v) = %q, %v; want %s", err, addr, ok, s.Addr())
	}
	if !strings.Contains(err.Error(), "no service id") {
		t.Errorf("error %q: want what the server waits for", err)
	}
	return err
}

// TestReady: a started server is ready; one that waits to be added to a
// cluster answers that it is still starting, naming itself.
func TestReady(t *testing.T) {
	s := servertest.Start(t, servertest.Config(t))
	if err := servertest.Dial(t, s.Addr()).Ready(t.Context()); err != nil {
		t.Errorf("Ready of a started server: %v", err)
	}
	notReadyYet(t)
}

// TestStatus: one Status answer says whether the server is ready and
// names each service it runs, as the Client's finders do; on a server
// still starting, it says not ready, and names no service.
func TestStatus(t *testing.T) {
	s := servertest.Start(t, servertest.Config(t))
	c := servertest.Dial(t, s.Addr())
	st, err := c.Status(t.Context())
	if err != nil || st.Ready() != nil || st.Proto().GetNodeId() != s.NodeID() {
		t.Fatalf("Status of a started server: %v, %v", st, err)
	}
	m, err := st.TransactionManager()
	if want, werr := c.TransactionManager(t.Context()); err != nil || werr != nil || !m.Equal(want) {
		t.Errorf("transaction manager %v, %v; the client finds %v, %v", m, err, want, werr)
	}
	refs := map[string]func() (djinn.Ref, error){
		"lock service":             func() (djinn.Ref, error) { l, err := st.LockService(); return refOf(l, err) },
		"lookup service":           func() (djinn.Ref, error) { r, err := st.Lookup(); return refOf(r, err) },
		"lookup discovery service": func() (djinn.Ref, error) { d, err := st.LookupDiscovery(); return refOf(d, err) },
	}
	for what, ref := range refs {
		if r, err := ref(); err != nil || r.Service != m.Ref().Service || r.Endpoint != s.Addr() {
			t.Errorf("%s: %v, %v; want the cluster's service id, at %s", what, r, err, s.Addr())
		}
	}

	starting := servertest.OpenWaiting(t, s) // no service id until a member adds it
	st, err = servertest.Dial(t, starting.Addr()).Status(t.Context())
	if err != nil || !errors.Is(st.Ready(), client.ErrNotReady) {
		t.Fatalf("Status of a server waiting to be added: %v, %v; want it not ready", st, err)
	}
	if l, err := st.LockService(); !errors.Is(err, client.ErrNotReady) {
		t.Errorf("lock service of a server waiting to be added: %v, %v; want not ready", l, err)
	}
}

func refOf(s interface{ Ref() djinn.Ref }, err error) (djinn.Ref, error) {
	if err != nil {
		return djinn.Ref{}, err
	}
	return s.Ref(), nil
}

// TestWaitReady: WaitReady asks again, with a backoff, while the server is
// still starting; WaitStarted also while it does not answer at all (not
// listening yet). Each says once what it waits for; it stops at the first
// other answer, and gives up, saying so, when its time runs out. Time is
// the bubble's.
func TestWaitReady(t *testing.T) {
	starting := notReadyYet(t)
	unanswered := djinn.Errorf(djinn.Unavailable, "connection refused")
	refused := djinn.Errorf(djinn.PermissionDenied, "not an operator")
	for _, tc := range []struct {
		name    string
		started bool    // WaitStarted, not WaitReady
		answers []error // then starting forever
		limit   time.Duration
		want    error
		tries   int
		waited  int
	}{
		{name: "ready at once", answers: []error{nil}, limit: time.Minute, tries: 1},
		{name: "ready after three", answers: []error{starting, starting, starting, nil}, limit: time.Minute, tries: 4, waited: 1},
		{name: "another error ends it", answers: []error{starting, unanswered}, limit: time.Minute, want: unanswered, tries: 2, waited: 1},
		{name: "no answer ends it", answers: []error{unanswered}, limit: time.Minute, want: unanswered, tries: 1},
		{name: "never ready", limit: 10 * time.Second, want: client.ErrNotReady, waited: 1},
		{name: "no limit asks once", limit: 0, want: client.ErrNotReady, tries: 1},
		{name: "started: not listening, then starting, then ready", started: true, answers: []error{unanswered, unanswered, starting, nil}, limit: time.Minute, tries: 4, waited: 1},
		{name: "started: a definite error ends it", started: true, answers: []error{unanswered, refused}, limit: time.Minute, want: refused, tries: 2, waited: 1},
		{name: "started: never ready", started: true, answers: []error{unanswered}, limit: 10 * time.Second, want: client.ErrNotReady, waited: 1},
		{name: "started: never listening", started: true, answers: slices.Repeat([]error{unanswered}, 1000), limit: 10 * time.Second, want: unanswered, waited: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				tries, waited := 0, 0
				start := time.Now()
				wait := client.WaitReady[int]
				if tc.started {
					wait = client.WaitStarted[int]
				}
				v, err := wait(t.Context(), tc.limit, func(error) { waited++ }, func(ctx context.Context) (int, error) {
					tries++
					if tries <= len(tc.answers) {
						return tries, tc.answers[tries-1]
					}
					return tries, starting
				})
				if !errors.Is(err, tc.want) || (tc.want == nil && v != tc.tries) {
					t.Fatalf("WaitReady: %v, %v; want %v after %d tries", v, err, tc.want, tc.tries)
				}
				if tc.tries > 0 && tries != tc.tries {
					t.Errorf("%d tries, want %d", tries, tc.tries)
				}
				if waited != tc.waited {
					t.Errorf("said %d times what it waits for, want %d", waited, tc.waited)
				}
				if strings.Contains(tc.name, "never") {
					if elapsed := time.Since(start); elapsed != tc.limit {
						t.Errorf("gave up after %s, want %s", elapsed, tc.limit)
					}
					if !strings.Contains(err.Error(), "gave up after waiting 10s") || tries < 5 {
						t.Errorf("gave up after %d tries with %q: want several tries and how long it waited", tries, err)
					}
				}
			})
		})
	}
}

// TestWaitReadyJoined: a manager asked for while its server waits to be
// added to a cluster is found once a member adds it.
func TestWaitReadyJoined(t *testing.T) {
	first := servertest.Start(t, servertest.Config(t))
	s := servertest.OpenWaiting(t, first) // no service id until a member adds it
	c := servertest.Dial(t, s.Addr())
	waiting := make(chan error, 1)
	type found struct {
		m   *client.TransactionManager
		err error
	}
	done := make(chan found, 1)
	go func() {
		m, err := client.WaitReady(t.Context(), servertest.Timeout, func(err error) { waiting <- err }, c.TransactionManager)
		done <- found{m, err}
	}()
	if err := <-waiting; !errors.Is(err, client.ErrNotReady) {
		t.Fatalf("waits for %v, want not ready", err)
	}
	op := servertest.Dial(t, first.Addr(), servertest.Operator(t, first))
	if err := op.AddMember(t.Context(), client.NewMember{NodeID: s.NodeID(), RaftAddress: s.RaftAddr(), Endpoint: s.Addr()}); err != nil {
		t.Fatal(err)
	}
	f := <-done
	if f.err != nil || f.m.Ref().Service.IsZero() {
		t.Fatalf("manager once added: %v, %v", f.m, f.err)
	}
}

// TestWaitBoundsTheFirstTry: a first try that gets no answer (a port
// that takes the connection and never speaks) is given up at the limit,
// saying so, not waited for as long as the caller's context allows.
func TestWaitBoundsTheFirstTry(t *testing.T) {
	for _, wait := range map[string]func(context.Context, time.Duration, func(error), func(context.Context) (int, error)) (int, error){
		"WaitReady": client.WaitReady[int], "WaitStarted": client.WaitStarted[int],
	} {
		synctest.Test(t, func(t *testing.T) {
			start := time.Now()
			_, err := wait(t.Context(), 3*time.Second, nil, func(ctx context.Context) (int, error) {
				<-ctx.Done() // no answer
				return 0, djinn.Errorf(djinn.Unavailable, "no answer: %v", ctx.Err())
			})
			if err == nil || !strings.Contains(err.Error(), "gave up after waiting 3s") {
				t.Errorf("a first try without an answer: %v, want it given up after the limit", err)
			}
			if elapsed := time.Since(start); elapsed != 3*time.Second {
				t.Errorf("gave up after %s, want the limit, 3s", elapsed)
			}
		})
	}
}

// TestWaitStoppedByItsContext: a wait its caller's context ends (an
// interrupt) says it stopped, and why, not that it gave up after the
// whole limit.
func TestWaitStoppedByItsContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancelCause(t.Context())
		unanswered := djinn.Errorf(djinn.Unavailable, "connection refused")
		time.AfterFunc(3*time.Second, func() { cancel(errors.New("interrupt signal received")) })
		_, err := client.WaitStarted(ctx, time.Minute, nil, func(context.Context) (int, error) { return 0, unanswered })
		if !errors.Is(err, unanswered) || strings.Contains(err.Error(), "gave up after waiting") || !strings.Contains(err.Error(), "stopped waiting: interrupt signal received") {
			t.Fatalf("WaitStarted stopped by its context: %v; want the last answer and that it stopped waiting, and why", err)
		}
	})
}
