// Package join is the replicated state of how a djinn cluster's services
// join lookup services (Jini's JoinAdmin): for each service, the service id
// its item has in every lookup service, the groups it joins by, the
// locators it joins at and the attributes an operator gave it.
//
// # Who sets what
//
// Two sources change a service's settings, each through the log:
//
//   - the leader's configuration ([lookup-join] in the server's configuration),
//     through JoinConfigure, which the leader proposes when it starts
//     leading and finds the state differ from its configuration. It also
//     gives a cluster-wide service its service id, once: 128 random bits
//     drawn by the first leader that runs the service, kept from then on,
//     so every later leader registers the service under the same id and a
//     lookup service holds one item for it, not one per member. (The id
//     is drawn, not derived from the cluster's id, so that nobody can
//     register an item under it before the cluster does.) A cluster
//     restored from another's snapshot, which answers to the saved
//     cluster's references, keeps the ids too: its leader takes the saved
//     cluster's items over.
//   - an operator, through JoinGroupsChange, JoinLocatorsChange and
//     JoinAttributesChange (the JoinAdmin calls). Each marks what it
//     changed as set: from then on the configuration no longer governs it,
//     on any leader, until a reset (JoinConfigure with revert) gives all
//     three back to the configuration.
//
// So a configuration file that changes takes effect at the next leader's
// start for what no operator has set, and an operator's change holds
// across restarts and failovers whatever the members' files say.
//
// # Rules
//
// Groups are checked as multicast packets carry them and kept sorted
// without duplicates; locators are kept canonical (jini://host:port/),
// sorted, without duplicates. Attributes follow the lookup service's own
// rules (package service: canonical entries, no duplicates, the attribute
// calls computed exactly as a registrar computes them) within Limits, which
// leave room in an item for the entries a service sets itself: those of
// the types ServiceControlled names, which an operator can neither add,
// change nor remove. Every bad value is refused with an error naming it,
// and nothing changes.
//
// Apply is deterministic: no clock, no I/O, no goroutine. A function set
// with OnChange hears, after each applied change, the service it changed,
// so that the member that registers the service brings its registrations
// up to date.
package join
