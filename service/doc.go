// Package service is the vocabulary of djinn's lookup service, Jini's
// net.jini.core.lookup and net.jini.core.entry: the service items services
// register, the attribute entries that describe them, the templates that
// find them, and the rules every registrar applies to them — checking,
// canonical form, matching, the attribute calls and browsing by type. The
// registrar (internal/lookup), the client library (package client) and the
// JoinManager and ServiceDiscoveryManager (package lookup) all use these
// types and rules, so an item means the same thing everywhere. The package
// has no gRPC in it; its wire form is protobuf's, written and read here
// directly.
//
// # Model
//
// An Item is a service's id, its reference (opaque bytes), the names of
// its service types and its attribute entries. An Entry is a typed record:
// a type name, the names of its supertypes nearest first (entry types have
// single inheritance, as Java classes do) and named fields whose values are
// strings, int64s, float64s, bools or bytes (Value), or null.
//
// A service's types form a hierarchy, as Java's classes and interfaces do
// and as Go's interfaces may: an item declares it in Supertypes, for each
// type that extends others the types it directly extends. A Go service
// that is a Laser, which is a Printer, which is a Device, can say
//
//	service.Item{
//		Types:      []string{"example.Laser"},
//		Supertypes: map[string][]string{"example.Laser": {"example.Printer"}, "example.Printer": {"example.Device"}},
//	}
//
// and is found by a template for any of the three. An item may instead
// list every type flat in Types, as djinn's items did before hierarchies:
// matching treats both alike; only browsing by type (Record.ServiceTypes,
// a registrar's ServiceTypes) needs the hierarchy to leave out supertypes.
//
// A Template matches an item when its id, if any, is the item's, the item
// has each of its service types (listed, or given by the hierarchy), and
// each of its entry templates matches some entry of the item — possibly
// the same entry for several templates, as in Jini. An entry template
// matches an entry whose type is the template's type or has it as a
// supertype, and which has a field equal to each field the template sets:
// a null Value in a template is a wildcard, a null field equals no set
// value, and a field the entry lacks does not match a set one. Values are
// equal when of the same kind and value; floats compare by bits, as Java's
// Double.equals (NaN equals NaN, 0.0 differs from -0.0).
//
// # Canonical form
//
// Limits.Record checks an item and returns it as a Record, in canonical
// form: service types sorted without duplicates, with those the hierarchy
// adds; each type's direct supertypes sorted without duplicates; entries
// without duplicates (Jini drops a duplicate entry wherever one would
// arise, and so does every call here), each entry's fields sorted by name.
// Registrars store and return items in this form, so two items describe
// the same service when they are Equal in it. Limits.Matcher checks and
// compiles a template. A Record is built for holding many: names are
// interned (each distinct name stored once, a field 24 bytes plus its
// value's payload) and an item's entries take three allocations however
// many there are, which is what a collector marks.
//
// # Errors
//
// Every bad value gets a djinn error naming it: djinn.InvalidArgument for a
// broken rule (an empty or invalid name, a field named twice, an entry type
// in its own chain, a type its own supertype, a type mismatch in
// ModifyAttributes), djinn.ResourceExhausted for a value over one of the
// Limits. Nothing panics on bad input.
package service
