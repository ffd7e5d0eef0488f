// Package renewal is the lease renewal service (the Jini Lease Renewal
// Service Specification, LR; docs/specs.md): it renews other services'
// leases, kept in renewal sets, for clients that sleep, disconnect or hold
// too many leases to renew themselves.
//
// A set owns a lease granted in the same log entry that creates it; when the
// lease ends the set is destroyed and its client leases are left alone. Each
// client lease has a desired expiration (when the client wants it to leave
// the set), an actual expiration (the last recorded renewal) and a renewal
// duration. Every change the clients make, and every renewal outcome, is a
// log command: sets, their leases, desired expirations and listeners survive
// crashes, and a lease returned to a client carries its last recorded
// expiration (LR.2).
//
// Renewal runs on the leader. A schedule (a min-heap that every member keeps
// from the log, so a new leader has it) names when each client lease is next
// due: a third of its granted time before it expires, or its desired
// expiration if that comes first. The leader takes due leases, up to a
// window early so that leases of one landlord share a call, renews them in
// batches per landlord (Landlord.RenewAll), and records successes in batched
// commands. Between renewals, the leader probes each lease every Probe (a
// minute): a RenewAll entry asking for the time the lease has left, which
// extends nothing and is not logged unless the landlord granted less, so that
// a lease cancelled behind the set's back is reported within about Probe
// rather than up to two thirds of its grant. An indefinite failure is retried with backoff until the lease
// would expire; a definite one (LR.2's definite exceptions: djinn error kinds
// for which djinn.IsDefinite holds) ends it at once. A lease leaves its set
// exactly in LR.2's five cases, and the two failure cases raise a renewal
// failure event carrying the last error.
//
// Events (LR.2.1): each set has at most one listener per event id, covered by
// the set's lease. Sequence numbers are per set and event id, assigned in the
// log, and continue across listener replacement. Undelivered events are
// replicated state, delivered by the shared engine (internal/event) and
// forgotten once delivered; a definite delivery failure, UnknownEvent
// included, clears only that registration. Expiration warnings are raised by
// the leader once per set lease expiration, at least the minimum warning
// before it.
package renewal
