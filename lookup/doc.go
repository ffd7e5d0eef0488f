// Package lookup is the client side of djinn's lookup services for whole
// programs: the djinn counterparts of Jini's net.jini.lookup.JoinManager,
// ServiceDiscoveryManager and LookupCache. A service uses a JoinManager to
// stay registered at every lookup service it discovers; a client uses a
// ServiceDiscoveryManager to find services across all of them, once
// (Lookup) or continuously (a LookupCache).
//
// Both managers take a DiscoveryManagement, which a
// discovery.LookupDiscoveryManager (or either discovery utility) is, and
// work with whatever lookup services it reports: discovered ones are
// joined or watched, discarded ones are let go, never treated as fatal.
// Each manager must be the only reader of its discovery source's events.
// A lookup service is reached at the gRPC endpoint discovery reported; one
// that cannot be reached is retried with capped exponential backoff
// (RetryMin to RetryMax), and an endpoint that turns out to serve no
// lookup service, or one with another service id, is discarded from the
// discovery source, which finds it again if it comes back.
//
// # JoinManager
//
// A JoinManager holds one service item and keeps it registered at every
// lookup service discovered. The item's service id is the service's
// identity: an item without one gets a new random id once, reported to
// ServiceIDListener before NewJoinManager returns and then used at every
// lookup service (Jini's lookup services assign the id on first
// registration; 128 random bits need no lookup service, and a service
// learns its id before anything is registered under it, so it can store
// it first).
//
// Each registration's lease is renewed by a client.Renewer (half way
// through each grant, sooner for short leases). When a lookup service no
// longer knows a registration — its lease ran out while the service was
// cut off, the lookup service lost its state, or someone cancelled it — the
// renewal fails and the manager registers the item again; the same
// happens when an attribute call finds the registration gone.
//
// AddAttributes, SetAttributes, ModifyAttributes and Replace change the
// held item, which lookup services joined later receive, and every current
// registration. The held item is computed here by the lookup service's own
// rules (package service, which every djinn lookup service applies), so
// the change works before any lookup service is joined, is refused before
// anything is sent when it is bad, and leaves the same entries everywhere: a
// registration is then given the whole result (SetAttributes, or Register
// when the reference or types changed), never a delta that a lookup
// service could apply to an outdated copy. Changes are serialized, so
// every lookup service sees them in one order. A registration that cannot
// be updated at once is brought up to date by its keeper in the
// background, with backoff.
//
// A lookup service that discovery discards is let go: its registration is
// no longer renewed and lapses, as in Jini. One discarded because the
// service no longer wants it — its group or its locator was taken away
// (discovery.NoInterest, discovery.Removed) — is left at once: the
// registration's lease is cancelled there.
//
// Terminate cancels every registration's lease, so the item leaves every
// lookup service at once rather than when the leases would end. Abandon
// stops the manager and leaves the registrations in place, for another
// manager with the same service id to take over (a cluster's next leader
// does): they end with their leases unless it does.
//
// # ServiceDiscoveryManager and LookupCache
//
// A ServiceDiscoveryManager connects to each lookup service discovered.
// Lookup asks all those connected at once and merges the answers, each
// service once: a service is known by its service id, however many lookup
// services it is registered at.
//
// A LookupCache follows the services matching a template that an
// ItemFilter accepts. At each lookup service it registers for service
// events on all three transitions, with a listener of the manager's (one
// gRPC server for the manager, one listener object per cache), then looks
// up what the lookup service holds, and from then on applies its events.
// Events that arrive while a lookup is under way wait for it and are
// applied after it: each event carries the item as it became, so whatever
// the order of the two, the last word on each item is the lookup
// service's latest. Each lookup service's events carry consecutive
// sequence numbers (EV.2.3.2): a repeated number is a duplicate and is
// dropped; a gap means events were lost (a lookup service that failed over
// does not resend what was in flight) and the cache looks up again there.
// So does an event it cannot read. When the event registration's lease
// cannot be renewed (the lookup service forgot it, or ended it because the
// cache's listener could not be reached) the cache registers again and
// looks up again, keeping what it had until the answer shows what changed.
//
// The cache keeps, for each lookup service, the matching items it has;
// a service is in the cache while some lookup service has it. Listeners
// hear ServiceAdded when the first lookup service has it (and the filter
// accepts it), ServiceChanged when its item changes, and ServiceRemoved
// when the last lookup service loses it, is discarded, or the filter
// refuses the new item. When lookup services hold different versions of an
// item (a JoinManager updating them one after the other) the cache takes
// the one it heard last. Calls to listeners come from the cache's one
// goroutine, in order, never two at once; Lookup, LookupN and Wait answer
// from the cache's own state without a network call.
//
// # Departures from Jini
//
//   - Lookup services are reached over gRPC at the endpoint discovery gave,
//     not through downloaded proxies; nothing received is turned into code.
//   - Service ids are generated by the JoinManager, not assigned by the
//     first lookup service (see above).
//   - A lookup service that cannot be reached is retried with backoff, not
//     discarded: discovery decides when it is gone. Only an endpoint that
//     proves not to be the lookup service discovery named is discarded.
//   - Attribute changes are computed locally and sent whole; Jini sends
//     each call to each lookup service.
//   - Jini's blocking lookup(tmpl, filter, wait) is LookupCache.Wait with a
//     context; a filter cannot change the item it is given.
//   - The discovery source reports to one reader, so a JoinManager and a
//     ServiceDiscoveryManager need one each, where Jini shares one
//     DiscoveryManagement between them.
//   - A listener cannot terminate its own cache (Terminate waits for the
//     listener to return).
//
// # Lifetimes
//
// Every type here owns its goroutines: Terminate stops them and waits for
// them, and Done is closed when it has. Terminate is safe to call more than
// once and from several goroutines. The managers never close their
// discovery source; the caller does, after terminating them.
package lookup
