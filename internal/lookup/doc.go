// Package lookup is the deterministic core of the lookup service, Jini's
// registrar (River's Reggie), as DESIGN.md 6 summarizes it: the registry
// of service items, template matching, browsing, and the transitions that
// notify registrations hear of.
//
// It runs inside the Raft state machine's Apply, so it reads no clock,
// draws no random numbers, starts no goroutine, and returns nothing whose
// order depends on map iteration: every list it returns is sorted. The
// Registry's types are plain Go values (package service's) that the
// service layer (Service, State) maps to messages with internal/wire. It
// is not safe for concurrent use: the caller serializes calls. Leases live elsewhere: the caller grants a
// registration's lease (LeasePolicy computes for how long), passes its id
// to Register, and calls Remove when it ends; likewise for a watch's lease
// and RemoveWatch. The caller also assigns every id, picks the random item
// of the one-item lookup, and delivers events.
//
// # Model
//
// Items, entries, templates and their rules — checking, canonical form,
// matching, the attribute calls, browsing by type — are package service's:
// the registry holds each item as a service.Record and compiles each
// template to a service.Matcher, and calls return items in canonical form.
//
// # Changes and events
//
// Register, Remove, AddAttributes, ModifyAttributes and SetAttributes each
// change one item atomically — on any error nothing changes — and return
// the events the change causes, sorted by watch id: for each watch whose
// template matched the item before (pre) or after (post), one event if the
// transition is in the watch's mask:
//
//	pre matched, post matches       MatchMatch   (Item: the new item)
//	pre matched, post does not      MatchNoMatch (Item: the new item, nil if removed)
//	pre did not, post matches       NoMatchMatch (Item: the new item)
//
// An attribute call that leaves the item as it was (adding only
// duplicates, modifying nothing, setting the same entries) is no change
// and causes no event, where Reggie sends MatchMatch. Registering an item
// again is always a change: a watch that matched the old and matches the
// new hears MatchMatch even when the two are identical, and a replacement
// yields one event per watch (Reggie sends MatchNoMatch then NoMatchMatch).
//
// # Indexes and cost
//
// Items are held by id (a lookup by id is O(1)) and indexed by each
// service type: a template naming types scans only the items of its least
// common type. A template naming neither an id nor a type scans every
// item. Watches are indexed by the service id their template names, else
// its first service type, else its first entry template's type; a change
// to an item looks only at the watches indexed under its id, its types and
// its entries' type names (before and after), plus the watches whose
// template names none of these, which are checked on every change.
//
// Records intern their names, so each distinct name is stored once; a
// field costs 24 bytes plus its value's payload. A typical item — 2
// service types, 3 entries of 3 short string fields, a 40-byte reference —
// costs about 1.2 KB of heap in 7 objects, indexes included
// (TestMemoryPerItem). The collector's marking work grows with the
// objects, so the entries of an item share allocations (service.Record),
// the indexes hold their sets in their maps, and a field value's index key
// shares the bytes of the one item that has it.
//
// # Ownership
//
// An item belongs to the principal that registered it (its lease's
// principal, DESIGN.md 7): registering again under its service id replaces
// it only for that principal. Anyone else is refused with PermissionDenied
// — in Apply, so two principals racing for one id cannot both win — and
// the owner's item, lease and attributes stay. The refusal says only that
// another principal's item holds the id, which a lookup by that id shows
// anyone, and nothing of the item, its owner or its lease: treating the id
// as free would let anyone replace a live service (the lookup service is
// where clients find it), and answering "not found" would be false, since
// a lookup finds it. Changing attributes is the owner's too (the server's
// rule for those calls), while its lease's cookie lets any holder renew
// it. Items and watches count towards their principal's quotas.
//
// # Errors
//
// Every bad argument gets a djinn error naming the bad value: InvalidArgument
// for a broken rule (a zero or reserved id, an empty name, a duplicate
// field, a type mismatch in ModifyAttributes, a negative max),
// ResourceExhausted for a value over one of the Limits, NoSuchObject for an
// unknown registration or watch. Nothing panics on bad input.
package lookup
