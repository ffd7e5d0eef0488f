package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/internal/server"
	"github.com/djinn-go/djinn/internal/server/servertest"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// These tests run the lease renewal service against a real djinn landlord:
// a second server whose event mailbox grants short leases.

type renewalFixture struct {
	landlord, renewal *client.Client
	boxes             djinnpb.EventMailboxClient
	sets              djinnpb.LeaseRenewalServiceClient
}

func newRenewalFixture(t *testing.T, mailboxLease time.Duration) *renewalFixture {
	cfg := servertest.Config(t)
	cfg.Mailbox.DefaultLease = server.Duration(mailboxLease)
	cfg.Mailbox.MaxLease = server.Duration(mailboxLease)
	ll := servertest.Start(t, cfg)
	rs := servertest.Start(t, servertest.Config(t))
	f := &renewalFixture{landlord: servertest.Dial(t, ll.Addr()), renewal: servertest.Dial(t, rs.Addr())}
	f.boxes = djinnpb.NewEventMailboxClient(f.landlord.ClientConn())
	f.sets = djinnpb.NewLeaseRenewalServiceClient(f.renewal.ClientConn())
	return f
}

func (f *renewalFixture) mailboxLease(t *testing.T) (*djinnpb.MailboxRegistration, *djinnpb.Lease) {
	t.Helper()
	reg, err := f.boxes.Register(testContext(t), &djinnpb.MailboxRegisterRequest{LeaseDurationNanos: int64(djinn.Any)})
	if err != nil {
		t.Fatal(err)
	}
	return reg, reg.GetLease()
}

