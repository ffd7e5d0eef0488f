package robust

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/djinn-go/djinn/proto/djinnpb"
)

// The renewal-set workload: a worker registers a mailbox for renewal
// failure events, then, set after set, creates a renewal set with that
// mailbox as its renewal failure listener, adds client leases to it (lock
// owners the cluster grants for a short lease) each for a membership
// duration, renews the set's lease, and while it watches what every
// client lease has left: removes one, cancels one itself (so that the
// service's next renewal of it fails definitely), and cancels some sets.
// After the run it pulls the failure events from the mailbox.
// CheckRenewals judges the record.

// ClientLease is what the workload did with one client lease and saw of
// it.
type ClientLease struct {
	Cookie  string
	Granted LeaseEvent   // its grant by the lock service
	Added   []LeaseEvent // RenewFor; Duration is the membership (desired) duration
	Removed []LeaseEvent // Remove from its set
	Cancel  []LeaseEvent // its holder cancelled it
	SetEnd  []LeaseEvent // its set's lease cancelled
	Seen    []LeaseEvent // Remaining: alive with the time left, or gone
}

// RenewalLog is the renewal workload's record: the client leases, the
// renewal failure events pulled (by client lease cookie) and whether the
// pull finished.
type RenewalLog struct {
	mu       sync.Mutex
	leases   []*ClientLease  // guarded by mu
	failures map[string]bool // guarded by mu
	pulled   int             // workers whose events were all pulled, guarded by mu
	workers  int             // guarded by mu
}

func (l *RenewalLog) record(cl *ClientLease) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.leases = append(l.leases, cl)
}

func (l *RenewalLog) failed(cookies []string, complete bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.failures == nil {
		l.failures = map[string]bool{}
	}
	for _, c := range cookies {
		l.failures[c] = true
	}
	l.workers++
	if complete {
		l.pulled++
	}
}

// Snapshot returns copies of the client leases, the failures reported and
// whether every worker's events were pulled.
func (l *RenewalLog) Snapshot() ([]ClientLease, map[string]bool, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]ClientLease, len(l.leases))
	for i, cl := range l.leases {
		out[i] = *cl
	}
	f := map[string]bool{}
	for k := range l.failures {
		f[k] = true
	}
	return out, f, l.pulled == l.workers
}

const (
	// clientLeaseLength is the client leases' duration: short, so that
	// the service renews each several times.
	clientLeaseLength = 2 * time.Second
	// setLeaseLength is the sets' lease, renewed once in their life.
	setLeaseLength = 20 * time.Second
)

// renewalWorker runs sets one after another until ctx ends, then pulls
// the renewal failure events.
func (r *Run) renewalWorker(ctx context.Context, id int, rng *rand.Rand) {
	caller := NewCaller(r.c, id)
	var reg *djinnpb.MailboxRegistration
	if o, _ := caller.Call(ctx, func(ctx context.Context, cc *grpc.ClientConn) error {
		got, err := djinnpb.NewEventMailboxClient(cc).Register(ctx, &djinnpb.MailboxRegisterRequest{LeaseDurationNanos: int64(time.Hour)})
		reg = got
		return err
	}); o != Done {
		return
	}
	var mine []*ClientLease
	for ctx.Err() == nil {
		mine = append(mine, r.oneSet(ctx, caller, rng, reg)...)
	}
	r.pullFailures(caller, reg, mine)
}

