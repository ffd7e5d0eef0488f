package server

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/backup"
	"github.com/djinn-go/djinn/internal/disk"
	"github.com/djinn-go/djinn/internal/replica"
	"github.com/djinn-go/djinn/internal/state"
	"github.com/djinn-go/djinn/proto/djinnpb"
	"github.com/djinn-go/djinn/proto/statepb"
)

// Backup and restore while running (DESIGN.md 7a). A save is a snapshot
// the leader takes after a read barrier (so it holds everything
// acknowledged), streamed from disk in the backup file format. A restore
// seeds an empty data directory with a checked file; the server started
// on it takes the file on as the state of a new cluster (state.Reseed: a
// new service id, the same resources, every lease's remaining time
// honoured from the restore on) the first time it leads.

// pendingRestore is where RestoreSnapshot leaves a file for the server to
// take on.
const pendingRestore = "restore.snap"

// snapshotChunk bounds the messages SaveSnapshot sends.
const snapshotChunk = 256 << 10

// SaveSnapshot streams a consistent snapshot of the cluster's state; the
// leader alone serves it.
func (a *adminRPC) SaveSnapshot(_ *djinnpb.SaveSnapshotRequest, stream djinnpb.Admin_SaveSnapshotServer) error {
	s := a.s
	if err := s.node.ReadBarrier(stream.Context()); err != nil {
		return err
	}
	svc := s.machine.ServiceID()
	if svc.IsZero() {
		return djinn.Errorf(djinn.Unavailable, "the cluster is not yet initialised: nothing to save")
	}
	// Every expiration granted before now is within a horizon the
	// snapshot holds; a lease's time left is counted from here.
	saved := s.now()
	index, term, rc, err := s.node.OpenSnapshot()
	if err != nil {
		return err
	}
	defer rc.Close()
	out := bufio.NewWriterSize(chunkSender{stream}, snapshotChunk)
	w, err := backup.NewWriter(out, &statepb.BackupHeader{
		ServiceId: svc[:], NodeId: s.node.ID(), Index: index, Term: term, SavedUnixNanos: saved.UnixNano(),
	})
	if err != nil {
		return err
	}
	if _, err := io.Copy(w, rc); err != nil {
		return fmt.Errorf("stream snapshot: %w", err)
	}
	if err := w.Close(); err != nil {
		return err
	}
	if err := out.Flush(); err != nil {
		return err
	}
	s.log.Info("snapshot saved", "index", index, "term", term)
	return nil
}

// chunkSender sends what is written to it as snapshot chunks.
type chunkSender struct {
	stream djinnpb.Admin_SaveSnapshotServer
}

func (c chunkSender) Write(p []byte) (int, error) {
	for rest := p; len(rest) > 0; {
		n := min(len(rest), snapshotChunk)
		if err := c.stream.Send(&djinnpb.SnapshotChunk{Data: rest[:n]}); err != nil {
			return len(p) - len(rest), err
		}
		rest = rest[n:]
	}
	return len(p), nil
}

// RestoreSnapshot seeds dataDir, which must hold no node's state, from the
// snapshot file at path. It checks the whole file first (its version and
// checksum, then every record, by restoring them), then leaves it in
// dataDir, where a server started on it (without joining a cluster) takes
// it on as the state of a new cluster the first time it leads. It returns
// the file's header.
func RestoreSnapshot(path, dataDir string) (*statepb.BackupHeader, error) {
	if err := checkEmptyDataDir(dataDir); err != nil {
		return nil, err
	}
	in, err := openSnapshotFile(path)
	if err != nil {
		return nil, err
	}
	defer in.Close()
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, fmt.Errorf("data directory %s: %w", dataDir, err)
	}
	tmp, err := os.CreateTemp(dataDir, pendingRestore+".*")
	if err != nil {
		return nil, fmt.Errorf("data directory %s: %w", dataDir, err)
	}
	defer os.Remove(tmp.Name()) // gone once renamed
	defer tmp.Close()
	// The copy, checked as it is made: a damaged file is refused as such.
	r, err := backup.NewReader(io.TeeReader(in, tmp))
	if err == nil {
		_, err = io.Copy(io.Discard, r)
	}
	if err != nil {
		return nil, backup.Named(err, path, "")
	}
	if err := tmp.Sync(); err != nil {
		return nil, err
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	if err := checkRecords(tmp, path); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp.Name(), filepath.Join(dataDir, pendingRestore)); err != nil {
		return nil, err
	}
	return r.Header(), disk.SyncDir(dataDir)
}