func (f *renewalFixture) createSet(t *testing.T) *djinnpb.RenewalSet {
	t.Helper()
	set, err := f.sets.CreateSet(testContext(t), &djinnpb.CreateSetRequest{LeaseDurationNanos: int64(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	return set
}

func (f *renewalFixture) clientLeases(t *testing.T, set *djinnpb.RenewalSet) []*djinnpb.ClientLease {
	t.Helper()
	resp, err := f.sets.GetLeases(testContext(t), &djinnpb.GetLeasesRequest{SetId: set.GetSet().GetObjectId()})
	if err != nil {
		t.Fatal(err)
	}
	return resp.GetLeases()
}

// LR.2: a client lease in a set is renewed at its landlord for as long as
// it is in the set: its expiration moves forward, and it outlives its
// original grant.
func TestRenewalKeepsMailboxLeaseAlive(t *testing.T) {
	const granted = 4 * time.Second
	f := newRenewalFixture(t, granted)
	reg, l := f.mailboxLease(t)
	// No later than the landlord's own expiration of the original grant.
	original := time.Now().Add(time.Duration(l.GetDurationNanos()))
	set := f.createSet(t)
	f.renewFor(t, set, l, djinn.Forever)
	// The landlord still serves the registration once its original grant
	// has run out (by the landlord's own clock, which this test shares):
	// the set renewed it there. Nothing ends the lease, so a slow poll
	// cannot miss this.
	aliveUntil(t, f.boxes, reg, original)
	if !f.inSet(t, set, l) {
		t.Fatal("the lease left its set before its desired expiration (Forever)")
	}
}

// LR.2: at its desired expiration a client lease leaves its set, and the
// landlord then lets it expire.
func TestRenewalEndsLeaseAtDesiredExpiration(t *testing.T) {
	// Renewals come a third of the grant before it ends: 1s of room for a
	// loaded machine, lest the lease lapse before its desired expiration.
	const granted = 3 * time.Second
	f := newRenewalFixture(t, granted)
	reg, l := f.mailboxLease(t)
	set := f.createSet(t)
	start := time.Now()
	const desired = 2 * granted
	f.renewFor(t, set, l, desired)
	servertest.Eventually(t, "the lease leaving the set at its desired expiration", func() bool {
		return !f.inSet(t, set, l)
	})
	if el := time.Since(start); el < desired {
		t.Fatalf("lease left the set after %v, before its desired duration %v", el, desired)
	}
	servertest.Eventually(t, "the registration expiring once no longer renewed", func() bool {
		_, err := f.boxes.GetRegistration(testContext(t), &djinnpb.MailboxRegistrationRequest{RegistrationId: reg.GetRegistrationId()})
		return djinn.KindOf(err) == djinn.NoSuchObject
	})
}

// renewFor puts l in set for desired, renewing it for as long as its
// landlord grants.
func (f *renewalFixture) renewFor(t *testing.T, set *djinnpb.RenewalSet, l *djinnpb.Lease, desired time.Duration) {
	t.Helper()
	if _, err := f.sets.RenewFor(testContext(t), &djinnpb.RenewForRequest{
		SetId: set.GetSet().GetObjectId(), Lease: l,
		DesiredDurationNanos: int64(desired), RenewDurationNanos: int64(djinn.Forever),
	}); err != nil {
		t.Fatal(err)
	}
}

// aliveUntil waits until the clock has passed t0, failing the test if
// the landlord stops serving reg meanwhile, then checks once more that it
// does: reg is alive past t0.
func aliveUntil(t *testing.T, boxes djinnpb.EventMailboxClient, reg *djinnpb.MailboxRegistration, t0 time.Time) {
	t.Helper()
	servertest.EventuallyWithin(t, time.Until(t0)+servertest.Timeout, "the clock to pass "+t0.Format(time.StampMilli), func() bool {
		mustHaveRegistration(t, boxes, reg)
		return time.Now().After(t0)
	})
	mustHaveRegistration(t, boxes, reg)
}

// mustHaveRegistration fails the test if the landlord no longer serves reg.
func mustHaveRegistration(t *testing.T, boxes djinnpb.EventMailboxClient, reg *djinnpb.MailboxRegistration) {
	t.Helper()
	if _, err := boxes.GetRegistration(testContext(t), &djinnpb.MailboxRegistrationRequest{RegistrationId: reg.GetRegistrationId()}); err != nil {
		t.Fatalf("mailbox registration lost while its lease was in a renewal set: %v", err)
	}
}

// inSet reports whether the client lease l is in set.
func (f *renewalFixture) inSet(t *testing.T, set *djinnpb.RenewalSet, l *djinnpb.Lease) bool {
	t.Helper()
	return holds(f.clientLeases(t, set), l)
}

// holds reports whether ls holds the client lease l.
func holds(ls []*djinnpb.ClientLease, l *djinnpb.Lease) bool {
	for _, c := range ls {
		if string(c.GetLease().GetCookie()) == string(l.GetCookie()) {
			return true
		}
	}
	return false
}

// LR.2 and LR.2.1: a renewal that fails definitely (the landlord no longer
// knows the lease) removes the lease and raises a renewal failure event
// carrying the lease and the error, with event id 0 and the set as source.
func TestRenewalFailureEventFromRealLandlord(t *testing.T) {
	f := newRenewalFixture(t, 2*time.Second)
	_, l := f.mailboxLease(t)
	set := f.createSet(t)
	in := newInbox(t, nil)
	reg, err := f.sets.SetRenewalFailureListener(testContext(t), &djinnpb.SetRenewalFailureListenerRequest{
		SetId: set.GetSet().GetObjectId(), Listener: client.RefToProto(in.l.Ref()), Handback: []byte("hb"),
	})
	if err != nil {
		t.Fatal(err)
	}
	if reg.GetEventId() != 0 || string(reg.GetLease().GetCookie()) != string(set.GetLease().GetCookie()) {
		t.Fatalf("registration %v: want event id 0 and the set's lease", reg)
	}
	if _, err := f.sets.RenewFor(testContext(t), &djinnpb.RenewForRequest{
		SetId: set.GetSet().GetObjectId(), Lease: l, DesiredDurationNanos: int64(djinn.Forever), RenewDurationNanos: int64(djinn.Forever),
	}); err != nil {
		t.Fatal(err)
	}
	// The holder cancels the lease behind the set's back (LR.2 allows it).
	lease, err := client.LeaseFromProto(l, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := lease.Cancel(testContext(t), f.landlord); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-in.events:
		if ev.ID != 0 || ev.Seq != reg.GetSequence()+1 || string(ev.Handback) != "hb" {
			t.Fatalf("event id %d seq %d handback %q: want id 0, seq %d, handback hb", ev.ID, ev.Seq, ev.Handback, reg.GetSequence()+1)
		}
		if ev.Source.Object != djinn.ID(set.GetSet().GetObjectId()) {
			t.Fatalf("event source %v: want the set %x", ev.Source, set.GetSet().GetObjectId())
		}
		var p djinnpb.RenewalFailure
		if err := ev.Payload.UnmarshalTo(&p); err != nil {
			t.Fatal(err)
		}
		if string(p.GetLease().GetCookie()) != string(l.GetCookie()) || p.GetError().GetKind() != string(djinn.UnknownLease) {
			t.Fatalf("failure payload %v: want the lease and UNKNOWN_LEASE", &p)
		}
	case <-time.After(servertest.Timeout):
		t.Fatal("no renewal failure event")
	}
	if n := len(f.clientLeases(t, set)); n != 0 {
		t.Fatalf("set holds %d leases after a definite failure, want 0", n)
	}
}

// LR.2: a set's own lease cannot be put in a set of the service that
// granted it.
func TestRenewalRefusesItsOwnSetLease(t *testing.T) {
	f := newRenewalFixture(t, time.Minute)
	a, b := f.createSet(t), f.createSet(t)
	_, err := f.sets.RenewFor(testContext(t), &djinnpb.RenewForRequest{
		SetId: b.GetSet().GetObjectId(), Lease: a.GetLease(), DesiredDurationNanos: int64(time.Hour), RenewDurationNanos: int64(time.Minute),
	})
	wantErr(t, "renewFor(a set's lease)", err, djinn.InvalidArgument, "granted by this renewal service")
}

// A renewal set lives in the replicated log: after its leader fails, the
// new leader keeps renewing the set's client leases, so none lapses at its
// landlord.
func TestRenewalFailover(t *testing.T) {
	t.Parallel()
	cfg := servertest.Config(t)
	// The new leader renews every client lease as soon as it takes over:
	// the grant must outlast an election on a loaded machine.
	const granted = 10 * time.Second
	cfg.Mailbox.DefaultLease = server.Duration(granted)
	cfg.Mailbox.MaxLease = server.Duration(granted)
	ll := servertest.Start(t, cfg)
	boxes := djinnpb.NewEventMailboxClient(servertest.Dial(t, ll.Addr()).ClientConn())
	ss := servertest.StartCluster(t, 3, func(c *server.Config) {
		c.Raftcfg.HeartbeatTimeout = server.Duration(200 * time.Millisecond)
		c.Raftcfg.ElectionTimeout = server.Duration(200 * time.Millisecond)
	})
	var leader *server.Server
	servertest.Eventually(t, "a leader", func() bool { leader = servertest.Leader(ss...); return leader != nil })
	sets := djinnpb.NewLeaseRenewalServiceClient(servertest.Dial(t, leader.Addr()).ClientConn())
	var set *djinnpb.RenewalSet
	retryUnavailable(t, "create a set", func(ctx context.Context) (err error) {
		set, err = sets.CreateSet(ctx, &djinnpb.CreateSetRequest{LeaseDurationNanos: int64(time.Hour)})
		return err
	})
	// The client lease is taken last, so that its whole time is left for
	// the failover (starting the cluster takes a while on a loaded
	// machine).
	reg, err := boxes.Register(testContext(t), &djinnpb.MailboxRegisterRequest{LeaseDurationNanos: int64(djinn.Any)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sets.RenewFor(testContext(t), &djinnpb.RenewForRequest{SetId: set.GetSet().GetObjectId(), Lease: reg.GetLease(),
		DesiredDurationNanos: int64(djinn.Forever), RenewDurationNanos: int64(djinn.Forever)}); err != nil {
		t.Fatal(err)
	}
	if err := leader.Close(); err != nil {
		t.Fatal(err)
	}
	// A renewal before now, the old leader's, ends the lease by
	// closed+granted at the latest.
	closed := time.Now()
	survivors := servertest.Others(ss, leader)
	next := servertest.ServingLeader(t, survivors...)
	sets = djinnpb.NewLeaseRenewalServiceClient(servertest.Dial(t, next.Addr()).ClientConn())
	// Two grants past the failover the landlord still serves the
	// registration: the new leader renewed it, and kept renewing it.
	// Nothing ends the lease, so a slow poll cannot miss this.
	aliveUntil(t, boxes, reg, closed.Add(2*granted))
	var n int
	retryUnavailable(t, "read the set at the new leader", func(ctx context.Context) error {
		ls, err := sets.GetLeases(ctx, &djinnpb.GetLeasesRequest{SetId: set.GetSet().GetObjectId()})
		n = len(ls.GetLeases())
		if n == 1 && !holds(ls.GetLeases(), reg.GetLease()) {
			t.Fatalf("set holds %v after failover, want the mailbox lease", ls.GetLeases())
		}
		return err
	})
	if n != 1 {
		t.Fatalf("set holds %d leases after failover, want 1", n)
	}
}
