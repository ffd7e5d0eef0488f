package server

import (
	"context"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/replica"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// A follower serves a read that allows staleness D only from a state that
// holds every write acknowledged more than D before its answer. Having
// heard from the leader recently is not enough: heartbeats keep arriving
// while a follower is still catching up (after a restart, a snapshot
// install, a partition), and the commit index a follower knows is capped
// by its own log, so it can look caught up while far behind. So the
// follower asks the leader for its read index (Admin/Status with
// read_index): every write acknowledged before the question was sent is at
// or below it. Once the follower has applied that index, it holds a read
// point: the index, and when it sent the question (at, on its own clock).
// It answers a read while now < at + D: every write acknowledged before
// now − D, which is before at, is then in its state. Reads never wait for
// a question while the point is young enough: one is asked in the
// background, one at a time, once the point is half as old as a read
// allows; a read waits (at most followerWait) only when the point is
// already too old for it.

// followerWait is the longest a read waits for a new read point before
// the follower refuses it, and the client asks the leader.
const followerWait = 500 * time.Millisecond

// readPoint is what a follower learned of the leader's read index, and
// has applied: every write acknowledged before at (this node's clock, read
// before it asked) is at or below index.
type readPoint struct {
	index uint64
	at    time.Time
}

// readPoints keeps the freshest applied read point and asks for a new one,
// one question at a time.
type readPoints struct {
	mu     sync.Mutex
	latest readPoint // guarded by mu
	asking singleflight.Group
}

// fresh returns a read point younger than maxAge at now, asking for a new
// one (or joining the question under way) in the background once the
// latest is half as old as maxAge, and waiting for it when the latest is
// too old. ask returns the leader's read index; apply waits until this
// node has applied an index.
func (r *readPoints) fresh(ctx context.Context, maxAge time.Duration, now func() time.Time,
	ask func(context.Context) (uint64, error), apply func(context.Context, uint64) error) (readPoint, error) {
	r.mu.Lock()
	p := r.latest
	r.mu.Unlock()
	age := now().Sub(p.at)
	if p.at.IsZero() || age >= maxAge/2 {
		ch := r.asking.DoChan("", func() (any, error) { return r.ask(ctx, now, ask, apply) })
		if !p.at.IsZero() && age < maxAge {
			return p, nil // the question goes on in the background
		}
		select {
		case res := <-ch:
			if res.Err != nil {
				return readPoint{}, res.Err
			}
			p = res.Val.(readPoint)
		case <-ctx.Done():
			return readPoint{}, ctx.Err()
		}
	}
	if now().Sub(p.at) >= maxAge {
		return readPoint{}, djinn.Errorf(djinn.Unavailable, "no read point younger than %v", maxAge)
	}
	return p, nil
}

// ask asks the leader for its read index, waits until this node applied
// it, and keeps the new read point.
func (r *readPoints) ask(ctx context.Context, now func() time.Time,
	ask func(context.Context) (uint64, error), apply func(context.Context, uint64) error) (readPoint, error) {
	at := now()
	// The question outlives the read that started it: others wait on it.
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), probeTimeout)
	defer cancel()
	index, err := ask(actx)
	if err == nil {
		err = apply(actx, index)
	}
	if err != nil {
		return readPoint{}, err
	}
	q := readPoint{index: index, at: at}
	r.mu.Lock()
	defer r.mu.Unlock()
	if q.at.After(r.latest.at) {
		r.latest = q
	}
	return r.latest, nil
}

// followerRead decides whether this follower may answer a read allowing
// maxAge of staleness: it heard from the leader within maxAge and is not
// more than cluster.max-lag entries behind the commit index it knows
// (cheap checks first), and it holds a read point younger than maxAge,
// waiting at most followerWait for a new one. Otherwise it refuses with a
// NotLeaderError naming the leader, and the client asks the leader.
func (s *Server) followerRead(ctx context.Context, maxAge time.Duration) error {
	if err := s.node.Staleness(maxAge, s.cfg.Cluster.MaxLag); err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, followerWait)
	defer cancel()
	if _, err := s.readPoints.fresh(wctx, maxAge, s.now, s.askReadIndex, s.node.WaitApplied); err != nil {
		return &replica.NotLeaderError{Leader: s.node.LeaderEndpoint()}
	}
	return nil
}

// askReadIndex asks the leader for its read index.
func (s *Server) askReadIndex(ctx context.Context) (uint64, error) {
	addr := s.node.LeaderEndpoint()
	if addr == "" {
		return 0, djinn.Errorf(djinn.Unavailable, "no leader is known")
	}
	conn, err := s.pool.Conn(addr)
	if err != nil {
		return 0, err
	}
	st, err := djinnpb.NewAdminClient(conn).Status(ctx, &djinnpb.StatusRequest{ReadIndex: true})
	if err != nil {
		return 0, err
	}
	return st.GetCommitIndex(), nil
}
