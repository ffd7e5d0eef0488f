package replica

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// failStop is the log store raft writes through. A write that fails — a
// full or failing disk, a data directory gone — leaves the log in a state
// this node cannot vouch for: raft answers the entries' proposals with the
// error and steps down, but would try again at its next election and so
// limp on. The first failure is reported, once, through failed, so that
// the node can stop and be restarted on a log it can read (Node.Failed).
//
// Every write (an append and its fsync) is also reported to observe, for
// metrics: how long it took and whether it failed.
type failStop struct {
	raft.LogStore
	observe func(d time.Duration, err error)
	once    sync.Once
	failed  chan error // capacity 1: holds the first failure
	did     atomic.Bool
	dir     string  // the data directory, for the stalled-fsync failpoint
	end     *logEnd // the log-end record, told of appends and deletions; or nil
}

func newFailStop(logs raft.LogStore, observe func(time.Duration, error)) *failStop {
	if observe == nil {
		observe = func(time.Duration, error) {}
	}
	return &failStop{LogStore: logs, observe: observe, failed: make(chan error, 1)}
}

func (f *failStop) StoreLog(l *raft.Log) error {
	start := time.Now()
	stallFsync(f.dir)
	return f.stored(l, f.check(start, f.LogStore.StoreLog(l)))
}

func (f *failStop) StoreLogs(ls []*raft.Log) error {
	start := time.Now()
	stallFsync(f.dir)
	err := f.check(start, f.LogStore.StoreLogs(ls))
	if len(ls) == 0 {
		return err
	}
	return f.stored(ls[len(ls)-1], err)
}

// stored tells the log-end record that the log reached last, once its
// append succeeded.
func (f *failStop) stored(last *raft.Log, err error) error {
	if err == nil && f.end != nil {
		f.end.appendedTo(last.Index)
	}
	return err
}

// DeleteRange lowers the log-end record first when the entries deleted
// are the log's end.
func (f *failStop) DeleteRange(lo, hi uint64) error {
	if f.end != nil {
		first, err := f.LogStore.FirstIndex()
		if err != nil {
			return err
		}
		if lo <= first {
			lo = 1 // the whole log: a snapshot installed holds what it held
		}
		if err := f.end.deleting(lo, hi); err != nil {
			f.fail(err)
			return err
		}
	}
	return f.LogStore.DeleteRange(lo, hi)
}

func (f *failStop) check(start time.Time, err error) error {
	f.observe(time.Since(start), err)
	if err != nil {
		f.fail(err)
	}
	return err
}

// fail reports the first failure.
func (f *failStop) fail(err error) {
	f.once.Do(func() { f.did.Store(true); f.failed <- err })
}

// IsMonotonic passes on whether the log store takes only consecutive
// indexes (raft-wal does): raft then empties it after it installs a
// snapshot, instead of appending after a hole the store refuses.
func (f *failStop) IsMonotonic() bool {
	m, ok := f.LogStore.(raft.MonotonicLogStore)
	return ok && m.IsMonotonic()
}

var _ raft.MonotonicLogStore = (*failStop)(nil)

// hasFailed reports whether a write has failed.
func (f *failStop) hasFailed() bool { return f.did.Load() }
