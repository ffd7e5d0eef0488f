// Package txn is djinn's transaction manager: the two-phase commit of the
// Jini Transaction Specification (TX.2), with nested transactions, under
// this manager or another's, replicated through the Raft log.
//
// # The contract
//
// A transaction is decided once, by one log entry — TxnDecide, the commit
// point (TX.2.8) — and every participant that needs telling is told that
// decision, again and again, until it takes it. Nothing said to a
// participant runs ahead of the log: no participant hears COMMITTED or
// ABORTED before the decision is logged, and none is asked to roll
// forward (prepareAndCommit) before the transaction is logged VOTING.
// A prepare is only a question: a top-level transaction's participants are
// asked it without a VOTING record (vote.go), and the decision commits
// only the participant list they were.
//
// # States (TX.2.4)
//
//	ACTIVE ──commit──▶ VOTING ──votes──▶ COMMITTED
//	   │                  │
//	   └──abort, lease────┴──any ABORTED vote, timeout──▶ ABORTED
//
// In each state:
//
//   - ACTIVE: participants join (TX.2.3). The same crash count again is
//     accepted and ignored; another one aborts the transaction
//     (CrashCount). The transaction's lease holds it open: a cancel or
//     expiry of the lease while ACTIVE aborts it (TX.2.1).
//   - VOTING: commit was asked. Every participant is asked to prepare, all
//     at once; the first ABORTED vote, UnknownTransaction or definite
//     error, or a participant unreachable past the vote timeout, aborts;
//     NOTCHANGED participants are dropped. A transaction's vote is past
//     the lease: its lease ending while VOTING changes nothing. A
//     top-level transaction is VOTING on the leader (getState says so, a
//     join is refused) before the log says it: its vote records VOTING
//     only if it turns slow — a participant to ask again, or undecided a
//     call's time after it began — or its lease ends within two calls'
//     time; until then a lease's end or an abort decides it ABORTED and
//     the vote's commit is refused (the commit counts as received when
//     the log has it).
//   - COMMITTED or ABORTED: decided. The lease ends (ApplyRelease: nobody
//     is told, the transaction is its owner). PREPARED participants are
//     told to commit; on abort, those that voted PREPARED or were not yet
//     asked are told to abort. Once each has been told, the transaction is
//     settled, remembered for the retention time (a repeated commit or
//     abort gets its outcome) and then forgotten (UnknownTransaction).
//     At most MaxRemembered settled top-level transactions are remembered
//     (each with those nested in it): beyond, the leader forgets the
//     oldest settled sooner. A settled transaction is kept compact — its
//     participants' references shared with every other participant of the
//     same reference, its channels the one closed channel, its principal
//     interned — so that each costs a few hundred bytes of memory; every
//     field Apply reads keeps its value, so compacting decides nothing.
//
// Nested transactions (TX.2.2, TX.2.7): a nested commit promotes its
// PREPARED participants into its parent atomically, in the same TxnDecide
// (a crash-count clash aborts the parent); aborting a transaction aborts
// those nested in it; a parent's vote aborts its nested transactions still
// open. Under another manager (remote.go), this manager joins the parent
// as its nest participant and promotes at the parent's manager before it
// logs COMMITTED.
//
// # What is logged, when
//
//	TxnCreate    create: the id (random, a positive Java long), the lease, the creator's principal
//	TxnJoin      join: the participant and its crash count (and the bound on participants)
//	TxnVoting    commit of a nested transaction, before any prepare; a top-level one's slow vote
//	TxnDecide    the vote's outcome, or an abort: the commit point, with the votes and the
//	             version of the participant list asked (a list changed since aborts)
//	TxnPromote   another manager's nested transaction promoting its participants into ours
//	TxnNotified  participants told the outcome, in batches, after they took it
//	TxnForget    settled transactions past the retention time or beyond MaxRemembered, in batches
//
// So a top-level transaction whose participants answer at once costs
// TxnCreate, a TxnJoin per participant and TxnDecide, and its share of a
// TxnNotified and a TxnForget; why each is needed is in BENCHMARKS.md.
//
// The state (state.go) is the deterministic part: ApplyX functions of those
// commands, run inside Apply. The Service (service.go, notify.go,
// remote.go) is the leader's: it checks a call, logs its command and acts
// on the result.
//
// # Crash and failover rules
//
// Everything above is in the log, so a restarted node or a new leader
// finds every transaction where the log left it:
//
//   - ACTIVE ones stay ACTIVE (their leases follow the lessor's rule: never
//     expired before their granted expiration).
//   - VOTING ones are voted again (Run resumes them): participants answer a
//     repeated prepare with their vote (TX.2.6). A VOTING record without
//     the prepare-only mark is an older manager's, which may have sent the
//     last participant prepareAndCommit: that one is asked after the
//     others and must answer, however long that takes, and its COMMITTED
//     decides.
//   - A top-level transaction whose vote left no VOTING record is ACTIVE:
//     its client's commit failed (Unavailable) and it commits again —
//     participants answer the repeated prepare with their vote — or the
//     lease ends it, and the participants that prepared are told ABORTED.
//   - Decided ones go on being told: a participant not yet recorded as told
//     is told again. Participants take a repeated outcome idempotently;
//     UnknownTransaction from a commit means it rolled forward already.
//
// # Who is told what
//
//   - The caller of commit hears COMMITTED or CannotCommit once the
//     decision is logged; with waitFor, once every participant has been
//     told, or TimeoutExpired with Committed set.
//   - Participants hear prepare (or prepareAndCommit) during the vote, then
//     commit or abort, retried with backoff for as long as it takes; one
//     failing past the abandon time is reported (djinn txn show, metrics)
//     and still retried.
//   - Joiners hear, with their join, the transaction's ancestors and their
//     managers, so a participant can tell a nested transaction's family.
//
// # Capabilities (DESIGN.md 7)
//
// A transaction's id names it; its secret, 128 random bits from the
// leader, logged with its creation and returned by Create, is the
// capability to work under it. Join, GetState, nesting (CreateNested,
// CreateUnder) and Promote need the secret: without it — none, another's
// — the transaction does not exist for the caller (UnknownTransaction),
// and nothing changes. So only those its creator handed the secret can
// join it, and TX.2.3 (a participant back with another crash count aborts
// the transaction) holds among them alone. The manager passes the secret
// to every participant it calls, and the nest participant checks that the
// parent's manager presents the parent's secret. Commit, Abort, Describe
// and List are the creator's, by principal (the server's rules).
//
// # Listing
//
// List reads the caller's own transactions, by id from the page's after:
// the state keeps each principal's ids in order (list.go), changed with
// every transaction added or forgotten, so a page costs what it holds and
// the transactions of other states it skips, never other principals'.
// With the state locked, which every transaction call waits for, a page
// skips at most listSkips (4096) transactions of other states; past them
// it ends with those found, or, none found yet, unlocks and carries on.
//
// Every principal's transactions are kept in order too: ListEvery (an
// operator's listing) pages them as List pages one principal's, and
// Highest (the console's view) takes the highest ids walkStep (256) at a
// time, unlocking between; Count and CountEvery, the totals of the pages, come
// from counts by state kept as transactions change state. No listing
// copies or sorts every transaction with the state locked.
//
// # Goroutines
//
// Run owns the leader's work for one term: at most Workers goroutines
// (pool.go) that run the votes' steps, the outcome calls (at most maxCalls
// in flight) and the records of outcomes told; the votes (counted in a
// WaitGroup) and the forgetting. A call to a participant over the network
// holds no worker while it waits: its answer comes to a callback. When the
// term ends, a vote still waiting for participants stops undecided — the
// next leader votes again — and Run returns only once every vote, task
// and call it started has.
//
// Who may call what: commit, abort, describe and list answer only the
// principal that created the transaction (others get UnknownTransaction);
// join, getState and promote answer whoever holds the manager's reference
// and the transaction's id, as participants and nested managers need.
package txn
