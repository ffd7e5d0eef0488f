// Package robust is djinn's robustness suite: it runs a cluster of real
// djinn serve processes with every link through a fault-injecting network,
// runs concurrent workloads of the services against it while faults are
// injected, records what every call asked and was answered, and checks the
// histories against the promises djinn makes.
//
// # Mutual TLS and principals
//
// The members run as a deployment does under mutual TLS (Certs): a CA made
// in the test's temporary directory, a server certificate for the client
// port, a peer certificate per member (Raft, joining, the members' own
// calls) and a client certificate per principal, Alice and Bob. The
// workers of each workload alternate between the two principals (a
// resource made by one is used by the other only through a capability:
// a lock set's id, a mailbox listener), and the isolation workload has
// Bob try, under the same faults, the calls only Alice may make on her
// resources.
//
// # The network
//
// Each member has three proxies (Net, Proxy): its client port (the
// suite's workers dial it), its advertised gRPC address (the members'
// calls to each other and references go there) and its advertised Raft
// address. A Raft connection's sender is told from its first bytes (every
// Raft request begins with a header naming the sending member) or, for a
// TLS connection, whose bytes name no one, from the member process that
// holds its socket (Linux's /proc), so rules
// apply to directed links between members: a link drops (a partition, one
// way or both) or delays its bytes. Gaining or losing a drop cuts the
// link's open connections, so a stream never resumes after losing bytes:
// to the members a partition looks like connections that time out and
// then fail to reach the peer. Clients are never partitioned from a member
// (a partitioned leader still hears its clients, which is where stale
// reads would show). The suite's own questions (who leads, is every
// member a voter) go to the members' real ports, around the network.
//
// # Faults
//
// kill -9 of the leader and of a follower (then a restart on the same
// data), the leader partitioned from both followers, a minority partition
// (a follower alone), one-way loss (the leader's bytes to the followers
// dropped, theirs to it delivered), added delay on every Raft link, every
// connection cut, a clean restart of a follower, and the leader's log
// writes stalled (its fsync hangs: a failpoint compiled in by the
// djinn_failpoint_fsync tag, which the suite builds djinn with), and a
// member (the leader or a follower) killed in the middle of writing a Raft
// snapshot: the djinn_failpoint_snapshot tag compiles in a failpoint that
// stalls the next snapshot write after its first bytes and announces it
// with a file; the suite waits for that file, kills the member, and
// starts it on the same data; and a follower killed in the middle of
// installing a snapshot the leader sent it (it is killed, the suite waits
// until the leader's log begins past the follower's last applied entry —
// the members keep 64 entries behind a snapshot in 64 KiB log segments —
// then starts it with the failpoint set for installs). Either member must
// come back serving (a member that refuses to start fails the run, with
// what it said), and the checkers then find whether anything
// acknowledged was lost. The members take snapshots every second or two
// (every 256 new entries), so the other faults land between and during
// snapshots too. After each, the
// network is healed, stopped members are started again, and the schedule
// goes on once every member votes.
//
// # Checkers
//
//   - KVModel: each member's key/value store (its own, not replicated) is
//     a register per key, linearizable across kills and cut connections
//     (porcupine);
//   - LockModel: a lock set's write lock taken with try_lock, with fencing
//     tokens above every earlier one, valid while held, linearizable
//     (porcupine); CheckFencing: no two holders at once, no token twice,
//     tokens in the order granted;
//   - CheckLeases: no lease gone, nor reported to end, before the
//     expiration its holder was granted; none alive after its cancel or
//     after it was found gone;
//   - CheckMailbox: no acknowledged event lost, order kept, an event
//     pulled again only repeating a sequence number already pulled;
//   - CheckDeliveries: mailbox registrations (six per run) received over
//     delivery streams — most over the client's one shared stream of the
//     connection, every third over a stream of its own, one cancelled in
//     the middle of the run — each acknowledging what it got and opening
//     another stream when one fails: every event whose Notify was answered
//     is received unless its registration ended; a stream delivers the
//     registration's indexes in order without gaps and a new one begins at
//     most one past the highest received; no event comes again at or below
//     an acknowledgement the mailbox reported recorded before the stream
//     opened (redelivery is of unacknowledged events only: EM, event
//     delivery guarantees); an index always carries the same event and
//     sequence numbers never fall along the indexes; no event reaches
//     another registration's or principal's listener (the registrations
//     alternate between Alice and Bob, each principal's on a client of its
//     own). A violation names the
//     registration, sequence number, index, stream and phase of the
//     schedule;
//   - CheckTxns: every transaction's writes at the key/value participants
//     of two or three members are on all of them or on none — all when
//     its commit was answered, none when refused or never asked;
//   - CheckLookups: items registered with the lookup service, their
//     attribute rewritten and some cancelled, looked up linearizably (the
//     leader answers) and allowing a second's staleness (any member
//     answers): a linearizable lookup finds every item whose registration
//     was answered before it began and whose cancel was not yet asked; no
//     lookup finds an item whose cancel was answered before it began (a
//     stale lookup: more than its bound before); a stale lookup is never
//     staler than its bound (it finds what was registered more than the
//     bound before it began); the attribute found is one some call wrote,
//     and not older than one whose write was answered before;
//   - CheckRenewals: client leases (lock owners) in renewal sets, with a
//     membership duration each, some removed, some cancelled by their
//     holder, some sets cancelled: a lease in a live set is renewed until
//     its membership ends (LR.2) — except where a fault was under way
//     within a lease length before it was found gone (an outage can make
//     renewal impossible in time: those are counted, as "renewal: leases
//     lost in an outage (allowed)", not hidden); a lease removed, or of a
//     cancelled set, or past its desired expiration is no longer renewed
//     (LR.2); a lease that expired in its set, or whose renewal failed
//     definitely (its holder cancelled it), is named by a renewal failure
//     event (LR.2, LR.2.1), which the workload pulls from an event
//     mailbox;
//   - CheckIsolation: Alice makes a lock owner, a lock set, a mailbox
//     registration holding an event, a transaction, a renewal set and a
//     lookup item; Bob, holding every id and cookie of them, tries their
//     leases' cancel, the mailbox's pull, ack, get and disable, the
//     transaction's abort, commit, describe and get state by its id alone,
//     the renewal set's get, list and listener clear, and the item's
//     attribute change: every answer must be NOT_FOUND (no answer at all,
//     in a fault, is allowed; another code is not, whichever member
//     answers after a failover), and Alice must then find each resource as
//     she left it (lease alive, event stored, transaction active, item
//     unchanged). A lease's renewal with its cookie is a capability by
//     design (a renewal service renews others' leases), and so are a lock
//     set's calls with its id: they are not tried.
//
// Each checker is shown to catch a bug planted in the server by a build
// tag (djinn_planted_fence, djinn_planted_lease, djinn_planted_mailbox,
// djinn_planted_txn, djinn_planted_lookup: lookups by service id miss a
// quarter of the items; djinn_planted_renewal: the renewal service never
// renews a quarter of the client leases): TestPlantedBugsAreCaught builds
// djinn with the tags and fails unless each checker reports violations.
// The isolation checker is shown to catch a leak planted in the suite:
// the same run's intruder calls as Alice herself, so its calls are
// answered and take effect.
//
// A call whose answer was lost (a timeout, a reset, a lost leadership) may
// or may not have taken effect: it is asked again where that is safe (the
// same lock request id; an unlock whose refusal says it was done), and
// otherwise recorded with an unknown outcome, which the checkers allow to
// have happened at any time after its call, or not at all.
package robust
