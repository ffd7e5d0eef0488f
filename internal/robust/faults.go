package robust

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/djinn-go/djinn/proto/djinnpb"
)

// Fault kinds.
const (
	KillLeader      = "kill -9 leader"
	KillFollower    = "kill -9 follower"
	PartitionLeader = "leader partitioned"
	Minority        = "minority partition"
	OneWay          = "one-way loss"
	Delay           = "added delay"
	CutConns        = "cut connections"
	Restart         = "restart"
	StalledFsync    = "stalled fsync"
	SnapshotKill    = "kill -9 mid-snapshot"
	InstallKill     = "kill -9 mid-snapshot install"
)

// stallFsyncFile stalls a node's log writes while it is in its data
// directory, in a djinn built with the djinn_failpoint_fsync tag.
const stallFsyncFile = "failpoint-stall-fsync"

// stallSnapshotFile stalls a node's next snapshot write after its first
// bytes while it is in its data directory, and the node announces the
// stall with snapshotStalledFile, in a djinn built with the
// djinn_failpoint_snapshot tag.
const (
	stallSnapshotFile   = "failpoint-stall-snapshot"
	snapshotStalledFile = "failpoint-snapshot-stalled"
)

// AllFaults is every kind, in the order the short schedule injects them.
var AllFaults = []string{KillLeader, PartitionLeader, KillFollower, Minority, OneWay, Delay, CutConns, Restart, StalledFsync, SnapshotKill, InstallKill}

// Fault is one fault of a schedule, held for Hold before it is healed.
type Fault struct {
	Kind string
	Hold time.Duration
}

// Schedule draws n faults from the kinds with rng, each held 1–4s.
func Schedule(rng *rand.Rand, n int) []Fault {
	out := make([]Fault, n)
	for i := range out {
		out[i] = Fault{Kind: AllFaults[rng.IntN(len(AllFaults))], Hold: time.Duration(1000+rng.IntN(3000)) * time.Millisecond}
	}
	return out
}

// inject applies f, holds it, heals it, and waits until the cluster has
// every member voting again.
func (r *Run) inject(ctx context.Context, f Fault, rng *rand.Rand) error {
	leader, err := r.c.WaitLeader(ctx)
	if err != nil {
		return err
	}
	var follower *Node
	for _, n := range r.c.Nodes {
		if n != leader && (follower == nil || rng.IntN(2) == 0) {
			follower = n
		}
	}
	r.log("fault %s (leader %s, follower %s, hold %v)", f.Kind, leader.ID, follower.ID, f.Hold)
	began := r.clock.Now()
	defer func() { r.window(began, r.clock.Now()) }()
	var down *Node
	switch f.Kind {
	case KillLeader:
		t0 := time.Now()
		leader.Kill()
		down = leader
		r.measure(ctx, f.Kind, t0, leader)
	case KillFollower:
		follower.Kill()
		down = follower
	case PartitionLeader:
		t0 := time.Now()
		r.isolate(leader)
		r.measure(ctx, f.Kind, t0, leader)
	case Minority:
		r.isolate(follower)
	case OneWay:
		for _, n := range r.c.Nodes {
			if n != leader {
				r.c.Net.Set(Link{From: leader.ID, To: n.ID}, Rule{Drop: true})
			}
		}
	case Delay:
		for _, a := range r.c.Nodes {
			for _, b := range r.c.Nodes {
				if a != b {
					r.c.Net.Set(Link{From: a.ID, To: b.ID}, Rule{Delay: time.Duration(20+rng.IntN(80)) * time.Millisecond})
				}
			}
		}
	case CutConns:
		r.c.Net.Cut("")
	case StalledFsync:
		if err := os.WriteFile(filepath.Join(leader.dir, stallFsyncFile), nil, 0o600); err != nil {
			return err
		}
		t0 := time.Now()
		measured := make(chan struct{})
		go func() { defer close(measured); r.measure(ctx, f.Kind, t0, nil) }()
		defer func() { <-measured }()
	case SnapshotKill:
		victim := follower
		if rng.IntN(2) == 0 {
			victim = leader
		}
		if err := r.killMidSnapshot(ctx, victim, "persist"); err != nil {
			return err
		}
		down = victim
	case InstallKill:
		if err := r.killMidInstall(ctx, leader, follower); err != nil {
			return err
		}
		down = follower
	case Restart:
		if err := follower.Stop(); err != nil {
			return err
		}
		down = follower
	default:
		return fmt.Errorf("unknown fault %q", f.Kind)
	}
	r.pause(ctx, f.Hold)
	switch f.Kind {
	case CutConns:
		r.c.Net.Cut("")
	case StalledFsync:
		if err := os.Remove(filepath.Join(leader.dir, stallFsyncFile)); err != nil {
			return err
		}
	}
	r.c.Net.Heal()
	if down != nil {
		if err := down.Start(ctx); err != nil {
			return fmt.Errorf("after %s: %w", f.Kind, err)
		}
	}
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := r.c.WaitVoters(wctx); err != nil {
		return fmt.Errorf("after %s: %w", f.Kind, err)
	}
	return nil
}

