// Package lock is the lock table of the concurrency-control service (the
// OMG Concurrency Control Service Specification, CC in docs/specs.md, bound
// to djinn's transactions): lock sets, the locks held in them and the
// requests waiting for locks. It is deterministic state code — it runs inside the
// Raft state machine's Apply — so it reads no clock, starts no goroutine and
// returns nothing whose order depends on map iteration: answers that span
// sets list them by ascending set id, holders by kind and id, cancelled
// requests by id. It is not safe for concurrent use: the caller serializes
// calls.
//
// # Holders
//
// A Holder is a non-transactional lock owner or a transaction (spec 1.2.2).
// A transaction carries its lineage, parent first, up to its top-level
// transaction; its family is that top-level transaction. Holder H is
// committed relative to requester Q (spec 1.5) when H is Q, or H is a
// transaction and an ancestor of Q. An owner is committed relative only to
// itself.
//
// # Granting (spec 1.3, 1.5)
//
// Modes conflict as Table 1-1 says (Conflicts). Locks are counted per holder
// and mode (multiple possession, 1.3.2). A request in mode m by Q conflicts
// when a holder not committed relative to Q holds a lock in a mode that
// conflicts with m; so a holder's own locks never block it, and a nested
// transaction is granted over its ancestors' locks but not over a
// sibling's, and a parent's request waits for its child's locks.
//
// Waiting requests queue per set, first come first served (1.3.1.3). A
// waiting request is ready when it does not conflict and either it is first
// in the queue or it is a transaction of the same family as a holder of the
// set (1.3.1.3's last sentence: such a request is held up by conflicts
// only, not by the queue). A new request is granted at once exactly when it
// would be ready at the end of the queue: it does not conflict, and the
// queue is empty or it is of a holder's family. Whenever locks are given up
// or requests leave a queue, the table grants the first ready request, and
// again, until none is ready; so a request that cannot be granted holds up
// every request behind it except those of a holder's family, which are
// granted if they do not conflict. After every call no waiting request is
// ready: no wake-up is lost.
//
// The family exception is for transactions only, as the spec says. An
// owner's request waits behind the queue even when the owner already holds
// a lock in the set — so an owner that holds a lock and asks for another in
// the same set while someone waits for the first one is refused with
// djinn.ErrDeadlock (below). A change_mode is no new lock and passes the
// queue (below).
//
// A change_mode (Request.From not zero) is a request for a lock in the new
// mode that, when granted, gives up one lock in From — atomically: the From
// lock stays held while the request waits, and conflicts count it. Each
// waiting change_mode claims one lock in From, which Release and another
// change_mode cannot take (they get LockNotHeld). A granted change_mode
// can let waiting requests through, even ones ahead of it.
//
// # Deadlock
//
// A waiting request w waits for every waiting request of each holder whose
// locks conflict with w (holders committed relative to w's excepted) and,
// unless w passes the queue (a change_mode, or by the family rule), for
// every request ahead of it in its queue. A request that would have to wait is refused with an
// error of kind djinn.Deadlock, and nothing changes, when queuing it would
// close a cycle of these edges, across all sets: its requester is the
// victim. A try is refused, never a deadlock. Only Acquire looks for cycles;
// one that forms otherwise — a grant or a commit that gives a holder new
// locks, a release that takes a request's family exception away — is left
// for the requests' timeouts (Cancel) to break.
//
// # Fencing tokens
//
// Each set counts its grants; a grant's fence is the count after it. While
// the grant is held Validate accepts its fence. Release gives up the lock
// granted last among the holder's locks in that mode, and change_mode the
// one granted last in From; their fences stop validating. A change_mode's
// grant gets a new fence. A nested transaction's locks pass to its parent
// on commit with their fences, which keep validating.
//
// # Lock sets, coordinators and the transaction manager (spec 2.2–2.5)
//
// A set is transactional (only transactions hold its locks) or not, and may
// be related to other sets of its kind when created: related sets form a
// group that shares a lock coordinator, and DropGroup is drop_locks for one
// holder over that group. DropHolder is for an owner whose lease ended.
// CommitTxn and AbortTxn let the transaction manager drive the table
// directly: a committed nested transaction's locks pass to its parent (1.5:
// the multiple-possession form of Moss's lock inheritance), a committed
// top-level transaction's are dropped, and so are an aborted transaction's
// and its nested transactions'. Nested transactions still known when their
// ancestor commits did not commit into it, so they aborted (TX.2.7): their
// locks are dropped too. Every waiting request of a transaction that ends
// is cancelled, and reported so the caller can answer it.
//
// # Errors
//
// A release or change_mode of a lock not held is djinn.LockNotHeld (spec
// 2.1.1); an unknown set, a request that is not waiting, or a request
// id retried under a holder not its own (requests.go), is
// djinn.NoSuchObject; a bad argument is djinn.InvalidArgument; a refused
// deadlock is djinn.Deadlock; a set whose fencing tokens are used up (not
// in this universe's lifetime) is djinn.ResourceExhausted. Match with
// errors.Is and the root package's sentinels. Every message names the bad
// value.
//
// # Snapshots
//
// Export returns the table as plain values and Import rebuilds it: the
// rebuilt table exports the same and answers every later call the same.
// The service's snapshots copy nothing: they are written from a view
// (view.go) that a set about to change keeps its old self in, and
// restored as their records come (restore.go), each set imported as it is
// decoded.
//
// # Memory
//
// The target is a million lock sets, each with one holder, in well under
// 300 MB. BenchmarkSets measures a set whose one holder holds one lock: an
// owner or a top-level transaction costs about 200 bytes at a million
// sets (the sets live by value in pages by number, setstore.go), a nested
// transaction about 230 when ten sets share its parent, and up to 350
// when it is the only one under a parent the table must know too. Sets
// and holders keep what few of them have — waiting requests, related
// sets, nested transactions — behind pointers that are nil for the rest; a grant is one word (fence and mode
// packed); a holder's kind is the top bit of its id, so ids are below 2^63.
package lock
