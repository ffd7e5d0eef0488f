// Package quota bounds what each principal holds, so that one principal's
// load never starves another's (DESIGN.md 7): leases, registrations,
// stored events, transactions and their participants, lock owners and
// waiters, lookup items and watches, renewal sets and their leases.
//
// A Ledger is part of the replicated state machine. Services Take what a
// command creates and Release what it ends, inside Apply: every node
// counts alike, and two requests racing for the last unit cannot both get
// it — the second, applied after the first, is refused. Limits are
// replicated state too: the leader proposes its configuration's (a Quotas
// command) when it starts leading, and snapshots carry them. Counts are
// not in snapshots: whoever holds a thing counts it again on restore
// (Add), so counts and things never disagree.
//
// Each quota has a limit per principal (principals may have their own)
// and a total over all principals, the server-wide backstop. Zero means
// no limit. A refusal is a ResourceExhausted error naming the quota and
// what to do.
//
// Two quotas bound what a principal has on one server rather than what
// the cluster holds for it, and are counted by that server, not in a
// Ledger: Streams (its open streams) and CallsInFlight (its calls being
// served, unary or carried in its sessions).
package quota
