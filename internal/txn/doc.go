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
// ABORTED before the decision is logged, and none is asked to prepare
// before the transaction is logged VOTING.
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
//   - VOTING: commit was asked. Each participant is asked to prepare; the
//     first ABORTED vote, UnknownTransaction or definite error, or a
//     participant unreachable past the vote timeout, aborts; NOTCHANGED
//     participants are dropped; the last participant after only NOTCHANGED
//     votes gets prepareAndCommit. A transaction's vote is past the lease:
//     its lease ending while VOTING changes nothing.
//   - COMMITTED or ABORTED: decided. The lease ends (ApplyRelease: nobody
//     is told, the transaction is its owner). PREPARED participants are
//     told to commit; on abort, those that voted PREPARED or were not yet
//     asked are told to abort. Once each has been told, the transaction is
//     settled, remembered for the retention time (a repeated commit or
//     abort gets its outcome) and then forgotten (UnknownTransaction).
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
//	TxnVoting    commit: ACTIVE → VOTING, before any prepare is sent
//	TxnDecide    the vote's outcome, or an abort: the commit point, with the votes
//	TxnPromote   another manager's nested transaction promoting its participants into ours
//	TxnNotified  participants told the outcome, in batches, after they took it
//	TxnForget    settled transactions past the retention time
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
//     repeated prepare with their vote (TX.2.6). A last participant that may
//     have rolled forward on an earlier leader's prepareAndCommit must
//     answer, however long that takes, and its COMMITTED decides.
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
// # Goroutines
//
// Run owns the leader's work for one term: the votes it starts (each in a
// goroutine counted in a WaitGroup), the outcome calls (at most maxCalls in
// flight) and the forgetting. When the term ends, a vote still waiting for
// participants stops undecided — the next leader votes again — and Run
// returns only once every vote and call it started has.
//
// Who may call what: commit, abort, describe and list answer only the
// principal that created the transaction (others get UnknownTransaction);
// join, getState and promote answer whoever holds the manager's reference
// and the transaction's id, as participants and nested managers need.
package txn
