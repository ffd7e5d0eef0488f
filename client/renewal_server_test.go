package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/client/clienttest"
	"github.com/djinn-go/djinn/internal/server/servertest"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// These tests run the client against a real djinn server.

// renewalServer starts a server and returns a client of its lease renewal
// service.
func renewalServer(t *testing.T) (*client.Client, *client.RenewalService) {
	t.Helper()
	srv := servertest.Start(t, servertest.Config(t))
	c := servertest.Dial(t, srv.Addr())
	return c, c.RenewalService()
}

// testLandlord serves a landlord of its own, the grantor of the client
// leases the tests put in sets, on a loopback port until the test ends.
func testLandlord(t *testing.T, def, max time.Duration) *clienttest.Landlord {
	t.Helper()
	ll := clienttest.NewLandlord(def, max)
	stop, err := ll.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return ll
}

// grantFrom asks ll for a lease for d and holds it as a client would.
func grantFrom(t *testing.T, ll *clienttest.Landlord, d time.Duration) *client.Lease {
	t.Helper()
	sent := time.Now()
	pb, err := ll.Grant(d)
	if err != nil {
		t.Fatal(err)
	}
	l, err := client.LeaseFromProto(pb, sent)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// received is an event and when it arrived.
type received struct {
	ev *client.RemoteEvent
	at time.Time
}

// eventInbox is a listener hosted by the test that hands it what it is
// sent.
type eventInbox struct {
	l      *client.Listener
	events chan received
}

func newEventInbox(t *testing.T) *eventInbox {
	t.Helper()
	in := &eventInbox{events: make(chan received, 256)}
	l, err := client.Listen(t.Context(), "127.0.0.1:0", func(_ context.Context, ev *client.RemoteEvent) error {
		in.events <- received{ev, time.Now()}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	in.l = l
	return in
}

// next waits for the next event.
func (in *eventInbox) next(t *testing.T, what string) received {
	t.Helper()
	select {
	case r := <-in.events:
		return r
	case <-time.After(servertest.Timeout):
		t.Fatalf("waited %v for %s", servertest.Timeout, what)
		return received{}
	}
}

// leasesOf reads a set's client leases.
func leasesOf(t *testing.T, set *client.RenewalSet) []client.ClientLease {
	t.Helper()
	ls, err := set.Leases(ctxFor(t))
	if err != nil {
		t.Fatalf("get leases: %v", err)
	}
	return ls
}

// TestRenewalServerSets follows a set through LR.2: created, read back,
// filled, changed, emptied and destroyed with its lease.
func TestRenewalServerSets(t *testing.T) {
	t.Parallel()
	c, rs := renewalServer(t)
	ctx := ctxFor(t)
	ll := testLandlord(t, time.Hour, time.Hour)
	l := grantFrom(t, ll, time.Hour)

	set, err := rs.CreateSet(ctx, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if exp, latest := set.Lease().Expiration(), time.Now().Add(time.Hour); exp.After(latest) || !exp.After(time.Now()) {
		t.Errorf("LR.2 the set's lease expires %v: want no later than asked (%v)", exp, latest)
	}
	again, err := rs.Set(ctx, set.ID())
	if err != nil {
		t.Fatal(err)
	}
	if !again.Equal(set) || !again.Lease().Equal(set.Lease()) || again.ID() != set.ID() {
		t.Errorf("LR.2 the set read back (%v) is not equal to the set (%v)", again, set)
	}
	other, err := rs.CreateSet(ctx, djinn.Any)
	if err != nil {
		t.Fatal(err)
	}
	if other.Equal(set) {
		t.Error("LR.2 two createLeaseRenewalSet calls returned equal sets")
	}

	if err := set.RenewForDesired(ctx, l, djinn.Forever); err != nil {
		t.Fatal(err)
	}
	ls := leasesOf(t, set)
	if len(ls) != 1 || !ls[0].Lease.Equal(l) || !ls[0].Desired.Equal(djinn.EndOfTime) || ls[0].RenewDuration != djinn.Forever || ls[0].LastError != nil {
		t.Fatalf("LR.2 after the two-argument renewFor(Forever): %+v", ls)
	}
	// An equal lease gets the new durations; the set still holds one.
	before := time.Now()
	if err := set.RenewFor(ctx, client.NewLease(l.Landlord(), l.Cookie(), l.Expiration()), time.Hour, time.Minute); err != nil {
		t.Fatal(err)
	}
	after := time.Now()
	ls = leasesOf(t, set)
	if len(ls) != 1 || ls[0].RenewDuration != time.Minute ||
		ls[0].Desired.Before(before.Add(time.Hour-time.Second)) || ls[0].Desired.After(after.Add(time.Hour+time.Second)) {
		t.Fatalf("LR.2 renewFor of an equal lease: %+v, want one lease desired an hour from now, renewed a minute at a time", ls)
	}
	if info, err := set.Info(ctx); err != nil || info.Leases != 1 {
		t.Errorf("info: %+v, %v; want one lease", info, err)
	}

	setID := set.ID()
	for _, tt := range []struct {
		name string
		call func() error
	}{
		{"LR.2 renewFor of a lease in another set of the service", func() error { return other.RenewForDesired(ctx, l, djinn.Forever) }},
		{"LR.2 renewFor of the service's own live lease", func() error { return set.RenewForDesired(ctx, other.Lease(), djinn.Forever) }},
		{"LR.2 createLeaseRenewalSet through the raw API with duration zero", func() error {
			_, err := djinnpb.NewLeaseRenewalServiceClient(c.ClientConn()).CreateSet(ctx, &djinnpb.CreateSetRequest{})
			return err
		}},
		{"LR.2 renewFor through the raw API with renew duration zero", func() error {
			_, err := djinnpb.NewLeaseRenewalServiceClient(c.ClientConn()).RenewFor(ctx, &djinnpb.RenewForRequest{
				SetId: setID[:], Lease: grantFrom(t, ll, time.Hour).Proto(time.Now()), DesiredDurationNanos: int64(time.Hour),
			})
			return err
		}},
	} {
		if err := tt.call(); !errors.Is(err, djinn.ErrInvalidArgument) {
			t.Errorf("%s: %v, want invalid argument", tt.name, err)
		}
	}

	// A lease whose desired expiration has passed leaves at once.
	dropped := grantFrom(t, ll, time.Hour)
	if err := set.RenewFor(ctx, dropped, -time.Second, time.Minute); err != nil {
		t.Errorf("LR.2 renewFor with a negative desired duration: %v, want no error", err)
	}
	if ls := leasesOf(t, set); len(ls) != 1 || !ls[0].Lease.Equal(l) {
		t.Errorf("LR.2 a lease past its desired expiration stayed: %+v", ls)
	}

	removed, err := set.Remove(ctx, l)
	if err != nil || !removed.Equal(l) {
		t.Fatalf("LR.2 remove: %v, %v; want the lease", removed, err)
	}
	if removed, err := set.Remove(ctx, l); removed != nil || err != nil {
		t.Errorf("LR.2 remove of a lease not in the set: %v, %v; want nil, nil", removed, err)
	}
	if ls := leasesOf(t, set); len(ls) != 0 {
		t.Errorf("after remove: %+v", ls)
	}
	// LR.2: removal does not cancel the lease.
	if err := l.Renew(ctx, c, time.Hour); err != nil {
		t.Errorf("the removed lease no longer renews: %v", err)
	}

	// LR.2: the set's lease cancelled, the set is gone.
	if err := set.RenewForDesired(ctx, l, djinn.Forever); err != nil {
		t.Fatal(err)
	}
	if err := set.Lease().Cancel(ctx, c); err != nil {
		t.Fatal(err)
	}
	servertest.Eventually(t, "the set to be destroyed with its lease", func() bool {
		_, err := rs.Set(ctx, set.ID())
		return errors.Is(err, djinn.ErrNoSuchObject)
	})
	if _, err := set.Leases(ctx); !errors.Is(err, djinn.ErrNoSuchObject) {
		t.Errorf("LR.2 getLeases on a destroyed set: %v, want no such object", err)
	}
	if err := set.RenewForDesired(ctx, grantFrom(t, ll, time.Hour), djinn.Forever); !errors.Is(err, djinn.ErrNoSuchObject) {
		t.Errorf("LR.2 renewFor on a destroyed set: %v, want no such object", err)
	}
	// The client lease is left alone, and may join another set.
	if err := other.RenewForDesired(ctx, l, djinn.Forever); err != nil {
		t.Errorf("a lease of a destroyed set cannot join another: %v", err)
	}
}

// TestRenewalServerRenews: the service renews a client lease before it
// expires, and when a renewal fails definitely it drops the lease and
// sends a renewal failure event with the error (LR.2, LR.2.1).
func TestRenewalServerRenews(t *testing.T) {
	t.Parallel()
	_, rs := renewalServer(t)
	ctx := ctxFor(t)
	ll := testLandlord(t, 3*time.Second, 3*time.Second) // short leases: renewals come soon
	in := newEventInbox(t)

	set, err := rs.CreateSet(ctx, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := set.SetRenewalFailureListener(ctx, in.l.Ref(), []byte("failures"))
	if err != nil {
		t.Fatal(err)
	}
	if reg.ID != client.RenewalFailureEventID || !reg.Source.Equal(set.Ref()) || !reg.Lease.Equal(set.Lease()) {
		t.Errorf("LR.2.1 failure registration %+v: want event id 0, the set as source and the set's lease", reg)
	}

	l := grantFrom(t, ll, 3*time.Second)
	granted := l.Expiration()
	if err := set.RenewFor(ctx, l, djinn.Forever, 3*time.Second); err != nil {
		t.Fatal(err)
	}
	for renewed := false; !renewed; {
		select {
		case call := <-ll.Calls():
			for _, cookie := range call.Cookies {
				renewed = renewed || cookie == l.Cookie()
			}
		case <-time.After(servertest.Timeout):
			t.Fatalf("the service did not renew the lease in %v", servertest.Timeout)
		}
	}
	servertest.Eventually(t, "the renewal to be recorded", func() bool {
		ls := leasesOf(t, set)
		return len(ls) == 1 && ls[0].Lease.Expiration().After(granted)
	})

	ll.Forget(l.Cookie()) // the landlord lost it: the next renewal fails
	r := in.next(t, "a renewal failure event")
	ev, err := client.RenewalFailureEventFrom(r.ev, r.at)
	if err != nil {
		t.Fatal(err)
	}
	if ev.ID != client.RenewalFailureEventID || !ev.Source.Equal(set.Ref()) || string(ev.Handback) != "failures" || ev.Seq <= reg.Seq {
		t.Errorf("LR.2.1 failure event %d seq %d from %v handback %q; want event 0 after seq %d from the set with its handback",
			ev.ID, ev.Seq, ev.Source, ev.Handback, reg.Seq)
	}
	if !ev.Lease.Equal(l) || !errors.Is(ev.Err, djinn.ErrUnknownLease) {
		t.Errorf("LR.2.1 failure event for %v with error %v; want %v and an unknown lease error", ev.Lease, ev.Err, l)
	}
	if ls := leasesOf(t, set); len(ls) != 0 {
		t.Errorf("LR.2.1 the failed lease is still in the set: %+v", ls)
	}

	// Cleared, the registration is gone; a later failure sends nothing.
	if err := set.ClearRenewalFailureListener(ctx); err != nil {
		t.Fatal(err)
	}
	if err := set.ClearRenewalFailureListener(ctx); err != nil {
		t.Errorf("LR.2.1 clear without a registration: %v", err)
	}
	if info, err := set.Info(ctx); err != nil || info.RenewalFailure != nil {
		t.Errorf("after clear: %+v, %v", info, err)
	}
}

// TestRenewalServerWarning: a warning registered for longer before expiry
// than the set's lease has left comes at once, names the set and carries
// its lease (LR.2.1).
func TestRenewalServerWarning(t *testing.T) {
	t.Parallel()
	_, rs := renewalServer(t)
	ctx := ctxFor(t)
	in := newEventInbox(t)

	set, err := rs.CreateSet(ctx, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := set.SetExpirationWarningListener(ctx, in.l.Ref(), 2*time.Hour, []byte("wake up"))
	if err != nil {
		t.Fatal(err)
	}
	if reg.ID != client.ExpirationWarningEventID || !reg.Source.Equal(set.Ref()) || !reg.Lease.Equal(set.Lease()) {
		t.Errorf("LR.2.1 warning registration %+v: want event id 1, the set as source and the set's lease", reg)
	}
	info, err := set.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if w := info.ExpirationWarning; w == nil || !w.Listener.Equal(in.l.Ref()) || w.MinWarning != 2*time.Hour || string(w.Handback) != "wake up" {
		t.Errorf("warning listener %+v", w)
	}

	r := in.next(t, "an expiration warning")
	ev, err := client.ExpirationWarningEventFrom(r.ev, r.at)
	if err != nil {
		t.Fatal(err)
	}
	if ev.ID != client.ExpirationWarningEventID || !ev.Source.Equal(set.Ref()) || string(ev.Handback) != "wake up" || ev.Seq <= reg.Seq {
		t.Errorf("LR.2.1 warning event %d seq %d from %v handback %q", ev.ID, ev.Seq, ev.Source, ev.Handback)
	}
	if !ev.SetLease.Equal(set.Lease()) {
		t.Errorf("LR.2.1 the warning names lease %v, want the set's %v", ev.SetLease, set.Lease())
	}
	if d := ev.SetLease.Expiration().Sub(set.Lease().Expiration()); d < -time.Second || d > time.Second {
		t.Errorf("LR.2.1 the warning's lease expires %v, the set's %v", ev.SetLease.Expiration(), set.Lease().Expiration())
	}

	if err := set.ClearExpirationWarningListener(ctx); err != nil {
		t.Fatal(err)
	}
	if info, err := set.Info(ctx); err != nil || info.ExpirationWarning != nil {
		t.Errorf("after clear: %+v, %v", info, err)
	}
}
