package mailbox_test

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/mailbox"
	"github.com/djinn-go/djinn/internal/state"
	"github.com/djinn-go/djinn/internal/state/statetest"
	"github.com/djinn-go/djinn/proto/statepb"
)

// puller is a pull stream run by a test: what it received, and how it
// ended.
type puller struct {
	mu   sync.Mutex
	seqs []int64
	done chan error
	stop context.CancelFunc
}

func (f *fixture) pull(id djinn.ID, after uint64) *puller {
	ctx, cancel := context.WithCancel(context.Background())
	p := &puller{done: make(chan error, 1), stop: cancel}
	go func() {
		p.done <- f.svc.Pull(ctx, id, after, 0, func(b []mailbox.Stored) error {
			p.mu.Lock()
			defer p.mu.Unlock()
			for _, s := range b {
				p.seqs = append(p.seqs, s.Event.Sequence)
			}
			return nil
		})
	}()
	synctest.Wait()
	return p
}

func (p *puller) got() []int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.seqs)
}

// ended returns how the stream ended, or nil and false if it is running.
func (p *puller) ended() (error, bool) {
	select {
	case err := <-p.done:
		return err, true
	default:
		return nil, false
	}
}

// Push and pull are exclusive (River's MailboxPullRegistration): enabling
// delivery to a target supersedes the pull stream, which ends with
// InvalidIterator; the target then gets the events, also those the stream
// received and did not acknowledge.
func TestEMPullThenEnableSupersedesThePullStream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, 1000)
		defer f.stop()
		r := f.register(time.Hour)
		f.notify(r, ev(1, 1))
		p := f.pull(r.ID, 0)
		defer p.stop()
		f.notify(r, ev(1, 2))
		synctest.Wait()
		if got := p.got(); !slices.Equal(got, []int64{1, 2}) {
			t.Fatalf("pulled %v, want 1 2", got)
		}
		tp, tref := target("t")
		if err := f.svc.EnableDelivery(context.Background(), r.ID, tp); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		err, ended := p.ended()
		if !ended || !errors.Is(err, djinn.ErrInvalidIterator) || !bytes.Contains([]byte(err.Error()), []byte("superseded")) {
			t.Fatalf("pull stream after enable: ended %v with %v; want invalid iterator saying it was superseded", ended, err)
		}
		f.notify(r, ev(1, 3))
		synctest.Wait()
		if got := f.sink.seqs(tref); !slices.Equal(got, []int64{1, 2, 3}) {
			t.Fatalf("target got %v, want 1 2 3 (the unacknowledged ones again)", got)
		}
		if got := p.got(); !slices.Equal(got, []int64{1, 2}) {
			t.Fatalf("the superseded stream got %v after it ended", got)
		}
	})
}

// Push and pull are exclusive: taking a pull stream disables push delivery
// (the registration has no target afterwards) and returns only once the
// target is handed nothing more; the stream then gets every event.
func TestEMEnableThenPullDisablesDelivery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, 1000)
		defer f.stop()
		r := f.register(time.Hour)
		tp, tref := target("t")
		if err := f.svc.EnableDelivery(context.Background(), r.ID, tp); err != nil {
			t.Fatal(err)
		}
		f.notify(r, ev(1, 1))
		synctest.Wait()
		if got := f.sink.seqs(tref); !slices.Equal(got, []int64{1}) {
			t.Fatalf("target got %v, want 1", got)
		}
		p := f.pull(r.ID, 0)
		defer p.stop()
		if g, err := f.svc.Get(context.Background(), r.ID); err != nil || g.Target != nil {
			t.Fatalf("after pull: target %v %v, want delivery disabled", g.Target, err)
		}
		f.notify(r, ev(1, 2))
		synctest.Wait()
		if got := f.sink.seqs(tref); !slices.Equal(got, []int64{1}) {
			t.Fatalf("target got %v after the pull began, want only 1", got)
		}
		if got := p.got(); !slices.Contains(got, 2) {
			t.Fatalf("pulled %v, want 2", got)
		}
		if _, ended := p.ended(); ended {
			t.Fatal("the pull stream ended")
		}
	})
}