// isolate cuts n off from the other members, both ways: Raft and the
// members' gRPC calls to it. Clients still reach it.
func (r *Run) isolate(n *Node) {
	for _, o := range r.c.Nodes {
		if o != n {
			r.c.Net.Set(Link{From: n.ID, To: o.ID}, Rule{Drop: true})
			r.c.Net.Set(Link{From: o.ID, To: n.ID}, Rule{Drop: true})
		}
	}
	r.c.Net.Set(Link{From: Peers, To: n.ID}, Rule{Drop: true})
	r.c.Net.Set(Link{From: n.ID, To: Peers}, Rule{Drop: true})
}

// measure records how long after t0 a write first succeeds at a member
// other than the old leader: a lock set created by a client that tries
// the others in turn.
func (r *Run) measure(ctx context.Context, kind string, t0 time.Time, old *Node) {
	mctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for i := 0; mctx.Err() == nil; i++ {
		n := r.c.Nodes[i%len(r.c.Nodes)]
		if !n.Up() || n == old {
			continue
		}
		actx, stop := context.WithTimeout(mctx, 300*time.Millisecond)
		_, err := djinnpb.NewLockServiceClient(n.Conn(Alice)).CreateSet(actx, &djinnpb.CreateLockSetRequest{LeaseDurationNanos: int64(time.Second)})
		stop()
		if err == nil {
			r.outage(kind, time.Since(t0))
			return
		}
		r.pause(mctx, 10*time.Millisecond)
	}
}

// killMidSnapshot stalls n's next snapshot write, waits until n announces
// that it is stalled in the middle of writing one, and kills it there.
// The member is then started on the same data like any killed member: it
// must come back serving everything acknowledged (or refuse to start,
// saying why, which the run reports as an error: the suite expects a
// member killed mid-snapshot to recover from its previous snapshot and
// log, and the checkers then find whether anything acknowledged was
// lost).
func (r *Run) killMidSnapshot(ctx context.Context, n *Node, kind string) error {
	stall, stalled := filepath.Join(n.dir, stallSnapshotFile), filepath.Join(n.dir, snapshotStalledFile)
	_ = os.Remove(stalled)
	if err := os.WriteFile(stall, []byte(kind), 0o600); err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err := poll(wctx, n.ID+" stalled in a snapshot", func() bool {
		_, err := os.Stat(stalled)
		return err == nil
	})
	n.Kill()
	for _, f := range []string{stall, stalled} {
		if rerr := os.Remove(f); rerr != nil && !os.IsNotExist(rerr) && err == nil {
			err = rerr
		}
	}
	if err != nil {
		return err
	}
	r.count("members killed mid-snapshot " + kind)
	return nil
}

// killMidInstall kills the follower, waits until the leader's log begins
// past the follower's last applied entry (the members snapshot often,
// keep 64 entries behind a snapshot and write small log segments, so the
// leader soon compacts them away), so that the follower can only catch
// up from a snapshot the leader sends; then starts the follower with its
// next snapshot install
// stalled, kills it in the middle of writing the snapshot the leader
// sent, and leaves it down (inject starts it again on the same data).
func (r *Run) killMidInstall(ctx context.Context, leader, follower *Node) error {
	sctx, cancel := context.WithTimeout(ctx, time.Second)
	st, err := djinnpb.NewAdminClient(follower.Direct()).Status(sctx, &djinnpb.StatusRequest{})
	cancel()
	if err != nil {
		return fmt.Errorf("%s's applied index: %w", follower.ID, err)
	}
	follower.Kill()
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := poll(wctx, leader.ID+" compacted past "+follower.ID, func() bool {
		return firstLogIndex(leader) > st.AppliedIndex+1
	}); err != nil {
		return err
	}
	started := make(chan error, 1)
	go func() { started <- follower.Start(ctx) }()
	err = r.killMidSnapshot(ctx, follower, "install")
	if serr := <-started; err == nil && serr != nil && !errors.Is(serr, ErrRefused) {
		err = serr // killed while starting is expected; not starting at all is not
	}
	return err
}

// firstLogIndex is the first index n's log holds: the least base index of
// its log's segment files (named base-id.wal, in hex the id), or 0.
func firstLogIndex(n *Node) uint64 {
	ents, _ := os.ReadDir(filepath.Join(n.dir, "raft", "wal"))
	var first uint64
	for _, e := range ents {
		var base, id uint64
		if _, err := fmt.Sscanf(e.Name(), "%020d-%016x.wal", &base, &id); err == nil && (first == 0 || base < first) {
			first = base
		}
	}
	return first
}
