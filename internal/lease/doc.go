// Package lease is djinn's lessor: the one table of every lease any djinn
// service grants, the duration negotiation of the leasing specification
// (LE.2.2), and the leader-side loops that renew and expire leases under Raft.
//
// The design is the etcd lessor's and Consul session's (DESIGN.md section 2):
//
//   - Grants, cancels and expiries are commands in the replicated log, so every
//     member holds the same set of leases. Grants come inside the owning
//     service's own command (a mailbox registration grants its lease in the
//     same entry), so a resource and its lease appear and vanish together.
//   - Renewals are served from the leader's memory and are not logged. What is
//     logged instead is each lease's horizon: an upper bound on any expiration
//     the leader has granted for it. A renewal that would pass the horizon
//     first logs a new one (expiration + slack); a background checkpoint raises
//     horizons of busy leases ahead of need, in batches, so renewals rarely
//     wait for the log.
//   - A new leader (or a restarted single node) sets each live lease's
//     expiration to max(horizon, now + grace) before it expires anything, where
//     grace is one election timeout; a lease whose horizon already passed stays
//     expired. Hence the contract: a lease never expires before its granted
//     expiration, and after a failover or restart it may live at most slack +
//     grace longer.
//   - Expiry is found by a min-heap on expiration, keyed lazily (a renewal that
//     extends a lease does not touch the heap; the loop re-checks on pop), and
//     proposed in rate-limited batches after the leader re-confirms its
//     leadership with a quorum. A lease whose expiration has passed can no
//     longer be renewed, so an expiry in flight never races a renewal. A
//     caller told a lease is gone (UnknownLease of Renew, Cancel or
//     Remaining) before the loop logged its expiry waits for that expiry to
//     be logged first: a successor would otherwise promote the lease to its
//     horizon, and a lease said gone would be alive again.
//
// The Table is the one owner of the leases and of the mutex that guards
// them; every operation is a method of it. Methods named Apply* run only
// from the state machine. The leader-side operations — Promote, Renew and
// Unrenew, PopExpired and Requeue, DueHorizons — take the time they act at,
// so they too are plain functions of the table and their arguments; the
// Lessor calls them and logs what they return. A lease that a cancel or an
// expiry ends is returned by ApplyCancel or ApplyExpire, not called back:
// the state machine hands it to the service that owns its kind. A service
// that ends its own lease (a decided transaction, a replaced registration)
// calls ApplyRelease, and nobody is told.
//
// # Owners and holders
//
// Every lease belongs to the principal whose call created it (DESIGN.md
// 7); the table keeps it (Principal) and counts each principal's leases in
// the state machine's quota ledger (Quotas): all its leases, and those of
// each kind that has a quota, refusing a grant past a limit inside Apply.
// A lease's cookie is a capability: any holder may renew it, as a renewal
// service renews its clients' leases. What a holder that is not the owner
// may do stops there: its renewal never brings the expiration earlier
// (Table.Renew), and cancelling — ending the lease — is the owner's (the
// server's rule for Cancel answers UnknownLease to anyone else). So a
// cookie handed to a helper can keep a resource alive but never destroy
// it.
package lease
