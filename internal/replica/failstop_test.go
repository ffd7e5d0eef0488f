package replica

import (
	"context"
	"errors"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	wal "github.com/hashicorp/raft-wal"
)

// brokenDisk is a log store whose writes fail once broken is set.
type brokenDisk struct {
	raft.LogStore
	broken atomic.Bool
}

var errDisk = errors.New("write: no space left on device")

func (d *brokenDisk) StoreLog(l *raft.Log) error {
	if d.broken.Load() {
		return errDisk
	}
	return d.LogStore.StoreLog(l)
}

func (d *brokenDisk) StoreLogs(ls []*raft.Log) error {
	if d.broken.Load() {
		return errDisk
	}
	return d.LogStore.StoreLogs(ls)
}

// TestFailedLogWrite: a log write that fails fails the proposal, is
// reported once through Failed, and loses nothing acknowledged: the node
// opened again on its directory has every entry acknowledged before, and
// not the one that failed.
func TestFailedLogWrite(t *testing.T) {
	dir := t.TempDir()
	disk := &brokenDisk{}
	leading := make(chan struct{}, 1)
	c := newCounter()
	n, err := Open(Config{
		DataDir: dir, RaftAddr: "127.0.0.1:0", Bootstrap: true,
		OnLeader: func(ctx context.Context) {
			select { // a node whose log fails leads again and again
			case leading <- struct{}{}:
			default:
			}
			<-ctx.Done()
		},
		HeartbeatTimeout: 100 * time.Millisecond, ElectionTimeout: 100 * time.Millisecond,
		wrapLogs: func(l raft.LogStore) raft.LogStore { disk.LogStore = l; return disk },
	}, c)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	<-leading
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i := 1; i <= 2; i++ {
		if got, err := propose(ctx, n); err != nil || got.(uint64) != uint64(i) {
			t.Fatalf("propose %d = %v, %v", i, got, err)
		}
	}
	select {
	case err := <-n.Failed():
		t.Fatalf("Failed reported %v with every write done", err)
	default:
	}

	disk.broken.Store(true)
	if got, err := propose(ctx, n); err == nil {
		t.Fatalf("a proposal whose log write failed was acknowledged: %v", got)
	}
	select {
	case err := <-n.Failed():
		if !errors.Is(err, errDisk) {
			t.Errorf("Failed reported %v, want the log's error %v", err, errDisk)
		}
	case <-ctx.Done():
		t.Fatal("Failed did not report the failed log write")
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}

	leading2 := make(chan struct{}, 1)
	n2, _ := open(t, dir, false, func(ctx context.Context) { leading2 <- struct{}{}; <-ctx.Done() })
	defer n2.Close()
	<-leading2
	if got, err := propose(ctx, n2); err != nil || got.(uint64) != 3 {
		t.Fatalf("after a restart, propose = %v, %v; want 3: the 2 entries acknowledged, then this one", got, err)
	}
}

// TestFailStopPassesOnMonotonic: raft must know that the log (raft-wal)
// takes only consecutive indexes, or after installing a snapshot it
// appends after a hole the log refuses, and the node stops.
func TestFailStopPassesOnMonotonic(t *testing.T) {
	w, err := wal.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if !newFailStop(w, nil).IsMonotonic() {
		t.Error("the fail-stop log hides that raft-wal is monotonic")
	}
	if newFailStop(raft.NewInmemStore(), nil).IsMonotonic() {
		t.Error("the fail-stop log calls a store monotonic that is not")
	}
}

// TestSnapshotSizeIsWhatOpenGives: a follower installing a snapshot
// receives meta.Size bytes and checks the count, so Open's size is that of
// the state machine's bytes it gives, not of the file with its header.
func TestSnapshotSizeIsWhatOpenGives(t *testing.T) {
	fs, err := raft.NewFileSnapshotStore(t.TempDir(), 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := &snapStore{FileSnapshotStore: fs}
	_, trans := raft.NewInmemTransport("")
	sink, err := s.Create(raft.SnapshotVersionMax, 7, 2, raft.Configuration{}, 1, trans)
	if err != nil {
		t.Fatal(err)
	}
	data := []byte("the state machine's snapshot stream")
	if _, err := sink.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}
	meta, rc, err := s.Open(sink.ID())
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	got, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(data) || meta.Size != int64(len(got)) {
		t.Fatalf("open gives %d bytes %q with size %d; want %q", len(got), got, meta.Size, data)
	}
}
