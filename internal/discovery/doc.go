// Package discovery holds the bytes of the Jini discovery protocols, version
// 2: encoders and decoders for multicast requests and announcements in the
// standard net.jini.discovery.plaintext format, the unicast discovery
// negotiation, djinn's own unicast format, and jini:// locators. It does no
// network I/O of its own: the unicast functions read and write an io.Reader
// or io.Writer the caller owns (and puts deadlines on), and the multicast
// functions turn values into packets and packets into values. Sockets,
// timers, TTLs and the request/announcement schedules belong to the caller.
//
// The layouts below come from the Jini Discovery and Join Specification,
// version 3.0 (sections DJ.2 and DJ.3, cited as DJ.x.y), checked against
// Apache River's implementation. Every number is big-endian; "u16" is an
// unsigned 16-bit number, "i32"/"i64" Java's int/long; "str" is a u16 byte
// length followed by that many bytes of text; "id" is a 16-byte service id,
// the most significant half first (River's ServiceID.writeBytes, which is
// also djinn.ID's byte order).
//
// # Format ids
//
// A discovery format is named by a string; its id is the first 8 bytes of
// the SHA-1 of the name's UTF-8 bytes, as a big-endian number (DJ.2.2.2).
// Id 0 is the reserved null format. net.jini.discovery.plaintext has id
// 0x760f15cb7490ce36 (8507042184704347702, the value the spec prints);
// djinn's format, named "com.github.djinn-go.djinn.grpc.v1" (reverse DNS of
// the module path, as DJ.2.2.1 advises), has id 0xf756aac76c808bed.
//
// # Multicast packets
//
// Requests go to 224.0.1.85:4160, announcements to 224.0.1.84:4160. Every
// version 2 packet starts with a 13-byte header (DJ.2.4.5, DJ.2.5.3):
//
//	i32  protocol version, 2
//	u8   packet type: 1 request, 0 announcement
//	i64  format id (here always plaintext)
//
// The plaintext request data follows (DJ.3.1.1):
//
//	str  host of the requester's multicast response server
//	u16  its port
//	u16  group count, then that many str: the groups sought (none: all)
//	u16  heard id count, then that many id: lookup services that need not answer
//
// The plaintext announcement data (DJ.3.1.2):
//
//	i64  sequence number
//	str  host of the lookup service's unicast discovery server
//	u16  its port
//	u16  group count, then that many str: the member groups
//	id   the lookup service's service id
//
// A packet is at most MaxPacketSize (512) bytes, header included, as River
// counts it (the spec's 512 is a recommendation). What does not fit is split
// the way DJ.2.4.6 and DJ.2.5.4 require and River does: a request that is
// too big drops heard ids, never groups; its groups are spread over several
// packets, each carrying at least one group, more only while all heard ids
// still fit, and then as many heard ids as fit. An announcement's groups are
// spread over as many packets as needed, each repeating the sequence number,
// host, port and service id. Packets are never truncated.
//
// Decoders accept one packet of any length and nothing loose: version 2,
// the expected packet type, the plaintext format, counts that the bytes left
// can hold (checked before anything is allocated), a non-empty host of at
// most 255 bytes, a port from 1 to 65535, a non-zero announcement service
// id, and no trailing bytes.
//
// # Strings
//
// The spec writes strings with Java's writeUTF (modified UTF-8); River's
// plaintext multicast code writes and reads standard UTF-8. The two agree on
// every character of the Basic Multilingual Plane except U+0000, so that is
// what this package allows, both ways: valid UTF-8 with no NUL, no
// surrogates and no character above U+FFFF. Modified UTF-8's C0 80 and
// encoded surrogate pairs are rejected as the invalid UTF-8 they are, and
// River's four-byte sequences as the invalid modified UTF-8 they are. Any
// other string is read the same way by every Jini peer. The empty string is
// a valid group: the public group.
//
// # Unicast discovery
//
// Over a TCP connection (to the lookup service's locator, or from a lookup
// service to a requester's response server), the discovering side sends a
// request (DJ.2.6.6):
//
//	i32  protocol version, 2
//	u16  count, then that many i64: proposed format ids, preferred first
//
// and the lookup service answers (DJ.2.6.7):
//
//	i32  protocol version, 2
//	i64  selected format id: one of the proposed, or 0 for none
//
// followed by the selected format's data, or by nothing when the id is 0.
// A djinn registrar selects its own format if proposed, and otherwise sends
// the 12-byte null answer (Negotiate, DJ.2.6.8). Readers take a size limit
// and read exactly one message's bytes, with buffers that grow with the
// bytes that arrive.
//
// djinn's format data (GRPCFormat) is self-delimiting, so a reader knows it
// has all of it without waiting for the connection to close:
//
//	u32  length of the rest
//	str  locator host: the registrar's unicast discovery host, canonical
//	u16  locator port
//	str  gRPC endpoint, "host:port"
//	id   the registrar's service id
//	u16  group count, then that many str: the member groups
//
// That is the spec's minimum for a unicast response (DJ.2.6.3: the
// registrar proxy, member groups, unicast discovery host and port), with the
// proxy replaced by what a djinn client needs to call the registrar: its
// endpoint and service id.
//
// # Why no plaintext unicast answer
//
// The plaintext unicast response (DJ.3.1.3) is the locator host (str), port
// (u16), the member groups and then a Java-serialized MarshalledInstance
// holding the registrar's Java proxy. djinn has no Java proxy and never
// writes Java serialization (DESIGN.md section 7), so it can give no honest
// plaintext answer; any bytes it wrote in that slot would make a Java client
// fail deep inside deserialization, or worse. The correct answer to a client
// that proposes only Java formats (plaintext, ssl, kerberos, all of which
// end in a marshalled proxy) is the null format, which River reports as
// "format negotiation failed"; that is what Negotiate and ServeUnicast give,
// and so nothing else of the plaintext unicast format is implemented. (Note
// for anyone who does: River writes that format's group count as an i32,
// while the spec says u16.) A version 1 unicast request (a bare i32 1) is
// answered with nothing: ReadUnicastRequest returns ErrVersion and the
// caller closes the connection.
//
// # Locators
//
// A locator is a jini:// URL (DJ.6.1): jini://host, jini://host/,
// jini://host:port or jini://host:port/, the port 4160 by default, an IPv6
// address in brackets; no user info, path, query or fragment. Locator.String
// writes the form River's LookupLocator.toString writes, jini://host:port/
// with the port always present, so ParseLocator(l.String()) == l.
//
// # Errors
//
// Decoders and readers never panic on any input; their errors match one of
// ErrMalformed, ErrVersion, ErrFormat, ErrNoFormat or ErrTooLarge, and also
// a djinn error kind, and name the field that is wrong (with its offset,
// when the message ends too soon).
// Encoders check every field before writing anything and name the bad one.
package discovery
