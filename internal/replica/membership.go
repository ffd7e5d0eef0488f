package replica

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/raft"

	"github.com/djinn-go/djinn"
)

// Membership changes and the read barrier. Every change goes through the
// leader's log (raft's configuration entries); each method here fails with a
// NotLeaderError elsewhere, so callers point clients at the leader.

// LastContact returns how long ago this node last heard from a leader: 0 on
// the leader, and -1 when it never has.
func (n *Node) LastContact() time.Duration {
	if n.IsLeader() {
		return 0
	}
	t := n.raft.LastContact()
	if t.IsZero() {
		return -1
	}
	return max(time.Since(t), 0)
}

// CommitIndex returns the highest log index this node knows committed.
func (n *Node) CommitIndex() uint64 { return n.raft.CommitIndex() }

// timeoutOf turns ctx's deadline into the timeout raft's calls take (0:
// none).
func timeoutOf(ctx context.Context) time.Duration {
	if dl, ok := ctx.Deadline(); ok {
		return max(time.Until(dl), time.Millisecond)
	}
	return 0
}

func checkServer(id, raftAddr string) error {
	if err := CheckNodeID(id); err != nil {
		return err
	}
	if err := djinn.CheckEndpoint(raftAddr); err != nil {
		return djinn.Errorf(djinn.InvalidArgument, "raft address: %v", err)
	}
	return nil
}

// maxNodeID bounds a node id's length: every configuration entry of the
// log carries every member's.
const maxNodeID = 128

// CheckNodeID refuses a node id that is empty, longer than maxNodeID, or
// has other characters than letters, digits, '.', '_' and '-' (what a
// peer certificate's djinn-peer://NODE-ID can name, and what the node-id
// file keeps on a line).
func CheckNodeID(id string) error {
	switch {
	case id == "":
		return djinn.Errorf(djinn.InvalidArgument, "node id: missing")
	case len(id) > maxNodeID:
		return djinn.Errorf(djinn.InvalidArgument, "node id of %d bytes: longer than %d", len(id), maxNodeID)
	case strings.Trim(id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") != "":
		return djinn.Errorf(djinn.InvalidArgument, "node id %q: want letters, digits, '.', '_' and '-' only", id)
	}
	return nil
}

// AddNonvoter adds a server that receives the log but does not vote (or
// leaves a member that already is one as it is). Only the leader can.
func (n *Node) AddNonvoter(ctx context.Context, id, raftAddr string) error {
	if err := checkServer(id, raftAddr); err != nil {
		return err
	}
	if err := n.raft.AddNonvoter(raft.ServerID(id), raft.ServerAddress(raftAddr), 0, timeoutOf(ctx)).Error(); err != nil {
		return n.raftError(err)
	}
	return nil
}

// RemoveServer removes a member. Only the leader can; a leader that
// removes itself steps down once the change is committed.
func (n *Node) RemoveServer(ctx context.Context, id string) error {
	if id == "" {
		return djinn.Errorf(djinn.InvalidArgument, "node id: missing")
	}
	ms, err := n.Members()
	if err != nil {
		return err
	}
	if !hasMember(ms, id) {
		return djinn.Errorf(djinn.NoSuchObject, "node %q: not a member of the cluster", id)
	}
	if err := n.raft.RemoveServer(raft.ServerID(id), 0, timeoutOf(ctx)).Error(); err != nil {
		return n.raftError(err)
	}
	return nil
}

func hasMember(ms []Member, id string) bool {
	for _, m := range ms {
		if m.ID == id {
			return true
		}
	}
	return false
}

// TransferLeadership hands leadership to voter id, or, with id empty, to
// the most up-to-date voter. It returns once the transfer is done or has
// failed.
func (n *Node) TransferLeadership(ctx context.Context, id string) error {
	if !n.IsLeader() {
		return &NotLeaderError{Leader: n.LeaderEndpoint()}
	}
	// The successor is elected without waiting for timeouts: no leader
	// lease may outlive the transfer's start, nor start before it ends
	// (leaderlease.go).
	release := n.lease.hold()
	f, err := n.startTransfer(id)
	if err != nil || f == nil {
		release()
		return err
	}
	done := make(chan error, 1)
	go func() {
		err := f.Error()
		release()
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			return djinn.Errorf(djinn.Unavailable, "leadership transfer: %v", err)
		}
		return nil
	case <-ctx.Done():
		return errors.Join(ctx.Err(), djinn.Errorf(djinn.Unavailable, "gave up waiting for the leadership transfer: it may still happen"))
	}
}

