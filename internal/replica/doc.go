// Package replica makes djinn's state durable and replicated: the Raft log is
// the database (DESIGN.md section 2).
//
// A Node wraps a hashicorp/raft instance with a raft-wal log store, file
// snapshots and a TCP (optionally TLS) transport. Every durable change is a
// statepb.Command proposed through Propose and applied, in log order, to a
// deterministic StateMachine on every member. A single server is a one-voter
// cluster bootstrapped on its first start, so a laptop and a five-node cluster
// run the same code.
//
// Leader-only work (lease expiry, event delivery, ...) hangs off OnLeader: it
// runs after the new leader has applied everything its predecessors committed
// (a barrier), with a context that ends when leadership is lost. Such work
// records its outcomes by proposing commands, never by changing state
// directly.
//
// Invariants: Apply is called from one goroutine, in index order, exactly once
// per committed command on each member (after a restart, commands after the
// last snapshot are applied again to the restored state, which is how state is
// rebuilt). Propose only succeeds on the leader; elsewhere it returns an
// Unavailable error carrying the leader's gRPC address, if known.
package replica
