// Package lookup is the deterministic core of the lookup service, Jini's
// registrar (River's Reggie), as DESIGN.md 6 summarizes it: the registry
// of service items, template matching, browsing, and the transitions that
// notify registrations hear of.
//
// It runs inside the Raft state machine's Apply, so it reads no clock,
// draws no random numbers, starts no goroutine, and returns nothing whose
// order depends on map iteration: every list it returns is sorted. It
// imports neither gRPC nor protobuf; its types are plain Go values that the
// service layer maps to messages. It is not safe for concurrent use: the
// caller serializes calls. Leases live elsewhere: the caller grants a
// registration's lease (LeasePolicy computes for how long), passes its id
// to Register, and calls Remove when it ends; likewise for a watch's lease
// and RemoveWatch. The caller also assigns every id, picks the random item
// of the one-item lookup, and delivers events.
//
// # Model
//
// An Item is a service's id, its reference (opaque bytes), the names of
// its service types (every type it has, inherited ones included: the
// registry knows no type hierarchy for services) and its attribute
// entries. An Entry is a typed record: a type name, the names of its
// supertypes nearest first (entry types have single inheritance, as Java
// classes do) and named fields whose values are strings, int64s, float64s,
// bools or bytes (Value), or null.
//
// A Template matches an item when its id, if any, is the item's, the item
// has each of its service types, and each of its entry templates matches
// some entry of the item — possibly the same entry for several templates,
// as in Jini. An entry template matches an entry whose type is the
// template's type or has it as a supertype, and which has a field equal to
// each field the template sets: a nil Value in a template is a wildcard, a
// null field equals no set value, and a field the entry lacks does not
// match a set one. Values are equal when of the same kind and value; floats
// compare by bits, as Java's Double.equals (NaN equals NaN, 0.0 differs
// from -0.0).
//
// The registry stores items in a canonical form, which is what calls
// return: service types sorted without duplicates, entries without
// duplicates (Jini drops a duplicate entry wherever one would arise, and so
// does every call here), each entry's fields sorted by name.
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
// Names (types, supertypes, field names) are interned with package unique,
// so each distinct name is stored once; a field costs 24 bytes plus its
// value's payload. A typical item — 2 service types, 3 entries of 3 short
// string fields, a 40-byte reference — costs about 1.2 KB of heap in 7
// objects, indexes included (TestMemoryPerItem). The collector's marking
// work grows with the objects, so the entries of an item share
// allocations, the indexes hold their sets in their maps, and a field
// value's index key shares the bytes of the one item that has it.
//
// # Errors
//
// Every bad argument gets a djinn error naming the bad value: InvalidArgument
// for a broken rule (a zero or reserved id, an empty name, a duplicate
// field, a type mismatch in ModifyAttributes, a negative max),
// ResourceExhausted for a value over one of the Limits, NoSuchObject for an
// unknown registration or watch. Nothing panics on bad input.
package lookup
