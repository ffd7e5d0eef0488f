// Package client is how Go programs use djinn: connections to djinn
// servers, leases held as values, batch renewal, a background renewer, and
// remote event listeners and senders.
//
// # Connections
//
// Dial connects to a server or a cluster: one endpoint, several
// (comma-separated), or a DNS name with several addresses. Leases and
// references, though, name the endpoint that made them, which need not be
// the one dialled (another cluster member, another service, a listener in
// another program), so every call that reaches a remote object takes a
// Connector, and a Pool keeps one gRPC connection per endpoint, dialled on
// first use. Connections are plaintext unless WithTLS or WithTLSFiles is
// given: fine on loopback, not beyond. WithTLSFiles reads a certificate,
// its key and a CA bundle from PEM files, and again when they change, so a
// client that runs for months follows their renewals without a restart.
//
// # Clusters
//
// Every member of a djinn cluster serves the same services under the
// cluster's service id, so a reference to a cluster service is the same
// object whichever member made it (references are equal when their service
// and object ids are: the endpoint is only where to start). A Client
// follows the cluster it dialled: it asks for the member list, keeps it
// fresh, and sends each call to the leader while it is up and to the other
// members when it is not. A Pool follows every cluster it learns of (by
// Follow, by reaching a member through ConnFor, or by Learn, which waits
// for the member's answer), and ConnFor reaches a
// reference to a followed cluster's service at whichever member serves. So
// a lease granted by a member that later died renews through the others
// with no change to the lease, its token or the caller, and so do the
// references held by the mailbox, transaction, lock, lookup, renewal and
// lookup discovery clients. Listener references of clients name the
// client, and stay where they are.
//
// # Sessions
//
// A connection carries its unary calls — the methods of this package and
// generated clients on a Pool's connections alike — over one session
// stream to the server (DESIGN.md 7a), many in flight at once with no
// per-call stream or headers. It is transparent: each call still returns
// its own answer or error. A call a broken session had sent fails as
// Unavailable, "may or may not have been made", as a unary call on a
// broken connection does (sent again only when its method is declared
// idempotent in its proto); a call not yet sent goes on a new session.
// WithoutSession turns sessions off; servers without them are called
// unary (session.go).
//
// Every error a remote call returns is a *djinn.Error of the kind the server
// named, so errors.Is(err, djinn.ErrUnknownLease) works whichever side of the
// wire the error came from, and djinn.IsDefinite tells whether retrying can
// help. Pool connections do this for raw gRPC calls too, and follow a djinn
// follower's hint to the leader once.
//
// # Finding services
//
// Find finds a service by type without knowing where it is, as a Jini
// client does: it discovers lookup services — by group (InGroups, over
// multicast) or at locators (AtLocators) — and asks them for an item of
// the type, with the attributes Matching gives. Every djinn service
// registers in the lookup services its server discovers, under the types
// package service names (service.TransactionManagerType is
// "djinn.TransactionManager", which is a Jini TransactionManager too), so
//
//	found, err := client.Find(ctx, service.TransactionManagerType, client.InGroups("prod"))
//
// finds a transaction manager of group prod's lookup services. The Found
// holds a Client that follows the service's cluster (its item names the
// members) and gives the client of its kind: TransactionManager, Mailbox,
// RenewalService, LockService, LookupDiscovery.
//
// # Leases
//
// A Lease (LE.2.2) is a value: the landlord's reference, the cookie that
// names the lease there (a 128-bit capability), and the local expiration.
// Leases travel as durations (LE.2.3): the holder's expiration is the time it
// sent the request plus the granted duration, so clock differences between
// machines do not matter and the holder never believes it has more time than
// it was given. Leases are used by pointer and Renew updates the expiration
// in place, as Jini's Lease.renew does; a mutex makes that safe.
//
// A lease prints as a token ("djinn-lease:" and base64url) that the command
// line passes around; ParseToken reads one back and refuses anything
// malformed with an error naming what is wrong.
//
// A LeaseMap batches leases of one landlord: RenewAll and CancelAll are one
// round trip each, and the leases that fail leave the map and come back in a
// *LeaseMapError.
//
// # The renewer
//
// A Renewer (LE.3.1, River's LeaseRenewalManager) keeps leases alive until
// their desired expirations. It times each renewal from when the request
// was sent: half the granted duration, or earlier so that a safety margin
// is left, and batches the due leases of each landlord into one RenewAll. It
// retries indefinite failures with backoff while the lease lasts and reports
// definite failures and expiries to a handler. A lease leaves it at its
// desired expiration, and a second handler hears of that (River's
// DesiredExpirationListener). It owns its goroutines;
// Close stops them and waits. Tests drive it under testing/synctest.
//
// # Events
//
// Listen hosts a remote event listener (EV.2.3.1) on its own gRPC server in
// one line; AddListener hosts more on the same server. A listener's Ref is
// what event generators (or a mailbox) are given. Notify, NotifyBatch and
// EventSender send events; NotifyBatch falls back to one Notify per event
// when the listener does not serve batches. A listener that answers
// djinn.ErrUnknownEvent asks the sender to stop (EV.2.3.3).
//
// A sender that gives up on a call (its context ends) asks the listener to
// stop it (EventListener.StopDelivery) before it returns; listeners hosted
// here then hand none of the call's events that they had not begun to hand,
// and end the context of the handler running. This is what makes an event
// mailbox's DisableDelivery and EnableDelivery exact (EM.4.1): when they
// return, the old target is handed nothing more — also when they are called
// from inside the target's own handler.
//
// Payloads stay protobuf Any values and handbacks stay bytes: nothing
// received from the network is turned into code or into arbitrary types.
//
// # The lease renewal service
//
// RenewalService and RenewalSet (LR.2) hand leases to a djinn server that
// renews them for the client: CreateSet leases a set, RenewFor puts any
// lease in it until a desired expiration, and the set's listeners receive
// RenewalFailureEvent and ExpirationWarningEvent (decoded from the
// RemoteEvent with RenewalFailureEventFrom and ExpirationWarningEventFrom).
// The set's own lease is a normal Lease, renewed and cancelled like any
// other — or kept alive by a Renewer.
//
// # Transactions
//
// TransactionManager (TX.2.1) is a client of a two-phase-commit manager;
// (*Client).TransactionManager finds the one of the dialled server. Create
// (TX.3.2's TransactionFactory.create) returns a *Transaction, TX.3.3's
// ServerTransaction: the manager's reference and the id, with the
// transaction's lease. Commit and Abort drive it to its end, their Wait
// forms also wait until every participant was told (a timeout is a
// djinn.ErrTimeoutExpired whose *djinn.Error says in Committed how it
// ended), and participants Join it under their crash count and ask its
// State when they recover. Two transactions are equal when their managers
// and ids are (Equal, Key), whoever built them.
//
// WithTransaction makes a transaction the current one of a context: code
// down the call chain finds it with TransactionFrom, and the gRPC calls
// made under the context carry it in metadata (TxnManagerMetadataKey,
// TxnIDMetadataKey), which the server handling a call reads back with
// TransactionFromIncoming and joins.
//
// Nested transactions (TX.2.2, NestableTransaction) are the same
// *Transaction with a parent: CreateNested, on the manager or on the
// parent, starts one at the parent's manager, CreateNestedIn one at any
// manager, and IsNested, Parent and EnclosedBy report where it sits.
//
// # Locks
//
// LockService is a client of the OMG concurrency-control service;
// (*Client).LockService finds the one of the dialled server. CreateSet
// makes a *LockSet (LockSet or, Transactional, TransactionalLockSet;
// Related shares a coordinator); CreateOwner leases a *LockOwner. Every
// call names a LockHolder: HeldByOwner, HeldByTransaction, or Implicit —
// the transaction WithTransaction put in the context. Lock blocks until
// granted or ctx ends, retrying a lost answer with the same request id;
// TryLock, Unlock, ChangeMode, Describe, ValidateFence (every grant's
// fencing token) and Coordinator(tx).DropLocks complete it.
//
// # Design notes
//
// Where this package departs from the Jini classes it mirrors, it is on
// purpose:
//
//   - Lease methods that call the landlord take a Connector instead of the
//     lease holding a connection: a lease is plain data that can be parsed
//     from a token or stored, and one Pool serves every lease a program holds.
//   - The Renewer reports failures to one handler for all its leases (the
//     Failure names the lease) rather than one listener per lease; a handler
//     can dispatch, and one ordered stream of reports is easier to reason
//     about.
//   - Lease identity is landlord plus cookie, not pointer identity, so two
//     copies of a lease (parsed from the same token, say) are one key in a
//     LeaseMap or Renewer.
//
// Package clienttest has an in-memory landlord for tests of code built on
// this package, usable over gRPC or in process under testing/synctest.
package client
