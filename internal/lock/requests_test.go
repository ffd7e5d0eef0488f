package lock

import (
	"fmt"
	"slices"
	"testing"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/lease"
	"github.com/djinn-go/djinn/proto/djinnpb"
	"github.com/djinn-go/djinn/proto/statepb"
)

// requestStates are a state with requests of several holders, granted and
// waiting:
//
//	set  (owners):        a holds W (request 1), b waits for R (request 2)
//	set2 (owners):        d and e hold R (10, 11), d waits to change R to W (12)
//	set3 (transactional): transaction 7 holds W (20), transaction 8 waits for R (21)
//
// and the holders, mallory among them (an owner, and transaction 9), who
// knows every request id.
type requestStates struct {
	s                  *State
	set, set2, set3    djinn.ID
	a, b, d, m, t8, t9 *statepb.LockHolderState
}

func newRequestStates(t *testing.T, rules uint32) *requestStates {
	t.Helper()
	r := &requestStates{s: NewState(lease.NewTable(), func() uint32 { return rules }), set: djinn.NewID(), set2: djinn.NewID(), set3: djinn.NewID()}
	for i, id := range []djinn.ID{r.set, r.set2, r.set3} {
		if err := r.s.ApplyCreateSet(&statepb.LockCreateSet{SetId: id[:], Cookie: id[:], ExpiresUnixNanos: 1 << 62, Transactional: i == 2, Principal: "p"}); err != nil {
			t.Fatal(err)
		}
	}
	owner := func() *statepb.LockHolderState {
		c := djinn.NewID()
		if err := r.s.ApplyCreateOwner(&statepb.LockCreateOwner{Cookie: c[:], ExpiresUnixNanos: 1 << 62, Principal: "p"}); err != nil {
			t.Fatal(err)
		}
		return &statepb.LockHolderState{Owner: c[:]}
	}
	mgr := &djinnpb.Ref{Endpoint: "m:1", ServiceId: []byte{1}, ObjectId: []byte{2}}
	tx := func(id uint64) *statepb.LockHolderState { return &statepb.LockHolderState{Manager: mgr, Txn: id} }
	r.a, r.b, r.d, r.m, r.t8, r.t9 = owner(), owner(), owner(), owner(), tx(8), tx(9)
	e := owner()
	for _, c := range []struct {
		set        djinn.ID
		h          *statepb.LockHolderState
		mode, from Mode
		req        uint64
		want       Outcome
	}{
		{r.set, r.a, W, 0, 1, Granted}, {r.set, r.b, R, 0, 2, Queued},
		{r.set2, r.d, R, 0, 10, Granted}, {r.set2, e, R, 0, 11, Granted}, {r.set2, r.d, W, R, 12, Queued},
		{r.set3, tx(7), W, 0, 20, Granted}, {r.set3, r.t8, R, 0, 21, Queued},
	} {
		res, err := r.s.ApplyAcquire(&statepb.LockAcquire{SetId: c.set[:], Holder: c.h, Mode: int32(c.mode), From: int32(c.from), RequestId: c.req, Principal: "p"})
		if err != nil || res.Outcome != c.want {
			t.Fatalf("request %d: %v %v, want %v", c.req, res.Outcome, err, c.want)
		}
	}
	return r
}