// A newer pull supersedes the older stream; disabling delivery does not
// (it makes no consumer).
func TestEMNewerPullSupersedesTheOlder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, 1000)
		defer f.stop()
		r := f.register(time.Hour)
		old := f.pull(r.ID, 0)
		defer old.stop()
		if err := f.svc.DisableDelivery(context.Background(), r.ID); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if err, ended := old.ended(); ended {
			t.Fatalf("disable ended the pull stream: %v", err)
		}
		newer := f.pull(r.ID, 0)
		defer newer.stop()
		if err, ended := old.ended(); !ended || !errors.Is(err, djinn.ErrInvalidIterator) {
			t.Fatalf("older stream after a newer pull: ended %v with %v; want invalid iterator", ended, err)
		}
		f.notify(r, ev(1, 1))
		synctest.Wait()
		if got := newer.got(); !slices.Equal(got, []int64{1}) {
			t.Fatalf("newer stream got %v, want 1", got)
		}
	})
}

// The rule lives in the replicated state: which pull stream is current
// survives a snapshot and restore, as it must for a new leader.
func TestEMPullNumberSurvivesASnapshot(t *testing.T) {
	log := statetest.New()
	st := statetest.Add(log.M, mailbox.NewState(log.M.Leases, mailbox.DefaultMaxStored, log.M.ServiceID))
	id, listener, cookie := djinn.NewID(), djinn.NewID(), djinn.NewID()
	if _, err := log.Propose(context.Background(), registerCmd(id, listener, cookie)); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := log.Propose(context.Background(), pullCmd(id)); err != nil {
			t.Fatal(err)
		}
	}
	write, err := log.M.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := write(&buf); err != nil {
		t.Fatal(err)
	}
	m := state.New()
	restored := statetest.Add(m, mailbox.NewState(m.Leases, mailbox.DefaultMaxStored, m.ServiceID))
	if err := m.Restore(&buf); err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]*mailbox.State{"original": st, "restored": restored} {
		if _, _, err := s.After(id, 3, 0, 10); err != nil {
			t.Errorf("%s: the third pull stream is not current: %v", name, err)
		}
		if _, _, err := s.After(id, 2, 0, 10); !errors.Is(err, djinn.ErrInvalidIterator) {
			t.Errorf("%s: the second pull stream is current: %v", name, err)
		}
	}
}

func registerCmd(id, listener, cookie djinn.ID) *statepb.Command {
	return &statepb.Command{Op: &statepb.Command_MailboxRegister{MailboxRegister: &statepb.MailboxRegister{
		RegistrationId: id[:], ListenerId: listener[:], Cookie: cookie[:],
		ExpiresUnixNanos: time.Now().Add(time.Hour).UnixNano(), HorizonUnixNanos: time.Now().Add(time.Hour).UnixNano(),
	}}}
}

func pullCmd(id djinn.ID) *statepb.Command {
	return &statepb.Command{Op: &statepb.Command_MailboxPull{MailboxPull: &statepb.MailboxPull{RegistrationId: id[:]}}}
}

// A pull stream waiting for a new event ends with Unavailable when this
// node stops leading, as a delivery stream does, so that its client pulls
// again at the next leader instead of waiting on a node that no longer
// stores events.
func TestEMPullEndsWithTheTerm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, 1000)
		r := f.register(time.Hour)
		f.notify(r, ev(1, 1))
		p := f.pull(r.ID, 0)
		defer p.stop()
		if got := p.got(); !slices.Equal(got, []int64{1}) {
			t.Fatalf("pulled %v, want 1", got)
		}
		if err, over := p.ended(); over {
			t.Fatalf("the pull stream ended with %v while the term went on", err)
		}
		f.stop()
		if err := <-p.done; !errors.Is(err, djinn.ErrUnavailable) {
			t.Fatalf("pull stream after the term ended with %v, want Unavailable", err)
		}
	})
}
