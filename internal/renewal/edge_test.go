package renewal_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/lease"
	"github.com/djinn-go/djinn/internal/renewal"
	"github.com/djinn-go/djinn/internal/state"
	"github.com/djinn-go/djinn/internal/state/statetest"
	"github.com/djinn-go/djinn/proto/djinnpb"
	"github.com/djinn-go/djinn/proto/statepb"
)

// LR.2: a set's lease is refused whatever landlord reference it names:
// renewals reach a landlord by endpoint and cookie, so a forged service id
// must not let a set renew its own lease.
func TestOwnLeaseUnderForgedLandlord(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, renewal.Config{})
		defer f.stop()
		a, b := f.create(time.Hour), f.create(time.Hour)
		forged := lease.Proto(djinn.Ref{Endpoint: a.Lease.GetLandlord().GetEndpoint(), Service: djinn.NewID(), Object: lease.LandlordID}, cookieOf(a.Lease), time.Hour)
		for _, st := range []renewal.Set{a, b} {
			err := f.renewFor(st, forged, djinn.Forever, djinn.Forever)
			wantKind(t, err, djinn.InvalidArgument)
		}
	})
}

// A landlord's leases are renewed at the endpoint the latest lease named:
// a landlord that moved is followed.
func TestLandlordEndpointFollowsLatest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, renewal.Config{})
		defer f.stop()
		ll := f.landlord(time.Hour)
		st := f.create(time.Hour)
		l1, _ := ll.grant(time.Hour)
		f.mustRenewFor(st, l1, djinn.Forever, djinn.Forever)
		const moved = "127.0.0.2:9"
		l2, _ := ll.grant(time.Hour)
		l2.Landlord.Endpoint = moved
		f.mustRenewFor(st, l2, djinn.Forever, djinn.Forever)
		for _, cl := range f.leases(st) {
			if got := cl.GetLease().GetLandlord().GetEndpoint(); got != moved {
				t.Fatalf("lease listed at landlord endpoint %s, want the latest %s", got, moved)
			}
		}
	})
}

// LR.2.1: a minimum warning longer than the set lease has left (Forever
// included) warns at once.
func TestWarningForeverAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, renewal.Config{})
		defer f.stop()
		st := f.create(time.Hour)
		_, warn := f.listen(st, renewal.WarningEventID, "warn", djinn.Forever)
		synctest.Wait()
		if n := len(f.listener.events(warn)); n != 1 {
			t.Fatalf("%d warnings for a minimum warning of Forever, want 1 at once", n)
		}
	})
}

// LR.2.1: a set lease renewed to an earlier expiration than the one warned
// of is warned of again.
func TestWarningAfterShorterRenewal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, renewal.Config{})
		defer f.stop()
		st := f.create(3 * time.Minute)
		_, warn := f.listen(st, renewal.WarningEventID, "warn", time.Minute)
		advance(2*time.Minute + time.Second)
		if n := len(f.listener.events(warn)); n != 1 {
			t.Fatalf("%d warnings, want 1", n)
		}
		if _, err := f.lessor.Renew(context.Background(), cookieOf(st.Lease), 30*time.Second); err != nil {
			t.Fatal(err)
		}
		advance(time.Second)
		if n := len(f.listener.events(warn)); n != 2 {
			t.Fatalf("%d warnings after renewing the set lease to an earlier expiration, want 2", n)
		}
	})
}

// A set too big for one snapshot record is written in several and
// restored whole.
func TestBigSetSnapshot(t *testing.T) {
	m := state.New()
	statetest.Add(m, newRenewalState(m))
	svc := djinn.NewID()
	m.Apply(1, &statepb.Command{Op: &statepb.Command_Init{Init: &statepb.Init{ServiceId: svc[:]}}})
	now := time.Now().UnixNano()
	set, cookie := djinn.NewID(), djinn.NewID()
	m.Apply(2, &statepb.Command{NowUnixNanos: now, Op: &statepb.Command_RenewalCreate{RenewalCreate: &statepb.RenewalCreate{
		SetId: set[:], Cookie: cookie[:], ExpiresUnixNanos: now + int64(time.Hour)}}})
	ll := &djinnpb.Ref{Endpoint: "127.0.0.1:9", ServiceId: svc[:], ObjectId: lease.LandlordID[:]}
	const n = 70_000 // more than two records' worth
	for i := range n {
		c := djinn.NewID()
		if err, ok := m.Apply(uint64(3+i), &statepb.Command{NowUnixNanos: now, Op: &statepb.Command_RenewalAdd{RenewalAdd: &statepb.RenewalAdd{
			SetId: set[:], Landlord: ll, Cookie: c[:], ExpiresUnixNanos: now + int64(time.Minute),
			DesiredUnixNanos: int64(djinn.Forever), RenewNanos: int64(djinn.Forever),
		}}}).(error); ok {
			t.Fatal(err)
		}
	}
	write, err := m.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := write(&buf); err != nil {
		t.Fatal(err)
	}
	r := state.New()
	rs := statetest.Add(r, newRenewalState(r))
	if err := r.Restore(&buf); err != nil {
		t.Fatal(err)
	}
	if sets, leases := rs.Len(); sets != 1 || leases != n {
		t.Fatalf("restored %d sets, %d leases; want 1 and %d", sets, leases, n)
	}
}

// LR.2 getLeases and a set's description are confirmed with the leader
// lease, or a quorum, after they are read: a deposed leader that has not
// heard of its successor (which may have removed a lease from the set, or
// cancelled the set) answers Unavailable, not the set as it last knew it.
func TestDeposedLeaderDescribesNoSet(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, renewal.Config{})
		defer f.stop()
		st := f.create(time.Hour)
		ctx := context.Background()
		if _, err := f.svc.Leases(ctx, st.Info.ID); err != nil {
			t.Fatalf("getLeases at the leader: %v", err)
		}
		f.log.Deposed.Store(true)
		if ls, err := f.svc.Leases(ctx, st.Info.ID); !errors.Is(err, djinn.ErrUnavailable) {
			t.Errorf("getLeases at a deposed leader: %d leases, %v; want Unavailable", len(ls), err)
		}
		if _, err := f.svc.Get(ctx, st.Info.ID); !errors.Is(err, djinn.ErrUnavailable) {
			t.Errorf("the set at a deposed leader: %v; want Unavailable", err)
		}
	})
}

// "No such set" is an answer from this node's state too: a deposed leader
// that has not heard of its successor (which may have created the set)
// answers Unavailable to getLeases and the set, not NotFound.
func TestDeposedLeaderDeniesNoSet(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, renewal.Config{})
		defer f.stop()
		f.create(time.Hour)
		ctx := context.Background()
		if _, err := f.svc.Get(ctx, djinn.NewID()); !errors.Is(err, djinn.ErrNoSuchObject) {
			t.Fatalf("an unknown set at the leader: %v; want NoSuchObject", err)
		}
		f.log.Deposed.Store(true)
		if _, err := f.svc.Leases(ctx, djinn.NewID()); !errors.Is(err, djinn.ErrUnavailable) {
			t.Errorf("getLeases of an unknown set at a deposed leader: %v; want Unavailable", err)
		}
		if _, err := f.svc.Get(ctx, djinn.NewID()); !errors.Is(err, djinn.ErrUnavailable) {
			t.Errorf("an unknown set at a deposed leader: %v; want Unavailable", err)
		}
	})
}
