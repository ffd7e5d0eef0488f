package renewal_test

import (
	"bytes"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/renewal"
	"github.com/djinn-go/djinn/internal/state"
	"github.com/djinn-go/djinn/internal/state/statetest"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// restored returns a fresh machine restored from a snapshot of m.
func restored(t *testing.T, log *statetest.Log) statetest.Service[*renewal.State] {
	t.Helper()
	m2, err := statetest.Restart(log, newRenewalState)
	if err != nil {
		t.Fatal(err)
	}
	return m2
}

func sortedLeases(t *testing.T, s *renewal.State, id djinn.ID) []renewal.ClientLease {
	t.Helper()
	ls, err := s.Leases(id)
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(ls, func(a, b renewal.ClientLease) int { return bytes.Compare(a.Cookie[:], b.Cookie[:]) })
	for i := range ls {
		ls[i].LastErr = nil // the leader's, not replicated
	}
	return ls
}

// TestRestart: LR.2: sets, their client leases with desired expirations and
// renew durations, listeners, sequence numbers and undelivered events
// survive a snapshot and restore; a service over the restored state goes
// on renewing and delivering.
func TestRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, renewal.Config{})
		ll := f.landlord(time.Minute)
		st := f.create(time.Hour)
		_, fail := f.listen(st, renewal.FailureEventID, "fail", 0)
		_, warn := f.listen(st, renewal.WarningEventID, "warn", 50*time.Minute)
		l1, c1 := ll.grant(time.Minute)
		l2, c2 := ll.grant(time.Minute)
		l3, c3 := ll.grant(time.Minute)
		f.mustRenewFor(st, l1, djinn.Forever, time.Minute)
		f.mustRenewFor(st, l2, 30*time.Minute, 2*time.Minute)
		f.mustRenewFor(st, l3, djinn.Forever, djinn.Any)
		desired2 := time.Now().Add(30 * time.Minute)
		f.failNow(st, ll)
		f.failNow(st, ll)
		f.listener.setAnswer(func(to djinn.Ref, _ *djinnpb.RemoteEvent) error {
			if to == fail {
				return djinn.Errorf(djinn.Unavailable, "listener unreachable")
			}
			return nil
		})
		lost := f.failNow(st, ll) // sequence 3, undelivered
		advance(5 * time.Minute)

		m2 := restored(t, f.log.Log)
		f.stop()
		before, err := f.log.State.Get(st.Info.ID)
		if err != nil {
			t.Fatal(err)
		}
		after, err := m2.State.Get(st.Info.ID)
		if err != nil {
			t.Fatalf("set not restored: %v", err)
		}
		if after.Cookie != before.Cookie || after.Leases != 3 {
			t.Fatalf("restored set %+v, want %+v", after, before)
		}
		for eid := range before.Listeners {
			b, a := before.Listeners[eid], after.Listeners[eid]
			if !proto.Equal(a.Target, b.Target) || !bytes.Equal(a.Handback, b.Handback) || a.MinWarning != b.MinWarning || a.Next != b.Next || a.Pending != b.Pending {
				t.Fatalf("restored listener %d %+v, want %+v", eid, a, b)
			}
		}
		if p := after.Listeners[renewal.FailureEventID]; p.Next != 4 || p.Pending != 1 {
			t.Fatalf("restored failure registration: next %d pending %d, want 4 and 1", p.Next, p.Pending)
		}
		if got, want := sortedLeases(t, m2.State, st.Info.ID), sortedLeases(t, f.log.State, st.Info.ID); !slices.EqualFunc(got, want, func(a, b renewal.ClientLease) bool {
			return a.Cookie == b.Cookie && a.Actual.Equal(b.Actual) && a.Desired.Equal(b.Desired) && a.Renew == b.Renew && a.Format == b.Format
		}) {
			t.Fatalf("restored leases %+v, want %+v", got, want)
		}
		if li, ok := m2.M.Leases.Lookup(st.Info.Cookie, time.Now()); !ok || li.Owner.ID != st.Info.ID {
			t.Fatalf("set lease not restored: %+v %v", li, ok)
		}

		// A service over the restored machine: the listener is back.
		f.listener.setAnswer(nil)
		f2 := newFixtureOver(t, m2, f.landlords, f.listener, renewal.Config{})
		defer f2.stop()
		synctest.Wait()
		evs := f.listener.events(fail)
		if len(evs) != 3 || evs[2].GetSequence() != 3 || cookieOf(failureOf(t, evs[2]).GetLease()) != lost {
			t.Fatalf("failure events after restart %v, want the undelivered one (sequence 3)", evs)
		}
		f2.failNow(st, ll)
		if evs := f.listener.events(fail); len(evs) != 4 || evs[3].GetSequence() != 4 {
			t.Fatalf("failure events %v, want sequence numbers going on at 4", evs)
		}
		reg, _ := f2.listen(st, renewal.FailureEventID, "fail2", 0)
		if reg.GetSequence() != 4 {
			t.Fatalf("registration after restart returned sequence %d, want 4", reg.GetSequence())
		}

		calls, _, _, _ := ll.stats()
		advance(time.Until(desired2))
		for _, c := range []djinn.ID{c1, c3} {
			if f2.leaseOf(st, c) == nil {
				t.Fatalf("lease %s left the set after the restart", c)
			}
			if !ll.expiration(c).After(time.Now()) {
				t.Fatalf("lease %s lapsed after the restart", c)
			}
		}
		if f2.leaseOf(st, c2) != nil {
			t.Fatal("lease still in the set after its restored desired expiration")
		}
		after2, lapsed, _, _ := ll.stats()
		if after2 <= calls || lapsed != 0 {
			t.Fatalf("after the restart: calls %d→%d, lapsed %d", calls, after2, lapsed)
		}
		// The restored warning registration warns (at 10m, set lease 1h,
		// minWarning 50m).
		if evs := f.listener.events(warn); len(evs) != 1 || evs[0].GetSequence() != 1 {
			t.Fatalf("warnings %v, want one with sequence 1", evs)
		}
	})
}

