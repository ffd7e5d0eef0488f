package replica

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/hashicorp/raft"

	"github.com/djinn-go/djinn"
)

// OpenSnapshot takes a snapshot of the state as applied here now and opens
// it: the caller reads the state machine's snapshot stream and closes it.
// When nothing was applied since the last snapshot, that one is the state
// as applied now, and is opened. It is read from disk, not held in memory.
func (n *Node) OpenSnapshot() (index, term uint64, rc io.ReadCloser, err error) {
	f := n.raft.Snapshot()
	err = f.Error()
	switch {
	case err == nil:
		meta, rc, err := f.Open()
		if err != nil {
			return 0, 0, nil, fmt.Errorf("open the snapshot just taken: %w", err)
		}
		return meta.Index, meta.Term, rc, nil
	case !errors.Is(err, raft.ErrNothingNewToSnapshot):
		return 0, 0, nil, n.raftError(err)
	}
	metas, err := n.snaps.List()
	if err != nil {
		return 0, 0, nil, fmt.Errorf("list snapshots: %w", err)
	}
	if len(metas) == 0 {
		return 0, 0, nil, djinn.Errorf(djinn.Unavailable, "no snapshot to open")
	}
	meta, rc, err := n.snaps.Open(metas[0].ID)
	if err != nil {
		return 0, 0, nil, fmt.Errorf("open snapshot %s: %w", metas[0].ID, err)
	}
	return meta.Index, meta.Term, rc, nil
}

// Restore replaces the cluster's state with the state machine snapshot
// stream r of size bytes (raft's user restore): this node, the leader, takes it on and
// then brings the followers to it by snapshot installation. It is meant
// for a new cluster seeded from a backup, not for one in use: for a while
// the leader commits ahead of its followers.
func (n *Node) Restore(ctx context.Context, index, term uint64, r io.Reader, size int64) error {
	if !n.IsLeader() {
		return &NotLeaderError{Leader: n.LeaderEndpoint()}
	}
	meta := &raft.SnapshotMeta{Version: raft.SnapshotVersionMax, Index: index, Term: term, Size: size}
	if err := n.raft.Restore(meta, r, timeoutOf(ctx)); err != nil {
		return fmt.Errorf("restore snapshot: %w", err)
	}
	return nil
}
