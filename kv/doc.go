// Package kv is djinn's reference transaction participant: a key/value
// store whose operations may run under a transaction, built on package
// participant. It is the example to copy when writing a participant, and
// the workload of the transaction tests and benchmarks.
//
// # Semantics (TX.3's defaults)
//
// Without a transaction (a nil *participant.Tx), Put and Delete apply at
// once and durably (they return once the Store has fsynced), and Get and
// List read the committed data.
//
// Under a transaction, changes are seen only inside it until it commits
// (TX.1.2's isolation); they become visible, all at once, when the
// participant rolls the transaction forward, and vanish if it aborts.
// Isolation is by strict two-phase locking on keys:
//
//   - Put and Delete write-lock the key until the transaction completes.
//   - Get read-locks the key, List the whole prefix (keys present or not,
//     so no phantom appears), until the transaction votes. Reads under a
//     transaction are therefore repeatable, and transactions are
//     serializable.
//   - A write conflicts with another transaction's write or read lock on
//     the key or read lock on a prefix of it; a read with another
//     transaction's write lock. A write without a transaction takes the
//     write lock for the time of its write, so it conflicts too; reads
//     without a transaction take no lock and never conflict.
//
// A conflict fails the call at once — no waiting, so no deadlock — with an
// error of kind djinn.ErrUnavailable naming the key: the call did nothing
// and may succeed once the other transaction completes. The caller retries
// or aborts its transaction. The transaction itself is not aborted by the
// conflict.
//
// # Namespaces
//
// A DB holds namespaces of keys (Space): the same key name in two
// namespaces is two keys, and a namespace's calls never see, read,
// overwrite, delete, list or lock another's keys — another namespace's
// key is not found, exactly as a key never written. The DB's own methods
// use the default namespace, "". A server serving many callers gives each
// its own namespace with WithNamespace (djinn serve names it after the
// caller's principal); errors and listings show keys as the caller named
// them. Config.MaxBytesPerNamespace bounds what each namespace holds,
// within MaxBytes, so that one caller cannot fill the store for all.
// A transaction may write in several namespaces; the participant commits
// or aborts them all when its manager says so, whoever the manager is.
//
// # Nested transactions
//
// Under a nested transaction, reads see the changes of its ancestors (the
// nearest first) and its own; its ancestors' locks do not block it (it
// takes a write lock over from an ancestor, and gives it back if it
// aborts), while other transactions, siblings included, are blocked as
// usual. Its changes are seen only inside it. When it commits they roll
// forward into its parent with its read and write locks — still invisible
// outside the parent, and gone if the parent aborts; they become visible
// when the top-level transaction commits. If it aborts, its changes are
// dropped and the parent's are untouched. A nested transaction that only
// read votes NOTCHANGED and releases its read locks: they are not passed
// to the parent.
//
// # Durability
//
// Committed data lives in the participant's Store (the default
// namespace's under the "kv/" prefix, the others' under "kvns/") and in
// memory. A prepared transaction's record is its list of changes;
// rolling forward writes the changes and removes the record in one atomic
// Store batch. After a restart the prepared transactions hold their write
// locks again until the roll decision (TX.2.8.1) settles them.
//
// # Serving
//
// NewServer serves a DB as the KeyValue gRPC service (proto/djinn/v1/kv.proto);
// its participant is served by a participant.Server on the same gRPC
// server. With WithNamespace each call works in its caller's namespace
// (djinn serve passes the principal its TLS authentication names); without
// it every caller shares the default one. Client calls a remote DB with the same Go signatures.
//
// A listing served is bounded by what a gRPC client receives by default
// (4 MiB, less 64 KiB of room: wire.MaxReply). A request that pages
// (KVListRequest's after or max) gets a page of at most max entries
// (MaxPageEntries) that ends before that bound, and the key to go on
// after; Client.List pages by itself. A request that does not page — a
// client from before pages, which would not read a next — gets the whole
// listing, or ResourceExhausted naming its entries and bytes when it
// would not fit, never a listing silently cut short. Under a transaction
// every page read-locks the whole prefix, so the pages are one view, the
// transaction's; without one each page reads the committed data of its
// time. The committed keys are held in order as well, so a page walks
// them from where it starts and stops once full: it costs its own entries
// (and its transaction's changes), however large the store or the prefix.
package kv
