package client

import (
	"context"
	"io"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/backup"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// SnapshotInfo describes a snapshot of a cluster's state.
type SnapshotInfo struct {
	ServiceID djinn.ID  // the cluster saved
	NodeID    string    // the leader that saved it
	Index     uint64    // the last log entry it holds
	Term      uint64    // that entry's term
	SavedAt   time.Time // by the leader's clock
	Bytes     int64     // the file's length
}

// SaveSnapshot writes a consistent snapshot of the dialled cluster's state
// to w, in the snapshot file format (what djinn snapshot restore reads), as
// the leader streams it: everything acknowledged before the call is in it.
// It checks the file as it passes (its version and checksum) and fails if
// what arrived is not intact; w then holds a damaged file, to be thrown
// away. It needs the operator role.
func (c *Client) SaveSnapshot(ctx context.Context, w io.Writer) (*SnapshotInfo, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := djinnpb.NewAdminClient(c.cluster.cc).SaveSnapshot(ctx, &djinnpb.SaveSnapshotRequest{})
	if err != nil {
		return nil, err
	}
	in := &snapshotStream{stream: stream}
	counted := &countingWriter{w: w}
	r, err := backup.NewReader(io.TeeReader(in, counted))
	if err != nil {
		c.followHint(stream, err)
		return nil, backup.Named(err, sentSnapshot, nextSave)
	}
	if _, err := io.Copy(io.Discard, r); err != nil {
		return nil, backup.Named(err, sentSnapshot, nextSave)
	}
	h := r.Header()
	info := &SnapshotInfo{NodeID: h.GetNodeId(), Index: h.GetIndex(), Term: h.GetTerm(),
		SavedAt: time.Unix(0, h.GetSavedUnixNanos()), Bytes: counted.n}
	info.ServiceID, _ = djinn.IDFromBytes("service id", h.GetServiceId())
	return info, nil
}

// How SaveSnapshot names a snapshot that arrived damaged, and what to do.
const (
	sentSnapshot = "the snapshot the server sent"
	nextSave     = "save it again"
)

// followHint makes the leader a refusing follower named the cluster's
// first choice, for the next try.
func (c *Client) followHint(stream grpc.ClientStream, err error) {
	if status.Code(err) != codes.Unavailable {
		return
	}
	if hint := leaderOf(stream.Trailer()); hint != "" {
		c.cluster.setLeader(hint)
		c.cluster.refreshSoon()
	}
}

// snapshotStream reads the chunks of a SaveSnapshot stream as bytes.
type snapshotStream struct {
	stream djinnpb.Admin_SaveSnapshotClient
	buf    []byte
}

func (s *snapshotStream) Read(p []byte) (int, error) {
	for len(s.buf) == 0 {
		chunk, err := s.stream.Recv()
		if err != nil {
			return 0, err // io.EOF at the stream's end
		}
		s.buf = chunk.GetData()
	}
	n := copy(p, s.buf)
	s.buf = s.buf[n:]
	return n, nil
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
