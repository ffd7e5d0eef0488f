package robust

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/grpcerr"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// The lease workload: workers grant short leases (lock owners), ask what
// remains of them, renew them, and then cancel them or let them expire,
// recording every answer with the times the question was asked and
// answered. CheckLeases judges the record.

// leaseKind is what a lease event asked.
type leaseKind int

const (
	leaseGrant leaseKind = iota
	leaseRenew
	leaseRemaining
	leaseCancel
)

// LeaseEvent is one question about a lease and its answer.
type LeaseEvent struct {
	Kind      leaseKind
	Call, Ret int64   // when asked and answered (Ret: never if unknown)
	Outcome   Outcome // Done: alive (granted, renewed, remaining, cancelled); NotDone with Gone: the lease is unknown
	Gone      bool    // the landlord answered that the lease does not exist
	Duration  int64   // granted or remaining nanoseconds
	Node      int     // the member that answered
}

// LeaseLog is the events of each lease, by lease.
type LeaseLog struct {
	mu     sync.Mutex
	events map[string][]LeaseEvent // guarded by mu
	order  []string                // guarded by mu
}

func (l *LeaseLog) add(lease string, e LeaseEvent) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.events == nil {
		l.events = map[string][]LeaseEvent{}
	}
	if _, ok := l.events[lease]; !ok {
		l.order = append(l.order, lease)
	}
	l.events[lease] = append(l.events[lease], e)
}

// Leases returns each lease's events in the order recorded.
func (l *LeaseLog) Leases() [][]LeaseEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([][]LeaseEvent, 0, len(l.order))
	for _, k := range l.order {
		out = append(out, append([]LeaseEvent(nil), l.events[k]...))
	}
	return out
}

// leaseLength is how long the workload's leases are granted and renewed
// for: short, so that many expire during a run.
const leaseLength = 2500 * time.Millisecond

// leaseWorker runs leases one after another until ctx ends.
func (r *Run) leaseWorker(ctx context.Context, id int, rng *rand.Rand) {
	caller := NewCaller(r.c, id)
	for ctx.Err() == nil {
		r.oneLease(ctx, caller, rng)
	}
}

// oneLease grants a lease, renews it a few times while asking what
// remains, then cancels it or lets it expire, asking again after.
func (r *Run) oneLease(ctx context.Context, caller *Caller, rng *rand.Rand) {
	var cookie []byte
	e := r.leaseCall(ctx, caller, leaseGrant, func(ctx context.Context, cc *grpc.ClientConn) (int64, error) {
		got, err := djinnpb.NewLockServiceClient(cc).CreateOwner(ctx, &djinnpb.CreateLockOwnerRequest{LeaseDurationNanos: int64(leaseLength)})
		if err != nil {
			return 0, err
		}
		cookie = got.Lease.Cookie
		return got.Lease.DurationNanos, nil
	})
	if e.Outcome != Done {
		r.pause(ctx, 50*time.Millisecond)
		return
	}
	key := string(cookie)
	r.leases.add(key, e)
	ll := func(cc *grpc.ClientConn) djinnpb.LandlordClient { return djinnpb.NewLandlordClient(cc) }
	remaining := func(ctx context.Context, cc *grpc.ClientConn) (int64, error) {
		got, err := ll(cc).Remaining(ctx, &djinnpb.RemainingRequest{Cookie: cookie})
		return got.GetRemainingNanos(), err
	}
	promise := e.Call + e.Duration
	renew := func(ctx context.Context, cc *grpc.ClientConn) (int64, error) {
		got, err := ll(cc).Renew(ctx, &djinnpb.RenewRequest{Cookie: cookie, DurationNanos: int64(leaseLength)})
		return got.GetGrantedNanos(), err
	}
	renews := rng.IntN(4)
	for i := 0; i < renews && ctx.Err() == nil; i++ {
		r.pause(ctx, time.Duration(200+rng.IntN(400))*time.Millisecond)
		r.leases.add(key, r.leaseCall(ctx, caller, leaseRemaining, remaining))
		// Renew until renewed, as a holder does, while the lease lasts.
		for {
			e := r.leaseCall(ctx, caller, leaseRenew, renew)
			r.leases.add(key, e)
			if e.Outcome == Done {
				r.count("lease renewals")
				promise = max(promise, e.Call+e.Duration)
				break
			}
			if e.Gone || r.clock.Now() > promise || ctx.Err() != nil {
				r.count("lease renewals failed")
				break
			}
		}
	}
	if rng.IntN(2) == 0 {
		r.leases.add(key, r.leaseCall(ctx, caller, leaseCancel, func(ctx context.Context, cc *grpc.ClientConn) (int64, error) {
			_, err := ll(cc).Cancel(ctx, &djinnpb.CancelRequest{Cookie: cookie})
			return 0, err
		}))
	}
	// Ask until the landlord says it is gone, and once more after.
	deadline := time.Now().Add(leaseLength + 10*time.Second)
	for gone := 0; gone < 2 && time.Now().Before(deadline) && r.grace.Err() == nil; {
		r.pause(r.grace, time.Duration(100+rng.IntN(300))*time.Millisecond)
		e := r.leaseCall(r.grace, caller, leaseRemaining, remaining)
		r.leases.add(key, e)
		if e.Gone {
			gone++
		}
	}
}

// leaseCall asks once (a member that is not the leader passes it on),
// recording when and what was answered.
func (r *Run) leaseCall(ctx context.Context, caller *Caller, kind leaseKind, f func(context.Context, *grpc.ClientConn) (int64, error)) LeaseEvent {
	e := LeaseEvent{Kind: kind, Call: r.clock.Now()}
	o, err := caller.Call(ctx, func(ctx context.Context, cc *grpc.ClientConn) error {
		d, err := f(ctx, cc)
		e.Duration = d
		return err
	})
	e.Ret, e.Outcome, e.Node = r.clock.Now(), o, caller.next
	switch {
	case o == Unknown:
		e.Ret = never
	case errors.Is(grpcerr.FromStatus(err), djinn.ErrUnknownLease):
		e.Gone = true
	}
	return e
}
