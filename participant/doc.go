// Package participant makes writing a correct transaction participant
// (TX.2.3, TX.2.6, TX.2.8 of the Jini Transaction Specification) a matter of
// supplying the data: the application implements Resource — prepare a
// record of a transaction's changes, commit, abort, recover — and a
// Participant does the protocol.
//
// # Pieces
//
//   - A Participant joins transactions, keeps their states, votes, rolls
//     forward or back, stores its prepared records durably and recovers them
//     after a restart. Its reference (Ref) and crash count are what it joins
//     with.
//   - A Resource is the application's data (see package kv for a complete
//     one: the reference key/value store).
//   - A Store keeps the participant's durable state: its identity, its
//     prepared records, and, if the application likes, the application's
//     own committed data, so that rolling forward and dropping the prepared
//     record is one atomic write. FileStore keeps it in a directory (an
//     fsynced append-only log); MemStore in memory, for tests and volatile
//     participants.
//   - Managers calls transaction managers (join, getState); Remote does it
//     over gRPC.
//   - A Server serves the TransactionParticipant gRPC service for any number
//     of participants on one gRPC server, by object id, with djinn error
//     kinds on the wire: the unary calls, and Calls, the stream on which a
//     djinn manager sends them all, many at once (Shutdown ends those
//     streams before a graceful stop).
//
// # Operations
//
// An application operation under a transaction calls Join first and the
// returned done when it ends:
//
//	done, err := p.Join(ctx, tx)
//	if err != nil {
//		return err // the manager's error, as TX.2.3 asks
//	}
//	defer done()
//	// ... change the data, visible only to tx ...
//
// The first Join of a transaction joins it at its manager (TX.2.3);
// concurrent first operations share that join, and its error is each
// one's. An operation is refused (djinn.ErrCannotJoin) unless the
// transaction is ACTIVE here (TX.2.6). A vote or an abort waits for the
// operations under way to call done — TX.2.6's first choice for a prepare
// that meets a running operation.
//
// # The participant's rules
//
// Each rule below is a row of TestRules (rules_test.go) naming its section.
//
//   - prepare (TX.2.6): NOTCHANGED when the resource says the transaction
//     changed nothing (its state is then released); PREPARED only after the
//     prepared record is durable in the Store (TX.2.8: the participant's
//     commit point); ABORTED, rolled back, when the resource cannot
//     guarantee a roll forward or the record cannot be written. A prepare
//     of a transaction past voting answers its state; of an unknown one,
//     djinn.ErrUnknownTransaction.
//   - commit: a PREPARED transaction rolls forward with one atomic write
//     (the resource's changes and the removal of the record); a repeated
//     commit returns nil; an unknown one gives djinn.ErrUnknownTransaction,
//     which a manager reads as "rolled forward already" (TX.2.7).
//   - abort: ACTIVE, VOTING and PREPARED roll back; repeated aborts return
//     nil; a committed transaction gives djinn.ErrCannotAbort.
//   - prepareAndCommit is equivalent to TX.2.6's code (prepare, then commit
//     when PREPARED, answering COMMITTED) but rolls an ACTIVE transaction
//     forward with one write instead of two: the prepared record is never
//     written. Either crash window leaves the same outcome as a crash in the
//     corresponding window of the two-step form.
//   - NOTCHANGED, COMMITTED and ABORTED are remembered for Config.Remember,
//     so that a manager's retried prepare gets the same answer (TX.2.6's
//     well-behaved participant), then forgotten.
//   - A transaction with no call or operation for Config.Idle is asked about
//     (getState, TX.2.6): an ACTIVE or VOTING one that the manager has
//     aborted or does not know is rolled back; an unreachable manager
//     changes nothing (the participant does not guess); a PREPARED one is
//     never dropped, only rolled as the manager decided.
//   - On start every prepared record is given back to the resource
//     (Resource.Recover) before any call, and the roll decision is made in
//     the background (TX.2.8.1): COMMITTED rolls forward;
//     djinn.ErrUnknownTransaction or djinn.ErrNoSuchObject (and ABORTED)
//     roll back; any other answer or failure is asked again after a pause,
//     with backoff, until the participant closes. A commit or abort from the
//     manager meanwhile settles it just as well.
//
// # Nested transactions
//
// The manager's join answers the transactions the joined one is nested
// in, parent first (Participant.Ancestors gives them to the resource, so
// that an operation under a nested transaction sees its ancestors'
// changes and is not blocked by their locks, as TX.3 asks). Each row is in
// TestRules:
//
//   - prepare of a nested transaction votes as usual, but PREPARED writes
//     no record: it means ready to roll forward into the parent (TX.2.6),
//     whose changes live in memory while ACTIVE.
//   - commit of a nested transaction rolls its changes into the parent
//     (Resource.Merge), never into the committed data. The parent becomes
//     ACTIVE here if it was unknown: the manager promoted the participant
//     into it (TX.2.7), so operations under it need no join. If the
//     parent has aborted here, the changes are dropped.
//   - abort of a nested transaction drops its changes alone; abort of a
//     transaction also aborts the transactions nested in it that are open
//     here (TX.2.7) — even when it is unknown here itself, in which case it
//     is remembered as ABORTED so that a late nested commit drops its
//     changes.
//   - prepare of a transaction first completes the nested ones still open
//     here, asking their manager (TX.2.6): COMMITTED (or NOTCHANGED) rolls
//     one into the parent, any other answer rolls it back, and a failed
//     getState fails the prepare, for the manager to ask again. While a
//     transaction is not ACTIVE here, operations under those nested in it
//     are refused (djinn.ErrCannotJoin).
//   - Turns are taken parent first (commit of a nested transaction takes
//     its parent's, then its own), so these never deadlock.
//
// Nested state is in memory only: after a restart the crash count has
// changed, and the manager aborts what was open (TX.2.8: nested
// transactions are not involved in crash recovery).
//
// # Crash counts
//
// TX.2.3's crash count names "the version of the participant's storage
// that holds the state of the transaction". A Participant keeps ACTIVE
// transactions (the joins and the changes made under them) in memory; only
// prepared records are durable. So every start loses the ACTIVE state, and
// every opening of a Store takes a new crash count — FileStore persists a
// counter and increments it on open; MemStore picks a random one. A client
// that continues, after a participant restarted, a transaction it began
// before gets the manager's djinn.ErrCrashCount and the transaction aborts,
// instead of committing without the changes the participant forgot.
// Prepared transactions are unaffected: a manager never joins them again,
// and finds the participant by its reference, which the Store keeps.
//
// # Secrets
//
// A Tx carries its transaction's secret, the capability to work under it
// (DESIGN.md 7): the participant joins with it, and the manager presents
// it when it calls. Once the participant holds a transaction with its
// secret — joined with it, or recovered from a prepared record, which
// keeps it — a Join or a manager's call that does not present that secret
// finds no transaction (UnknownTransaction) and changes nothing: knowing a
// transaction's id is no way to write under it, vote on it or end it. A
// transaction held without a secret (an ancestor known from a nested
// transaction's join, or a record written before records had secrets) is
// not checked.
//
// # Durability
//
// The participant's durability is its Store's. FileStore writes each batch
// as a checksummed frame and fsyncs before Apply returns; concurrent
// writes share one frame and one fsync. Its log grows in zero-filled
// extents made before frames are written into them, so a torn last frame
// (never acknowledged: a sector of it never written, only zeros after it)
// is told from a log cut short; it is cut off on open and logged. So is
// an extension a full disk stopped part way (the file larger than an
// extent, with only zeros past it): cut back to the extent. Any
// other frame that fails its checksum, a log cut short anywhere, and a
// log shorter or older than the one the last Close recorded, or than the
// store was when last opened (PositionName), are damage, and OpenFileStore refuses the store
// (ErrDamaged), naming the file and the offset, rather than lose what
// follows it. RepairFileStore, only when asked, keeps the frames that
// check out and reports what it dropped and where the log was cut. The
// records are also held in memory.
//
// # Limits
//
// Nested transactions are supported only within one manager (the
// ancestors are named by the nested transaction's manager, as djinn's
// manager nests). Resource.Abort cannot fail, so a resource's uncommitted changes must
// live in memory or in its prepared record, not in place on disk.
package participant