// TestRequestIsItsHoldersByRulesVersion: a lock is a single client's
// (spec CC 1.2.3, "each lock is associated with a single resource and a
// single client"; 1.5, "each transaction acquire locks on its own
// behalf"), and so is the request that waits for it (2.3 lock and
// change_mode block the calling client until it is granted). From rules
// version 3 a request id names a request to its own holder only: another
// holder's retry of it is refused NoSuchObject, as a request that is not
// there, and its cancel is skipped. Under rules version 2 (entries already
// in the log, or a cluster with a member of an older binary) ids alone
// matched, and the same entries are decided as they were: another holder
// attached to the request, took its grant, cancelled its wait.
func TestRequestIsItsHoldersByRulesVersion(t *testing.T) {
	type op func(r *requestStates) (any, error)
	acquire := func(set func(r *requestStates) djinn.ID, h func(r *requestStates) *statepb.LockHolderState, mode, from Mode, req uint64) op {
		return func(r *requestStates) (any, error) {
			id := set(r)
			res, err := r.s.ApplyAcquire(&statepb.LockAcquire{SetId: id[:], Holder: h(r), Mode: int32(mode), From: int32(from), RequestId: req, Principal: "p"})
			if err != nil {
				return nil, err
			}
			if res.Outcome == Granted {
				return fmt.Sprintf("granted %d", res.Fence), nil
			}
			return res.Outcome.String(), nil
		}
	}
	cancel := func(h func(r *requestStates) *statepb.LockHolderState, req uint64) op {
		return func(r *requestStates) (any, error) {
			c := &statepb.LockCancel{RequestIds: []uint64{req}}
			if h != nil {
				c.Holder = h(r)
			}
			r.s.ApplyCancel(c)
			if slices.Contains(r.s.Waiting(), req) {
				return "still waiting", nil
			}
			return "cancelled", nil
		}
	}
	set := func(r *requestStates) djinn.ID { return r.set }
	set2 := func(r *requestStates) djinn.ID { return r.set2 }
	set3 := func(r *requestStates) djinn.ID { return r.set3 }
	a := func(r *requestStates) *statepb.LockHolderState { return r.a }
	b := func(r *requestStates) *statepb.LockHolderState { return r.b }
	d := func(r *requestStates) *statepb.LockHolderState { return r.d }
	m := func(r *requestStates) *statepb.LockHolderState { return r.m }
	t8 := func(r *requestStates) *statepb.LockHolderState { return r.t8 }
	t9 := func(r *requestStates) *statepb.LockHolderState { return r.t9 }
	const notFound = string(djinn.NoSuchObject)
	for _, c := range []struct {
		name       string
		op         op
		old, rules string // the answer under rules 2, and from 3 on
	}{
		{"CC 2.3 lock: another owner's retry of a granted request's id", acquire(set, m, W, 0, 1), "granted 1", notFound},
		{"CC 2.3 lock: another owner's retry of a waiting request's id", acquire(set, m, R, 0, 2), "queued", notFound},
		{"CC 2.3 change_mode: another owner's retry of a waiting change_mode's id", acquire(set2, m, W, R, 12), "queued", notFound},
		{"CC 1.5 another transaction's retry of a waiting request's id", acquire(set3, t9, R, 0, 21), "queued", notFound},
		{"CC 2.3 another owner's cancel of a waiting request", cancel(m, 2), "cancelled", "still waiting"},
		{"CC 1.5 another transaction's cancel of a waiting request", cancel(t9, 21), "cancelled", "still waiting"},
		{"CC 2.3 lock: the holder's own retry of its granted request", acquire(set, a, W, 0, 1), "granted 1", "granted 1"},
		{"CC 2.3 lock: the holder's own retry of its waiting request", acquire(set, b, R, 0, 2), "queued", "queued"},
		{"CC 2.3 change_mode: the holder's own retry of its waiting change_mode", acquire(set2, d, W, R, 12), "queued", "queued"},
		{"CC 1.5 the transaction's own retry of its waiting request", acquire(set3, t8, R, 0, 21), "queued", "queued"},
		{"CC 2.3 the holder's own cancel", cancel(b, 2), "cancelled", "cancelled"},
		{"CC 1.5 the transaction's own cancel", cancel(t8, 21), "cancelled", "cancelled"},
		{"the service's cancel of a request nobody came back for", cancel(nil, 2), "cancelled", "cancelled"},
	} {
		for _, rules := range []uint32{requestRules - 1, requestRules} {
			want := c.old
			if rules >= requestRules {
				want = c.rules
			}
			r := newRequestStates(t, rules)
			got, err := c.op(r)
			if err != nil {
				got = string(djinn.KindOf(err))
			}
			if got != want {
				t.Errorf("%s, rules %d: %v (%v), want %s", c.name, rules, got, err, want)
			}
			if err != nil && djinn.KindOf(err) == djinn.NoSuchObject && !slices.Equal(r.s.Waiting(), []uint64{2, 12, 21}) {
				t.Errorf("%s, rules %d: waiting %v after the refusal, want 2, 12 and 21 still", c.name, rules, r.s.Waiting())
			}
		}
	}
}
