package robust

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/anishathalye/porcupine"
	"google.golang.org/grpc"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/grpcerr"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// The lock workload: workers, each a lock owner with a long lease, take a
// set's write lock with try_lock, check its fencing token, and unlock it.
// The history is checked for linearizability against a write lock with
// fencing tokens (LockModel), and for fencing safety (CheckFencing).

type lockOp int

const (
	opAcquire lockOp = iota
	opRelease
	opValidate
)

type lockInput struct {
	Op     lockOp
	Set    int
	Client int
	Fence  uint64 // for opValidate
}

type lockOutput struct {
	Unknown bool
	OK      bool   // granted, released, or valid
	Fence   uint64 // a grant's token
}

// lockState is a set's write lock: who holds it (-1: no one) and the last
// token granted; Exact is false when the last grant's token is unknown
// (its answer was lost), Fence then being a lower bound.
type lockState struct {
	Holder int
	Fence  uint64
	Exact  bool
}

// LockModel is one write lock per set, granted by try_lock only when free
// (or already the asker's), each grant with a token above every earlier
// one; a token is valid while its grant is held.
var LockModel = (&porcupine.NondeterministicModel{
	Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
		by := map[int][]porcupine.Operation{}
		for _, op := range h {
			s := op.Input.(lockInput).Set
			by[s] = append(by[s], op)
		}
		out := make([][]porcupine.Operation, 0, len(by))
		for s := 0; len(out) < len(by); s++ {
			if ops, ok := by[s]; ok {
				out = append(out, ops)
			}
		}
		return out
	},
	Init: func() []any { return []any{lockState{Holder: -1, Exact: true}} },
	Step: func(state, input, output any) []any {
		s, in, out := state.(lockState), input.(lockInput), output.(lockOutput)
		switch in.Op {
		case opAcquire:
			free := s.Holder == -1 || s.Holder == in.Client
			switch {
			case out.Unknown && free:
				return []any{s, lockState{Holder: in.Client, Fence: s.Fence, Exact: false}}
			case out.Unknown:
				return []any{s}
			case out.OK && free && out.Fence > s.Fence:
				return []any{lockState{Holder: in.Client, Fence: out.Fence, Exact: true}}
			case !out.OK && !free:
				return []any{s}
			}
		case opRelease:
			held := s.Holder == in.Client
			released := lockState{Holder: -1, Fence: s.Fence, Exact: s.Exact}
			switch {
			case out.Unknown && held:
				return []any{s, released}
			case out.Unknown:
				return []any{s}
			case out.OK && held:
				return []any{released}
			case !out.OK && !held:
				return []any{s}
			}
		case opValidate:
			matches := s.Holder != -1 && (s.Exact && s.Fence == in.Fence || !s.Exact && in.Fence > s.Fence)
			if out.OK == matches || !out.OK && !s.Exact {
				return []any{s}
			}
		}
		return nil
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(lockInput), output.(lockOutput)
		res := fmt.Sprint(out.OK)
		if out.Unknown {
			res = "?"
		}
		switch in.Op {
		case opAcquire:
			return fmt.Sprintf("c%d try_lock(set %d) -> %s fence %d", in.Client, in.Set, res, out.Fence)
		case opRelease:
			return fmt.Sprintf("c%d unlock(set %d) -> %s", in.Client, in.Set, res)
		}
		return fmt.Sprintf("validate(set %d, %d) -> %s", in.Set, in.Fence, res)
	},
}).ToModel()

// lockSets creates the workload's lock sets.
func (r *Run) lockSets(ctx context.Context, n int) error {
	caller := NewCaller(r.c, 0)
	for range n {
		var id []byte
		_, err := caller.Call(ctx, func(ctx context.Context, cc *grpc.ClientConn) error {
			got, err := djinnpb.NewLockServiceClient(cc).CreateSet(ctx, &djinnpb.CreateLockSetRequest{LeaseDurationNanos: int64(time.Hour)})
			if err == nil {
				id = got.SetId
			}
			return err
		})
		if err != nil {
			return fmt.Errorf("create lock set: %w", err)
		}
		r.sets = append(r.sets, id)
	}
	return nil
}