// oneSet creates a set, adds client leases, watches and changes them, and
// returns them.
func (r *Run) oneSet(ctx context.Context, caller *Caller, rng *rand.Rand, reg *djinnpb.MailboxRegistration) []*ClientLease {
	var set *djinnpb.RenewalSet
	if o, _ := caller.Call(ctx, func(ctx context.Context, cc *grpc.ClientConn) error {
		got, err := djinnpb.NewLeaseRenewalServiceClient(cc).CreateSet(ctx, &djinnpb.CreateSetRequest{LeaseDurationNanos: int64(setLeaseLength)})
		set = got
		return err
	}); o != Done {
		r.pause(ctx, 100*time.Millisecond)
		return nil
	}
	sid := set.Set.ObjectId
	if o, _ := caller.Call(ctx, func(ctx context.Context, cc *grpc.ClientConn) error {
		_, err := djinnpb.NewLeaseRenewalServiceClient(cc).SetRenewalFailureListener(ctx, &djinnpb.SetRenewalFailureListenerRequest{SetId: sid, Listener: reg.Listener, Handback: sid})
		return err
	}); o != Done {
		return nil
	}
	var cls []*ClientLease
	var leases []*djinnpb.Lease
	for range 3 {
		cl, l := r.addClientLease(ctx, caller, rng, sid)
		if cl != nil {
			cls, leases = append(cls, cl), append(leases, l)
		}
	}
	r.watchSet(ctx, caller, rng, set, cls, leases)
	for _, cl := range cls {
		r.renewals.record(cl)
	}
	return cls
}

// addClientLease has the lock service grant a lease and adds it to the set
// for 3–7 s.
func (r *Run) addClientLease(ctx context.Context, caller *Caller, rng *rand.Rand, sid []byte) (*ClientLease, *djinnpb.Lease) {
	var l *djinnpb.Lease
	g := r.leaseCall(ctx, caller, leaseGrant, func(ctx context.Context, cc *grpc.ClientConn) (int64, error) {
		got, err := djinnpb.NewLockServiceClient(cc).CreateOwner(ctx, &djinnpb.CreateLockOwnerRequest{LeaseDurationNanos: int64(clientLeaseLength)})
		if err != nil {
			return 0, err
		}
		l = got.Lease
		return got.Lease.DurationNanos, nil
	})
	if g.Outcome != Done {
		return nil, nil
	}
	cl := &ClientLease{Cookie: string(l.Cookie), Granted: g}
	desired := time.Duration(3000+rng.IntN(4000)) * time.Millisecond
	a := r.leaseCall(ctx, caller, leaseRenew, func(ctx context.Context, cc *grpc.ClientConn) (int64, error) {
		_, err := djinnpb.NewLeaseRenewalServiceClient(cc).RenewFor(ctx, &djinnpb.RenewForRequest{SetId: sid, Lease: l,
			DesiredDurationNanos: int64(desired), RenewDurationNanos: int64(clientLeaseLength)})
		return int64(desired), err
	})
	a.Duration = int64(desired)
	cl.Added = append(cl.Added, a)
	return cl, l
}

