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
// or below it. The follower notes when it sent the question (at, on its
// own clock) and answers a read only while now < at + D and once it has
// applied that index: every write acknowledged before now − D, which is
// before at, is then in its state. One question serves every read that
// arrives while its answer is fresh enough; questions are asked one at a
// time, and asked again once the last answer is older than half the
// bound a read allows.

// readPoint is what a follower learned of the leader's read index: every
// write acknowledged before at (this node's clock, read before it asked)
// is at or below index.
type readPoint struct {
	index uint64
	at    time.Time
}

// readPoints keeps the freshest read point and asks for a new one, one
// question at a time.
type readPoints struct {
	mu     sync.Mutex
	latest readPoint // guarded by mu
	asking singleflight.Group
}

// fresh returns the latest read point if it is younger than half of
// maxAge at now; otherwise it asks (or joins the question under way) and
// returns the answer — or, when no answer comes, the latest point while it
// is younger than maxAge.
func (r *readPoints) fresh(ctx context.Context, maxAge time.Duration, now func() time.Time, ask func(context.Context) (uint64, error)) (readPoint, error) {
	r.mu.Lock()
	p := r.latest
	r.mu.Unlock()
	if !p.at.IsZero() && now().Sub(p.at) < maxAge/2 {
		return p, nil
	}
	ch := r.asking.DoChan("", func() (any, error) {
		at := now()
		// The question outlives the read that started it: others wait on it.
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), probeTimeout)
		defer cancel()
		index, err := ask(actx)
		if err != nil {
			return nil, err
		}
		q := readPoint{index: index, at: at}
		r.mu.Lock()
		defer r.mu.Unlock()
		if q.at.After(r.latest.at) {
			r.latest = q
		}
		return q, nil
	})
	select {
	case res := <-ch:
		if res.Err == nil {
			return res.Val.(readPoint), nil
		}
		// No answer (no leader, say): the point held still serves while
		// it is younger than the bound, so a cluster that lost its leader
		// answers reads a while longer.
		if !p.at.IsZero() && now().Sub(p.at) < maxAge {
			return p, nil
		}
		return readPoint{}, res.Err
	case <-ctx.Done():
		return readPoint{}, ctx.Err()
	}
}

// followerRead decides whether this follower may answer a read allowing
// maxAge of staleness: it heard from the leader within maxAge and is not
// more than cluster.max-lag entries behind the commit index it knows
// (cheap checks first), and it has applied the leader's read index of a
// question sent less than maxAge before the answer leaves. Otherwise it
// refuses with a NotLeaderError naming the leader, and the client asks the
// leader.
func (s *Server) followerRead(ctx context.Context, maxAge time.Duration) error {
	if err := s.node.Staleness(maxAge, s.cfg.Cluster.MaxLag); err != nil {
		return err
	}
	refuse := &replica.NotLeaderError{Leader: s.node.LeaderEndpoint()}
	p, err := s.readPoints.fresh(ctx, maxAge, s.now, s.askReadIndex)
	if err != nil {
		return refuse
	}
	wctx, cancel := context.WithDeadline(ctx, p.at.Add(maxAge))
	defer cancel()
	if err := s.node.WaitApplied(wctx, p.index); err != nil {
		return refuse
	}
	// WaitApplied returned in time, but the answer must leave in time too.
	if !s.now().Before(p.at.Add(maxAge)) {
		return refuse
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