// startTransfer starts the transfer to voter id (any, when empty); a nil
// future when this node is id already.
func (n *Node) startTransfer(id string) (raft.Future, error) {
	ms, err := n.Members()
	if err != nil {
		return nil, err
	}
	if id == "" {
		if !slices.ContainsFunc(ms, func(m Member) bool { return m.Voter && m.ID != n.id }) {
			return nil, djinn.Errorf(djinn.InvalidArgument, "no other voter to hand leadership to: node %s is the cluster's only voter; add a member first (djinn member add)", n.id)
		}
		n.beforeTransfer()
		return n.raft.LeadershipTransfer(), nil
	}
	var target *Member
	for i := range ms {
		if ms[i].ID == id {
			target = &ms[i]
		}
	}
	switch {
	case target == nil:
		return nil, djinn.Errorf(djinn.NoSuchObject, "node %q: not a member of the cluster", id)
	case !target.Voter:
		return nil, djinn.Errorf(djinn.InvalidArgument, "node %q: a non-voter cannot lead; wait until it is promoted", id)
	case id == n.id:
		return nil, nil // already leads
	}
	n.beforeTransfer()
	return n.raft.LeadershipTransferToServer(raft.ServerID(id), raft.ServerAddress(target.RaftAddr)), nil
}

func (n *Node) beforeTransfer() {
	if n.cfg.onTransfer != nil {
		n.cfg.onTransfer()
	}
}

// WaitApplied blocks until this node has applied the log up to index, or
// ctx ends.
func (n *Node) WaitApplied(ctx context.Context, index uint64) error {
	n.waiting.Add(1)
	defer n.waiting.Add(-1)
	for {
		n.waitMu.Lock()
		advanced := n.advanced
		n.waitMu.Unlock()
		if n.applied.Load() >= index {
			return nil
		}
		select {
		case <-advanced:
		case <-n.stop:
			return djinn.Errorf(djinn.Unavailable, "server shutting down")
		case <-ctx.Done():
			return errors.Join(ctx.Err(), djinn.Errorf(djinn.Unavailable, "gave up waiting for log entry %d to be applied", index))
		}
	}
}

// appliedTo records that the state machine has applied the log up to
// index, and wakes whoever waits for it.
func (n *Node) appliedTo(index uint64) {
	n.applied.Store(index)
	if n.waiting.Load() == 0 {
		return
	}
	n.waitMu.Lock()
	close(n.advanced)
	n.advanced = make(chan struct{})
	n.waitMu.Unlock()
}

// ReadBarrier makes a following read of the state linearizable: it takes
// the read index (ReadIndex) and waits until this node has applied it. Only a
// leader that has applied its own term's first entry can, so it fails with
// a NotLeaderError elsewhere and Unavailable on a leader just elected.
func (n *Node) ReadBarrier(ctx context.Context) error {
	index, err := n.ReadIndex()
	if err != nil {
		return err
	}
	return n.WaitApplied(ctx, index)
}

// ReadIndex returns a read index: an index at or above that of every
// write acknowledged, by this leader or an earlier one, before the call,
// and one the state machine applies (a command's). It notes the index of
// the last command applied here and then confirms that this node still
// leads (free under the leader lease, a quorum round trip otherwise). A
// write this leader acknowledged was applied here first (Propose answers
// once it is), and one an earlier leader acknowledged was applied before
// this node began to serve as leader (its term's barrier), so both are at
// or below it. (Raft's commit index would do too, but it may name a
// barrier or a term's first entry, which no state machine applies, so a
// member waiting for it would wait for the next command.) Only a leader
// that has applied its own term's first entry can answer, so it fails
// with a NotLeaderError elsewhere and Unavailable on a leader just
// elected.
func (n *Node) ReadIndex() (uint64, error) {
	if !n.IsLeader() {
		return 0, &NotLeaderError{Leader: n.LeaderEndpoint()}
	}
	if !n.leading.Load() {
		return 0, djinn.Errorf(djinn.Unavailable, "leader just elected: not yet serving reads")
	}
	index := n.AppliedIndex()
	if !n.LeaderLease() {
		if err := n.VerifyLeader(); err != nil {
			return 0, err
		}
	}
	return index, nil
}

// Staleness reports whether this node's state may serve a read that
// allows staleness up to maxAge and maxLag log entries: the leader always
// can; a follower can when it heard from the leader within maxAge and has
// applied the log to within maxLag of the commit index it knows. It
// returns why not otherwise.
func (n *Node) Staleness(maxAge time.Duration, maxLag uint64) error {
	if n.IsLeader() {
		return nil
	}
	age := n.LastContact()
	if age < 0 || age > maxAge {
		return &NotLeaderError{Leader: n.LeaderEndpoint()}
	}
	if commit, applied := n.CommitIndex(), n.applied.Load(); commit > applied && commit-applied > maxLag {
		return &NotLeaderError{Leader: n.LeaderEndpoint()}
	}
	return nil
}