// watchSet asks what each client lease has left until the last one's
// membership is over and it is gone, renewing the set's lease once,
// removing one client lease, cancelling another itself, and cancelling
// the set half of the time.
func (r *Run) watchSet(ctx context.Context, caller *Caller, rng *rand.Rand, set *djinnpb.RenewalSet, cls []*ClientLease, leases []*djinnpb.Lease) {
	if len(cls) == 0 {
		return
	}
	ll := func(cc *grpc.ClientConn) djinnpb.LandlordClient { return djinnpb.NewLandlordClient(cc) }
	sid := set.Set.ObjectId
	removeAt, cancelAt, endAt, renewAt := 1+rng.IntN(8), 1+rng.IntN(8), 6+rng.IntN(8), 4
	cancelSet := rng.IntN(2) == 0
	// Watched until every lease is gone, or the workload ends: the run's
	// grace is left for pulling the failure events.
	deadline := time.Now().Add(7*time.Second + clientLeaseLength + 3*time.Second)
	for round := 0; time.Now().Before(deadline) && ctx.Err() == nil; round++ {
		r.pause(ctx, time.Duration(300+rng.IntN(300))*time.Millisecond)
		i := rng.IntN(len(cls))
		switch {
		case round == removeAt:
			cls[i].Removed = append(cls[i].Removed, r.leaseCall(ctx, caller, leaseCancel, func(ctx context.Context, cc *grpc.ClientConn) (int64, error) {
				_, err := djinnpb.NewLeaseRenewalServiceClient(cc).Remove(ctx, &djinnpb.RemoveRequest{SetId: sid, Lease: leases[i]})
				return 0, err
			}))
		case round == cancelAt:
			cls[i].Cancel = append(cls[i].Cancel, r.leaseCall(ctx, caller, leaseCancel, func(ctx context.Context, cc *grpc.ClientConn) (int64, error) {
				_, err := ll(cc).Cancel(ctx, &djinnpb.CancelRequest{Cookie: leases[i].Cookie})
				return 0, err
			}))
		case round == renewAt:
			if o, _ := caller.Call(ctx, func(ctx context.Context, cc *grpc.ClientConn) error {
				_, err := ll(cc).Renew(ctx, &djinnpb.RenewRequest{Cookie: set.Lease.Cookie, DurationNanos: int64(setLeaseLength)})
				return err
			}); o == Done {
				r.count("renewal set leases renewed")
			}
		case round == endAt && cancelSet:
			e := r.leaseCall(ctx, caller, leaseCancel, func(ctx context.Context, cc *grpc.ClientConn) (int64, error) {
				_, err := ll(cc).Cancel(ctx, &djinnpb.CancelRequest{Cookie: set.Lease.Cookie})
				return 0, err
			})
			for _, cl := range cls {
				cl.SetEnd = append(cl.SetEnd, e)
			}
		}
		for j, cl := range cls {
			cl.Seen = append(cl.Seen, r.leaseCall(ctx, caller, leaseRemaining, func(ctx context.Context, cc *grpc.ClientConn) (int64, error) {
				got, err := ll(cc).Remaining(ctx, &djinnpb.RemainingRequest{Cookie: leases[j].Cookie})
				return got.GetRemainingNanos(), err
			}))
		}
		if allGone(cls) {
			return
		}
	}
}

// allGone reports whether every client lease was last seen gone.
func allGone(cls []*ClientLease) bool {
	for _, cl := range cls {
		if n := len(cl.Seen); n == 0 || !cl.Seen[n-1].Gone {
			return false
		}
	}
	return true
}

// pullFailures pulls the mailbox's renewal failure events until every
// failure the checker expects of the worker's client leases is there, or
// the run's grace ends.
func (r *Run) pullFailures(caller *Caller, reg *djinnpb.MailboxRegistration, mine []*ClientLease) {
	want := map[string]bool{}
	for _, cl := range mine {
		if _, ok := failureDue(*cl); ok {
			want[cl.Cookie] = true
		}
	}
	got := map[string]bool{}
	var after uint64
	for r.grace.Err() == nil && !subset(want, got) {
		var stream djinnpb.EventMailbox_PullClient
		pctx, cancel := context.WithTimeout(r.grace, time.Second)
		o, _ := caller.Call(pctx, func(_ context.Context, cc *grpc.ClientConn) error {
			var err error
			stream, err = djinnpb.NewEventMailboxClient(cc).Pull(pctx, &djinnpb.PullRequest{RegistrationId: reg.RegistrationId, AfterIndex: after})
			if err == nil {
				_, err = stream.Header()
			}
			return err
		})
		for o == Done && !subset(want, got) {
			m, err := stream.Recv()
			if err != nil {
				break
			}
			for _, e := range m.Events {
				after = max(after, e.Index)
				var f djinnpb.RenewalFailure
				if e.Event.GetPayload().UnmarshalTo(&f) == nil && f.Lease != nil {
					got[string(f.Lease.Cookie)] = true
				}
			}
		}
		cancel()
		caller.next = (caller.next + 1) % len(caller.nodes)
	}
	var cookies []string
	for c := range got {
		cookies = append(cookies, c)
	}
	r.renewals.failed(cookies, subset(want, got))
}

// subset reports whether every key of a is in b.
func subset(a, b map[string]bool) bool {
	for k := range a {
		if !b[k] {
			return false
		}
	}
	return true
}