// TestSnapshotOutlivesDelivery: a snapshot's writer runs concurrently with
// later commands (replica.StateMachine): events delivered after the
// snapshot was taken are still in it, as they were.
func TestSnapshotOutlivesDelivery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, renewal.Config{})
		defer f.stop()
		ll := f.landlord(time.Minute)
		st := f.create(time.Hour)
		_, fail := f.listen(st, renewal.FailureEventID, "fail", 0)
		f.listener.setAnswer(func(djinn.Ref, *djinnpb.RemoteEvent) error {
			return djinn.Errorf(djinn.Unavailable, "listener unreachable")
		})
		for range 3 {
			f.failNow(st, ll)
		}
		write, err := f.log.M.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		f.listener.setAnswer(nil)
		advance(time.Minute)
		if n := len(f.listener.events(fail)); n != 3 || f.info(st).Listeners[renewal.FailureEventID].Pending != 0 {
			t.Fatalf("%d delivered, %d pending; want 3 and 0", n, f.info(st).Listeners[renewal.FailureEventID].Pending)
		}
		var b bytes.Buffer
		if err := write(&b); err != nil {
			t.Fatalf("writing a snapshot taken before delivery: %v", err)
		}
		m := state.New()
		m2 := statetest.Service[*renewal.State]{Log: statetest.Over(m), State: statetest.Add(m, newRenewalState(m))}
		if err := m.Restore(&b); err != nil {
			t.Fatal(err)
		}
		in, err := m2.State.Get(st.Info.ID)
		if err != nil {
			t.Fatal(err)
		}
		if p := in.Listeners[renewal.FailureEventID].Pending; p != 3 {
			t.Fatalf("the snapshot holds %d pending events, want the 3 pending when it was taken", p)
		}
		// The restored events are the ones pending then: a service over the
		// restored machine delivers them again, whole.
		lis := &listener{got: map[djinn.Ref][]*djinnpb.RemoteEvent{}}
		f2 := newFixtureOver(t, m2, f.landlords, lis, renewal.Config{})
		defer f2.stop()
		synctest.Wait()
		evs := lis.events(fail)
		if len(evs) != 3 {
			t.Fatalf("%d events delivered from the restored snapshot, want 3", len(evs))
		}
		for i, ev := range evs {
			if ev.GetSequence() != int64(i+1) || ev.GetEventId() != renewal.FailureEventID || failureOf(t, ev).GetLease() == nil {
				t.Fatalf("restored event %d: %v", i, ev)
			}
		}
	})
}

// TestNewTermRenewsTakenLeases: a new leader term over the same state puts
// back leases whose renewal the previous term had in flight (promotion), so
// they are renewed again.
func TestNewTermRenewsTakenLeases(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, renewal.Config{})
		ll := f.landlord(time.Minute)
		st := f.create(time.Hour)
		l, c := ll.grant(30 * time.Second)
		f.mustRenewFor(st, l, djinn.Forever, time.Minute)
		release := ll.Hold()
		advance(25 * time.Second)
		f.stop() // leadership ends with the renewal in flight
		release()
		f2 := newFixtureOver(t, f.log, f.landlords, f.listener, renewal.Config{})
		defer f2.stop()
		advance(5 * time.Minute)
		if f2.leaseOf(st, c) == nil {
			t.Fatal("lease left the set")
		}
		if !ll.expiration(c).After(time.Now()) {
			t.Fatalf("lease taken by the previous term was never renewed again: expires %v", ll.expiration(c))
		}
	})
}
