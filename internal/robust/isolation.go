package robust

import (
	"context"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/djinn-go/djinn/proto/djinnpb"
)

// The isolation workload: the owner (Alice) makes a resource of each kind
// — a lock owner, a lock set, a mailbox registration holding an event, a
// transaction, a renewal set, a lookup item — and the intruder (Bob),
// holding every id, cookie and capability of them, tries the calls only
// their owner may make, through the same faults as every workload. Each
// answer must be NOT_FOUND ("others get not found"): never success, never
// another code, whichever member answers after a failover. Then the owner
// finds each resource as she left it, and ends it. CheckIsolation judges
// the record.

// Attempt is one of the intruder's calls on the owner's resource.
type Attempt struct {
	What  string // the call and the resource
	Code  string // the answer's gRPC code; "" when no answer came
	Err   string // the answer's message
	Phase string
}

// IsolationLog is what the isolation workload saw.
type IsolationLog struct {
	mu       sync.Mutex
	attempts []Attempt // guarded by mu
	changed  []string  // the owner's resources found changed, guarded by mu
}

func (l *IsolationLog) attempt(a Attempt) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.attempts = append(l.attempts, a)
}

func (l *IsolationLog) change(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.changed = append(l.changed, s)
}

// Snapshot returns the attempts and the changes found.
func (l *IsolationLog) Snapshot() ([]Attempt, []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Attempt(nil), l.attempts...), append([]string(nil), l.changed...)
}

// CheckIsolation lists every attempt answered with anything but
// NOT_FOUND, and every change the owner found.
func CheckIsolation(attempts []Attempt, changed []string) []string {
	var v []string
	for _, a := range attempts {
		if a.Code != "" && a.Code != codes.NotFound.String() {
			v = append(v, fmt.Sprintf("another principal's %s was answered %s (%s) during %q: it must get NOT_FOUND", a.What, a.Code, a.Err, a.Phase))
		}
	}
	for _, c := range changed {
		v = append(v, "another principal's calls took effect: "+c)
	}
	return v
}

// isoTry is a call the intruder tries on a resource.
type isoTry struct {
	what string
	call func(context.Context, *grpc.ClientConn) error
}

// isoResource is one of the owner's resources: what the intruder tries,
// how the owner finds it intact ("" or what changed), and how she ends it.
type isoResource struct {
	name   string
	tries  []isoTry
	intact func(context.Context, *grpc.ClientConn) (string, error)
	end    func(context.Context, *grpc.ClientConn) error
}

// isolationWorker runs rounds until ctx ends.
func (r *Run) isolationWorker(ctx context.Context, id int) {
	owner := &Caller{nodes: r.c.Nodes, next: id % len(r.c.Nodes), as: Alice, attempt: 2 * time.Second}
	intruder := &Caller{nodes: r.c.Nodes, next: (id + 1) % len(r.c.Nodes), as: r.intruder, attempt: 2 * time.Second}
	for ctx.Err() == nil {
		r.isolationRound(ctx, owner, intruder)
	}
}

// isolationRound makes the resources, has the intruder try each call
// twice, and has the owner check and end them.
func (r *Run) isolationRound(ctx context.Context, owner, intruder *Caller) {
	var res []*isoResource
	for _, newResource := range []func(context.Context, *Caller) *isoResource{
		r.isoLockOwner, r.isoLockSet, r.isoMailbox, r.isoTxn, r.isoRenewalSet, r.isoItem,
	} {
		if x := newResource(ctx, owner); x != nil {
			res = append(res, x)
		}
	}
	for range 2 {
		for _, x := range res {
			for _, t := range x.tries {
				r.try(ctx, intruder, x.name, t)
			}
		}
	}
	for _, x := range res {
		r.checkIntact(owner, x)
	}
	r.pause(ctx, 100*time.Millisecond)
}

