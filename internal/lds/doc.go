// Package lds is the lookup discovery service (the Jini Lookup Discovery
// Service Specification, cited as LD n.n; River's Fiddler): group and
// locator discovery run on behalf of registrations, which hear of the lookup
// services found and dropped through discovered and discarded remote
// events.
//
// # State
//
// State is replicated through the log and deterministic: it reads no
// clock, draws no random number and starts no goroutine. It holds
//
//   - the registrations, each named by its lease's cookie, with its event
//     id (a counter's next value: unique among all registrations ever
//     made), listener, handback, managed set of groups (all groups, or a
//     sorted set, empty for none), managed set of locators (canonical
//     jini://host:port/, so two spellings of one locator are one), managed
//     set of registrars (the lookup services discovered for it) and the
//     sequence number of its last event;
//   - the table of lookup services the leader's discovery found: service
//     id, gRPC endpoint, locator (as the lookup service names itself) and
//     member groups. Only the leader's discovery feeds it, through LDSFound
//     and LDSLost.
//
// A registration wants a lookup service by group when it wants all groups
// or one of the lookup service's groups (a lookup service of no group has
// left them all and is wanted by no group, as in package discovery), and
// by locator when its managed set has the lookup service's locator.
//
// An entry of the table is live while discovery holds it. Invariant: a
// registration that wants a live lookup service has it discovered. An
// entry that is not live — lost, or discarded by a client and not found
// again yet — is given to no registration, and stays in the table only
// while some registration still has it.
//
// # Events
//
// Each applied command gives each registration it affects at most one
// discarded event and then at most one discovered event, each for all the
// lookup services concerned (LD.4.2 batching: a registration gets every
// live lookup service it wants in the one event that follows its
// registration). Sequence numbers grow by one per event of a registration
// and are part of the state, so a restart or a new leader goes on from the
// last one (LD.3.2).
//
//   - register, and a change of a managed set (LD.3.1, LD.4.1.1): the
//     lookup services the registration has and no longer wants (neither by
//     a remaining group nor by a locator) are discarded; the live ones it
//     wants and has not are discovered. A group or locator added under
//     which a lookup service it has already falls changes nothing.
//   - LDSFound (found, found again, or new groups or addresses): each
//     registration that wants one and has not got it discovers it; one that
//     has it and wants it no longer discards it (a passive no-interest
//     discard).
//   - LDSLost (silent and unreachable, or left its groups): registrations
//     that have it and want it by group discard it (a passive communication
//     discard); those that want it only by locator keep it and hear
//     nothing.
//   - LDSLost, unwanted (discovery no longer looks for it: the union of the
//     managed sets narrowed, or its groups changed): no loss while some
//     registration wants it in a way discovery looks for (by locator, or
//     by group when the leader runs group discovery). It is then taken with
//     its groups as discovery last knew them, as LDSFound takes it:
//     registrations that no longer want it discard it (a passive
//     no-interest discard) and those that want it keep it, so that one made
//     while the narrowing was on its way (a registration cancelled, another
//     made at once for the same group) hears nothing spurious. Otherwise
//     nothing looks for it any more and it is lost, as for LDSLost.
//   - a client's discard (LD.4.1.1): nothing when the registration has not
//     discovered the lookup service; otherwise it is discarded for that
//     registration, the entry is no longer live, and the leader's discovery
//     drops it so as to find it again. Other registrations that have it
//     keep it. When it is found again, every registration that wants it and
//     has not got it — each that discarded it, and those made or changed
//     meanwhile — discovers it.
//   - a registration's lease ends (expiry, cancel, or a definite delivery
//     failure, which cancels it): it is gone, and calls naming it fail with
//     NoSuchObject (LD.4.1).
//
// # The leader
//
// Service checks calls and logs them, delivers events through an
// event.Engine (a definite failure cancels the registration, an indefinite
// one is retried until its lease ends), and runs discovery (Discover): a
// discovery.LookupDiscoveryManager looks for the union of the managed sets
// of groups (group discovery needs multicast; without it lookup services
// are found at locators only, and a registration that wants groups hears
// of those found there whose groups it wants) and of locators, plus the
// server's own lookup service. What it finds is logged in batches
// (LDSFound); what it drops for silence or for leaving, LDSLost; what it
// drops for lack of interest, LDSLost unwanted; its drops for a client's
// discard, nothing. A new leader gives the lookup services of the table a grace
// period to be found again before it logs them lost; so does it for one a
// client discarded.
//
// # Caveats
//
// A locator wants the lookup service that names itself with that locator:
// discovery reports lookup services with the locator they announce, not the
// one that found them, so jini://localhost:4160 does not match a lookup
// service that calls itself jini://10.0.0.7:4160. Discovery reports no
// group changes of a lookup service it found at a locator, only those it
// hears in multicast announcements.
package lds
