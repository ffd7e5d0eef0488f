// Package discovery is the network side of Jini discovery for djinn: how a
// lookup service (a registrar) makes itself known, and how clients and
// services find registrars, by group over multicast or by locator over
// unicast TCP. The bytes of the protocols (version 2 framing, the plaintext
// multicast formats, the unicast negotiation and djinn's own unicast format)
// belong to internal/discovery; this package owns the sockets, the timers,
// the bounds and the decisions.
//
// # The registrar side
//
// A Registrar runs three things for a lookup service, whose service id,
// member groups and gRPC endpoint it is given:
//
//   - a unicast discovery server on TCP port 4160 (by default): it reads a
//     version 2 request and answers in djinn's format with the registrar's
//     locator, gRPC endpoint, service id and groups; a Java client, which
//     proposes only Java formats, gets the protocol's null-format answer.
//     Each connection has a deadline, the connections served at once and
//     the request size are bounded, and bad input is counted
//     (RegistrarStats) and ends the connection;
//   - multicast announcements to 224.0.1.84:4160 on each chosen interface:
//     one at start, one every announcement interval (2 minutes), one at
//     once when SetGroups changes the groups, and a last one with no groups
//     on Close, after the unicast server has stopped;
//   - it hears multicast requests on 224.0.1.85:4160 and answers each that
//     seeks one of its groups (or any group) and does not list it among the
//     registrars already heard: it connects by TCP to the requester's
//     response server and runs unicast discovery there (DJ.2.6.1).
//
// # No amplification
//
// Multicast packets are unauthenticated UDP, so their source addresses can
// be forged. A registrar never answers a request with a packet: its answer
// goes over a TCP connection it opens to the host and port the request
// names, and it writes nothing on that connection before the other side has
// completed the handshake and sent a valid unicast request. A host whose
// address was forged into a request cannot do that (it never asked), so it
// receives a connection attempt (a SYN, at most two: the connection times
// out after 2 seconds) and no data: nothing bigger than the forged request,
// and nothing that a plain TCP connection attempt would not send. The
// registrar also refuses to connect to wildcard, multicast and broadcast
// addresses, and to loopback unless the request arrived on loopback; it
// answers one requester address at a time and a bounded number at once;
// and it counts what it refused (RequestsSpoofed, RequestsDropped) and the
// connections that failed (ResponsesFailed, where forged requests end up).
// Announcements are sent on a timer and on the registrar's own changes,
// never in reply to anything.
//
// # The client side
//
// LookupLocatorDiscovery finds registrars at given locators (jini://
// URLs), retrying each with capped exponential backoff until it answers.
// LookupDiscovery finds them by group: it runs a TCP response server, sends
// bursts of multicast requests (7, 5 seconds apart, at start and when groups
// are added, each listing the registrars already discovered) and listens to
// announcements; an announcement of a registrar not yet discovered leads to
// unicast discovery at the locator it names, because only the registrar's
// answer carries its endpoint. LookupDiscoveryManager runs both and reports
// each registrar once. Where there is no multicast, locators come from
// static seeds (ParseSeeds) or DNS SRV records (LookupSRV; the manager can
// re-resolve them periodically).
//
// Each utility reports Discovered, Changed and Discarded events, to a
// listener function or on a channel, in order, from a goroutine of its own.
//
// # When a registrar is discarded
//
// Group discovery trusts a registrar's own unicast answer, not a multicast
// packet that anyone could have sent. A discovered registrar is discarded
// when:
//
//   - it is unheard for three announcement intervals and a unicast check at
//     its locator then fails (Unreachable); while the check succeeds it is
//     kept, and checked again every interval;
//   - it announces that it has no groups (its last announcement) and a
//     unicast check then fails or confirms it (Left, NoInterest); a
//     registrar that answers with wanted groups was not leaving, and the
//     announcement is counted as spoofed;
//   - its groups, as a unicast check after an announcement that differs
//     confirms, or the utility's own groups, no longer meet (NoInterest);
//   - the user discards it (ByUser), typically after a failed call. It is
//     discovered again when it next answers a request or announces itself.
//
// An announcement whose locator answers with another service id is counted
// (SpoofedAnnouncements) and ignored. A response connection, which any host
// can open, can add a registrar but never alter one already discovered: a
// differing answer there only makes the utility check the registrar at its
// known locator. Plaintext discovery authenticates nothing, though: a host
// on the network can still pose as a registrar nobody has discovered yet.
// Authenticate registrars where it matters, with TLS on their gRPC
// endpoints (DESIGN.md section 7).
//
// # Sockets
//
// Multicast is IPv4, as the Jini groups are. Every registrar and client on
// a host binds UDP port 4160 with SO_REUSEADDR and joins its group on each
// chosen interface (all that are up and multicast-capable, by default);
// packets for another group, unicast packets and packets that arrive on
// another interface are dropped before decoding. Requests carry, per
// interface, that interface's IPv4 address as the response host, unless
// one is configured. Every interval and bound is configurable, so tests
// run the protocols in milliseconds.
//
// # Shutdown
//
// Close on any of the types stops it and waits for every goroutine it
// started; a closed utility closes its event channel and drops the events
// not yet delivered.
package discovery