// try makes one intruder call and records its answer.
func (r *Run) try(ctx context.Context, intruder *Caller, name string, t isoTry) {
	phase := r.phaseNow()
	o, err := intruder.Call(ctx, t.call)
	a := Attempt{What: t.what + " of " + name, Phase: phase}
	if o != Unknown && ctx.Err() == nil {
		a.Code = status.Code(err).String()
		if err != nil {
			a.Err = status.Convert(err).Message()
		}
	}
	r.isolation.attempt(a)
	if a.Code == "" {
		r.count("isolation: attempts unanswered (a fault)")
	}
}

// checkIntact asks, as the owner, whether x is as she left it, and ends
// it; it asks during the run's grace, so that the faults' end is waited
// for.
func (r *Run) checkIntact(owner *Caller, x *isoResource) {
	var changed string
	o, err := owner.Call(r.grace, func(ctx context.Context, cc *grpc.ClientConn) error {
		c, err := x.intact(ctx, cc)
		changed = c
		return err
	})
	switch {
	case o == Done && changed != "":
		r.isolation.change(fmt.Sprintf("the owner's %s: %s", x.name, changed))
	case o == Done:
		r.count("isolation: resources found intact")
	case status.Code(err) == codes.NotFound:
		r.isolation.change(fmt.Sprintf("the owner's %s is not found by its owner: %v", x.name, err))
	default:
		r.count("isolation: resources not checked (a fault)")
	}
	if _, err := owner.Call(r.grace, x.end); err != nil && status.Code(err) != codes.NotFound {
		r.count("isolation: resources not ended (a fault)")
	}
}

// isoLease is the isolation resources' lease: long enough to outlast
// every fault of a schedule.
const isoLease = 2 * time.Minute

// create calls f as the owner, once answered, or returns false.
func create(ctx context.Context, owner *Caller, f func(context.Context, *grpc.ClientConn) error) bool {
	o, _ := owner.Call(ctx, f)
	return o == Done
}

func cancelLease(cookie []byte) func(context.Context, *grpc.ClientConn) error {
	return func(ctx context.Context, cc *grpc.ClientConn) error {
		_, err := djinnpb.NewLandlordClient(cc).Cancel(ctx, &djinnpb.CancelRequest{Cookie: cookie})
		return err
	}
}

// leaseAlive is the owner's check of a lease: it is there.
func leaseAlive(cookie []byte) func(context.Context, *grpc.ClientConn) (string, error) {
	return func(ctx context.Context, cc *grpc.ClientConn) (string, error) {
		_, err := djinnpb.NewLandlordClient(cc).Remaining(ctx, &djinnpb.RemainingRequest{Cookie: cookie})
		return "", err
	}
}

func (r *Run) isoLockOwner(ctx context.Context, owner *Caller) *isoResource {
	var cookie []byte
	if !create(ctx, owner, func(ctx context.Context, cc *grpc.ClientConn) error {
		got, err := djinnpb.NewLockServiceClient(cc).CreateOwner(ctx, &djinnpb.CreateLockOwnerRequest{LeaseDurationNanos: int64(isoLease)})
		if err == nil {
			cookie = got.Lease.Cookie
		}
		return err
	}) {
		return nil
	}
	return &isoResource{name: "lock owner", tries: []isoTry{{"lease cancel", cancelLease(cookie)}},
		intact: leaseAlive(cookie), end: cancelLease(cookie)}
}

func (r *Run) isoLockSet(ctx context.Context, owner *Caller) *isoResource {
	var cookie []byte
	if !create(ctx, owner, func(ctx context.Context, cc *grpc.ClientConn) error {
		got, err := djinnpb.NewLockServiceClient(cc).CreateSet(ctx, &djinnpb.CreateLockSetRequest{LeaseDurationNanos: int64(isoLease)})
		if err == nil {
			cookie = got.Lease.Cookie
		}
		return err
	}) {
		return nil
	}
	return &isoResource{name: "lock set", tries: []isoTry{{"lease cancel", cancelLease(cookie)}},
		intact: leaseAlive(cookie), end: cancelLease(cookie)}
}
