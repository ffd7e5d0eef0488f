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
//     longer be renewed, so an expiry in flight never races a renewal.
//
// Table methods named Apply* are deterministic and run only from the state
// machine; the others run on the leader. One mutex guards the table.
package lease
