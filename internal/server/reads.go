package server

import (
	"context"
	"strings"
	"time"

	"google.golang.org/grpc/metadata"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/lookup"
)

// Reads and their freshness (DESIGN.md 7a). A read (a lookup, a browsing
// call) says in the djinn-read metadata how fresh its answer must be:
//
//   - nothing: the leader answers from its state, as it is (the default);
//   - "linearizable": the leader answers once it has confirmed with a
//     quorum that it still leads and has applied everything committed
//     before the call (Raft's read index), so the answer reflects every
//     write acknowledged before the read began;
//   - "stale=D" (a Go duration): any member answers whose state is at most
//     D old — it holds every write acknowledged more than D before the
//     answer (a follower learns so from the leader's read index, asked at
//     most once per D/2: followerreads.go), it heard from the leader within
//     D, and it has applied the log to within cluster.max-lag entries of
//     the commit index it knows. So lookups spread over every member, and
//     lookup capacity grows with the cluster. A member that cannot answers
//     Unavailable naming the leader, and the client asks the leader.

// ReadMetadata is the gRPC metadata key of a read's freshness.
const ReadMetadata = "djinn-read"

// readMode is how fresh a read must be.
type readMode struct {
	linearizable bool
	maxAge       time.Duration // > 0: any member within it may answer
}

// readModeOf parses the caller's read mode.
func readModeOf(ctx context.Context) (readMode, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	v := md.Get(ReadMetadata)
	if len(v) == 0 {
		return readMode{}, nil
	}
	switch s := v[0]; {
	case s == "linearizable":
		return readMode{linearizable: true}, nil
	case strings.HasPrefix(s, "stale="):
		d, err := time.ParseDuration(strings.TrimPrefix(s, "stale="))
		if err != nil || d <= 0 {
			return readMode{}, djinn.Errorf(djinn.InvalidArgument, "%s %q: want a positive staleness bound, such as stale=2s", ReadMetadata, s)
		}
		return readMode{maxAge: d}, nil
	default:
		return readMode{}, djinn.Errorf(djinn.InvalidArgument, "%s %q: want linearizable or stale=DURATION", ReadMetadata, s)
	}
}

// mayRead returns the check of whether this node may answer a read of
// service what in the caller's mode.
func (s *Server) mayRead(ctx context.Context, what string) (lookup.MayRead, error) {
	mode, err := readModeOf(ctx)
	if err != nil {
		return nil, err
	}
	return func() error {
		switch {
		case mode.linearizable:
			if err := s.node.ReadBarrier(ctx); err != nil {
				return err
			}
		case mode.maxAge > 0 && !s.node.IsLeader():
			return s.followerRead(ctx, mode.maxAge)
		}
		return s.lessor.Serving(what)
	}, nil
}
