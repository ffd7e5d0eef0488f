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
// Commands proposed concurrently share log entries: one entry, one fsync
// and one round of replication carry every command that arrived while the
// entries before it were on their way, and the leader applies the commands
// it holds rather than decoding its own entries (propose.go). A caller
// waits for its own command's result; no goroutine is started per
// proposal.
//
// Invariants: Apply is called from one goroutine, in index order, exactly once
// per committed command on each member — the commands of one entry in their
// order, each with the entry's index. After a restart, commands after the
// last snapshot are applied again to the restored state, which is how state
// is rebuilt. Propose only succeeds on the leader; elsewhere it returns an
// Unavailable error carrying the leader's gRPC address, if known.
//
// # Damage on disk
//
// Open gives back everything the node acknowledged, or refuses to start with
// a *disk.DamageError naming the file and offset and saying how to recover.
// Before raft reads anything it checks (storage.go):
//   - every batch of every log segment against its CRC, each entry's
//     encoding against its frame (walcheck.go; raft-wal itself checks only
//     the last batch, and takes one that fails for a torn write). A batch
//     that fails with a valid batch after it is damage; so is a last batch
//     written whole that fails. A last batch a crash tore (a sector of it
//     never written) was never acknowledged and is left out, and logged.
//   - the record a clean shutdown leaves (shutdown.go): after one, a log
//     that ends earlier than recorded is damage, whatever its last batch
//     looks like.
//   - the log's witness (witness.go): the newest segment a batch was
//     fsynced in, written once per segment before that batch is
//     acknowledged. raft-wal makes a segment's file durable only with its
//     first batch, so a last segment missing or empty may be one a crash
//     left before any; the witness says whether one was acknowledged. A
//     witnessed segment that serves no entry, or that the log's metadata
//     does not list, lost acknowledged entries.
//   - the log's metadata file, a bbolt file (metacut.go, walstale.go): its
//     length against the pages its meta page has in use, its freelist and
//     the tree of its buckets as bbolt follows them (bbolt trusts them: a
//     page of the wrong kind, a loop or an element past its page is a
//     panic, a fault or a stack overflow, a page in use listed free is
//     written over), and its segment list against the segment files.
//   - the term record (termvote.go): raft's term and vote, recorded each
//     time raft sets them, after its stable store (the log's metadata
//     file) took them and before raft acts on them. A metadata file with
//     an earlier term, or without the recorded vote in its term, is an
//     older copy: on it the node could vote twice in one term.
//   - every snapshot's meta.json against its name, the newest one's data
//     against meta.json (a header repeats the index, term and
//     configuration: snapstore.go) and its CRC, and the newest snapshot
//     against the log: the log must start no later than just after it.
//
// Repair, only when asked, keeps the newest snapshot that checks out and
// the log's entries up to the first damage, writes the recorded term and
// vote back where the metadata lost them, and reports exactly which
// acknowledged entries it dropped.
package replica