// openSnapshotFile opens the snapshot file at path to read, refusing what
// is not a file in plain words.
func openSnapshotFile(path string) (*os.File, error) {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, djinn.Errorf(djinn.InvalidArgument, "%s: no such file; name a file written by djinn snapshot save", path)
	case err != nil:
		return nil, djinn.Errorf(djinn.InvalidArgument, "%s cannot be read (%v); name a file written by djinn snapshot save that you may read", path, err)
	case fi.IsDir():
		return nil, djinn.Errorf(djinn.InvalidArgument, "%s is a directory, not a snapshot file; name a file written by djinn snapshot save", path)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, djinn.Errorf(djinn.InvalidArgument, "%s cannot be read (%v); name a file written by djinn snapshot save that you may read", path, err)
	}
	return f, nil
}

// checkRecords restores every record of an intact snapshot file (path)
// read from r into a state machine of its own, which checks each of them.
func checkRecords(r io.Reader, path string) error {
	br, err := backup.NewReader(r)
	if err != nil {
		return backup.Named(err, path, "")
	}
	m, err := newMachine()
	if err != nil {
		return err
	}
	if err := m.Restore(br); replica.IsRefusal(err) {
		return djinn.Errorf(djinn.InvalidArgument, "%s holds a cluster this djinn cannot run: %v", path, err)
	} else if err != nil {
		return djinn.Errorf(djinn.InvalidArgument, "%s holds a record this djinn cannot restore (%v); restore it with the djinn release that saved it", path, err)
	}
	if m.ServiceID().IsZero() {
		return djinn.Errorf(djinn.InvalidArgument, "%s holds a cluster that was never initialised: nothing to restore; save the snapshot from a cluster that has led", path)
	}
	return nil
}

// newMachine returns a state machine with every service's state, as a
// server builds it, for a snapshot checked offline.
func newMachine() (*state.Machine, error) {
	s := &Server{cfg: Default(), machine: state.New()}
	if err := s.openParts(); err != nil {
		return nil, err
	}
	return s.machine, nil
}

// checkEmptyDataDir refuses a data directory that holds a node's state
// or a restore already.
func checkEmptyDataDir(dir string) error {
	for _, p := range []string{"raft", "node-id", pendingRestore} {
		if _, err := os.Stat(filepath.Join(dir, p)); err == nil {
			return djinn.Errorf(djinn.InvalidArgument,
				"data directory %s holds a node's state already (%s): a snapshot seeds a new data directory; give another --data-dir", dir, p)
		} else if !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}

// hasPendingRestore reports whether the data directory holds a snapshot
// to take on.
func hasPendingRestore(dataDir string) bool {
	_, err := os.Stat(filepath.Join(dataDir, pendingRestore))
	return err == nil
}

// installRestore takes on the snapshot left by RestoreSnapshot, if any:
// once, as the state of this new cluster. It runs first thing when this
// node leads.
func (s *Server) installRestore(ctx context.Context) error {
	path := filepath.Join(s.cfg.DataDir, pendingRestore)
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	defer f.Close()
	r, err := backup.NewReader(f)
	if err != nil {
		return backup.Named(err, path, "restore the snapshot file again into a new data directory")
	}
	h := r.Header()
	saved, _ := djinn.IDFromBytes("saved service id", h.GetServiceId())
	if slices.Contains(s.machine.PreviousIDs(), saved) {
		return os.Remove(path) // taken on before a restart
	}
	if !s.machine.ServiceID().IsZero() {
		return djinn.Errorf(djinn.InvalidArgument, "%s: this node holds a cluster already; a snapshot seeds a new one only", path)
	}
	// The state the new cluster takes on, reseeded on disk (raft wants its
	// size before it reads it).
	delta := s.now().Sub(time.Unix(0, h.GetSavedUnixNanos()))
	id := djinn.NewID()
	seed, err := os.CreateTemp(s.cfg.DataDir, pendingRestore+".reseeded.*")
	if err != nil {
		return err
	}
	defer os.Remove(seed.Name())
	defer seed.Close()
	if err := state.Reseed(r, seed, id, delta); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	size, err := seed.Seek(0, io.SeekCurrent)
	if err != nil {
		return err
	}
	if _, err := seed.Seek(0, io.SeekStart); err != nil {
		return err
	}
	if err := s.node.Restore(ctx, h.GetIndex(), h.GetTerm(), seed, size); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	s.log.Info("snapshot restored as a new cluster", "service", id, "saved_service", saved,
		"saved_index", h.GetIndex(), "leases_moved_on_by", delta.Round(time.Millisecond))
	return os.Remove(path)
}