// lockWorker locks and unlocks random sets as its own owner until ctx
// ends. It stops once an answer is lost for good: what it holds is then
// unknown.
func (r *Run) lockWorker(ctx context.Context, id int, rng *rand.Rand) {
	caller := NewCaller(r.c, id)
	var owner []byte
	if _, err := caller.Call(ctx, func(ctx context.Context, cc *grpc.ClientConn) error {
		got, err := djinnpb.NewLockServiceClient(cc).CreateOwner(ctx, &djinnpb.CreateLockOwnerRequest{LeaseDurationNanos: int64(time.Hour)})
		if err == nil {
			owner = got.Lease.Cookie
		}
		return err
	}); err != nil {
		return
	}
	holder := &djinnpb.LockHolder{Owner: owner}
	for ctx.Err() == nil {
		set := rng.IntN(len(r.sets))
		req := &djinnpb.LockRequest{SetId: r.sets[set], Holder: holder, Mode: djinnpb.LockMode_LOCK_MODE_WRITE, Try: true, RequestId: rng.Uint64() | 1}
		in := lockInput{Op: opAcquire, Set: set, Client: id}
		var fence uint64
		granted := false
		o := r.retry(ctx, caller, func(ctx context.Context, cc *grpc.ClientConn) error {
			got, err := djinnpb.NewLockServiceClient(cc).Lock(ctx, req)
			if err == nil {
				granted, fence = got.Granted, got.Fence
			}
			return err
		}, in, func() lockOutput { return lockOutput{OK: granted, Fence: fence} })
		if o == Unknown || !granted {
			if o == Unknown {
				return
			}
			r.pause(ctx, time.Duration(5+rng.IntN(30))*time.Millisecond)
			continue
		}
		valid := false
		vin := lockInput{Op: opValidate, Set: set, Client: id, Fence: fence}
		r.retry(ctx, caller, func(ctx context.Context, cc *grpc.ClientConn) error {
			got, err := djinnpb.NewLockServiceClient(cc).ValidateFence(ctx, &djinnpb.ValidateFenceRequest{SetId: r.sets[set], Fence: fence})
			if err == nil {
				valid = got.Valid
			}
			return err
		}, vin, func() lockOutput { return lockOutput{OK: valid} })
		r.pause(ctx, time.Duration(rng.IntN(20))*time.Millisecond)
		held := true
		rin := lockInput{Op: opRelease, Set: set, Client: id}
		unlock := &djinnpb.UnlockRequest{SetId: r.sets[set], Holder: holder, Mode: djinnpb.LockMode_LOCK_MODE_WRITE}
		o = r.retry(r.grace, caller, func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := djinnpb.NewLockServiceClient(cc).Unlock(ctx, unlock)
			if errors.Is(grpcerr.FromStatus(err), djinn.ErrLockNotHeld) {
				held = false
				return nil
			}
			return err
		}, rin, func() lockOutput { return lockOutput{OK: held} })
		if o == Unknown {
			return
		}
	}
}

// retry calls f until an answer comes back or ctx ends, recording one
// operation from the first call to the answer: calls are repeated only
// when repeating them finds the first (the same request id, an unlock
// whose refusal says it was done). A refusal that is not an answer is not
// recorded; an answer never given is recorded as unknown.
func (r *Run) retry(ctx context.Context, caller *Caller, f func(context.Context, *grpc.ClientConn) error, in lockInput, out func() lockOutput) Outcome {
	call := r.clock.Now()
	uncertain := false
	for {
		cctx := ctx
		if uncertain {
			cctx = r.grace // once sent, it is asked again until the run's end
		}
		o, _ := caller.Call(cctx, f)
		switch {
		case o == Done:
			res := out()
			if uncertain && in.Op == opRelease && !res.OK {
				res = lockOutput{Unknown: true} // the lost attempt may have unlocked
			}
			r.lock.Add(porcupine.Operation{ClientId: in.Client, Input: in, Call: call, Output: res, Return: r.clock.Now()})
			return Done
		case o == Unknown:
			uncertain = true
			r.count("lock-retried")
		case !uncertain:
			return NotDone
		}
		if r.grace.Err() != nil {
			if in.Op != opValidate {
				r.lock.Add(porcupine.Operation{ClientId: in.Client, Input: in, Call: call, Output: lockOutput{Unknown: true}, Return: never})
				return Unknown
			}
			return NotDone
		}
	}
}
