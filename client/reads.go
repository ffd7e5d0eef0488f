package client

import (
	"context"
	"time"

	"google.golang.org/grpc/metadata"
)

// How fresh a read must be (DESIGN.md 7a). Lookups and the browsing calls
// of a Registrar (and a LookupStream) are reads. By default the leader
// answers them from its state as it is. A context can ask for more or for
// less.

// readMetadata is the gRPC metadata key a read's freshness travels in.
const readMetadata = "djinn-read"

// ReadStale lets the reads made with ctx be answered by any member of the
// cluster whose state is at most maxAge old: it holds every write
// acknowledged more than maxAge before its answer (a follower learns so
// from the leader's read index), it heard from the leader within maxAge,
// and it has applied the log to within the cluster's max-lag entries
// (cluster.max-lag) of what it knows committed. Such reads spread
// over every member that is up, so lookup capacity grows with the cluster;
// a member that cannot answer names the leader, which answers. A write
// acknowledged less than maxAge ago may not be seen.
func ReadStale(ctx context.Context, maxAge time.Duration) context.Context {
	return anyMember(metadata.AppendToOutgoingContext(ctx, readMetadata, "stale="+maxAge.String()))
}

// ReadLinearizable makes the reads made with ctx linearizable: the leader
// answers once it has confirmed with a quorum that it still leads and has
// applied everything committed before the read (a read index), so every
// write acknowledged before the read began is seen. It costs the leader a
// round of heartbeats per read.
func ReadLinearizable(ctx context.Context) context.Context {
	return leaderOnly(metadata.AppendToOutgoingContext(ctx, readMetadata, "linearizable"))
}
