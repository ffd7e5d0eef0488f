package discovery

import (
	"encoding/binary"
	"net/netip"

	"github.com/djinn-go/djinn"
)

// ProtocolVersion is the discovery protocol version this package speaks.
const ProtocolVersion = 2

// MaxPacketSize bounds every multicast packet the encoders produce: the UDP
// payload, header included, as River counts it (DJ.2.4.6, DJ.2.5.4).
const MaxPacketSize = 512

// MaxHostLen bounds the host string of a multicast packet: a DNS name has at
// most 253 bytes; the rest leaves room for an IPv6 address with a zone.
const MaxHostLen = 255

// The well-known multicast groups and port (DJ.5.5).
var (
	RequestGroup      = netip.AddrPortFrom(netip.AddrFrom4([4]byte{224, 0, 1, 85}), DefaultPort)
	AnnouncementGroup = netip.AddrPortFrom(netip.AddrFrom4([4]byte{224, 0, 1, 84}), DefaultPort)
)

// The multicast packet types (DJ.2.4.3, DJ.2.5.1).
const (
	packetAnnouncement byte = 0
	packetRequest      byte = 1
)

// headerLen is the length of the version 2 multicast header: protocol
// version (4), packet type (1), format id (8).
const headerLen = 4 + 1 + 8

// idLen is the length of a service id on the wire.
const idLen = len(djinn.ID{})

// MulticastRequest is a discovering entity's multicast request (DJ.2.4.3):
// where to answer, which groups it looks for and which lookup services have
// already answered.
type MulticastRequest struct {
	// Host and Port are the entity's multicast response server: a lookup
	// service that wants to answer connects there. Host is a host name or
	// an IP address as the sender wrote it (Java peers may send an IPv6
	// zone, say, so it is not parsed here), 1 to MaxHostLen bytes; Port is
	// 1 to 65535.
	Host string
	Port int
	// Groups are the groups sought; none means every group. "" is the
	// public group.
	Groups []string
	// Heard are the service ids of lookup services that need not answer.
	// When they do not all fit in a packet, each packet carries the longest
	// prefix that fits, so put the most important first.
	Heard []djinn.ID
}

// MulticastAnnouncement is a lookup service's multicast announcement
// (DJ.2.5.1).
type MulticastAnnouncement struct {
	// Seq is the announcement sequence number (DJ.2.5.6); every packet of
	// one announcement carries the same.
	Seq int64
	// Host and Port are the lookup service's unicast discovery server, with
	// the same rules as in MulticastRequest.
	Host string
	Port int
	// ServiceID is the lookup service's id; it must not be zero.
	ServiceID djinn.ID
	// Groups are the lookup service's member groups; none means it belongs
	// to no group (the last announcement before it stops).
	Groups []string
}

// checkHostField checks the host of a multicast packet.
func checkHostField(host string) error {
	if host == "" {
		return invalid("empty")
	}
	if len(host) > MaxHostLen {
		return invalid("%d bytes, longer than %d", len(host), MaxHostLen)
	}
	if err := checkString(host); err != nil {
		return invalid("%q: %v", abbrev(host), err)
	}
	return nil
}

func checkPort(port int) error {
	if port < 1 || port > 65535 {
		return invalid("%d: must be 1 to 65535", port)
	}
	return nil
}

// checkGroups checks group names, and says which is bad.
func checkGroups(groups []string) error {
	for i, g := range groups {
		if err := checkString(g); err != nil {
			return invalid("group %d %q: %v", i, abbrev(g), err)
		}
	}
	return nil
}

func appendHeader(b []byte, packetType byte) []byte {
	b = binary.BigEndian.AppendUint32(b, ProtocolVersion)
	b = append(b, packetType)
	return binary.BigEndian.AppendUint64(b, uint64(PlaintextFormat))
}

// EncodeMulticastRequest encodes a request in the plaintext format as one or
// more packets of at most MaxPacketSize bytes, the way the spec (DJ.2.4.6)
// and River split it: every packet carries the host and port and at least
// one group (when there are groups); groups are added in order while the
// packet still has room for every heard id; then as many heard ids as fit
// follow. So the groups of the packets, in order, are exactly req.Groups,
// and each packet carries the largest prefix of req.Heard it can.
//
// A bad host, port or group, or a group too long to fit in a packet with the
// host, is an error of kind djinn.InvalidArgument.
func EncodeMulticastRequest(req MulticastRequest) ([][]byte, error) {
	if err := checkHostField(req.Host); err != nil {
		return nil, invalid("multicast request host: %v", err)
	}
	if err := checkPort(req.Port); err != nil {
		return nil, invalid("multicast request port %v", err)
	}
	if err := checkGroups(req.Groups); err != nil {
		return nil, invalid("multicast request %v", err)
	}
	// fixed: header, host, port, group count and id count.
	fixed := headerLen + 2 + len(req.Host) + 2 + 2 + 2
	nHeard := min(len(req.Heard), maxCount)
	allHeard := nHeard * idLen

	var packets [][]byte
	groups := req.Groups
	for {
		room := MaxPacketSize - fixed
		n := 0
		if len(groups) > 0 {
			if 2+len(groups[0]) > room {
				return nil, invalid("multicast request group %q: %d bytes, too long for a %d-byte packet with host %q",
					abbrev(groups[0]), len(groups[0]), MaxPacketSize, abbrev(req.Host))
			}
			room -= 2 + len(groups[0])
			n = 1
			// More groups only while every heard id still fits.
			for n < len(groups) && n < maxCount && 2+len(groups[n])+allHeard <= room {
				room -= 2 + len(groups[n])
				n++
			}
		}
		chosen := groups[:n]
		groups = groups[n:]
		ids := min(nHeard, room/idLen)

		p := make([]byte, 0, MaxPacketSize)
		p = appendHeader(p, packetRequest)
		p = appendString(p, req.Host)
		p = binary.BigEndian.AppendUint16(p, uint16(req.Port))
		p = binary.BigEndian.AppendUint16(p, uint16(len(chosen)))
		for _, g := range chosen {
			p = appendString(p, g)
		}
		p = binary.BigEndian.AppendUint16(p, uint16(ids))
		for _, id := range req.Heard[:ids] {
			p = append(p, id[:]...)
		}
		packets = append(packets, p)
		if len(groups) == 0 {
			return packets, nil
		}
	}
}

// readHeader reads and checks the version 2 multicast header.
func readHeader(r *reader, want byte) {
	if v := r.u32("protocol version"); r.err == nil && v != ProtocolVersion {
		r.fail(badVersion(r.what, v))
		return
	}
	if t := r.u8("packet type"); r.err == nil && t != want {
		r.failf("packet type %d (%s), want %d (%s)", t, packetTypeName(t), want, packetTypeName(want))
		return
	}
	if f := FormatID(r.u64("format id")); r.err == nil && f != PlaintextFormat {
		r.fail(newProtoError(ErrFormat, djinn.Unsupported, "%s: format %v: only %v is supported", r.what, f, PlaintextFormat))
	}
}

func packetTypeName(t byte) string {
	switch t {
	case packetAnnouncement:
		return "an announcement"
	case packetRequest:
		return "a request"
	}
	return "unknown"
}

// readGroups reads a group count and the groups.
func readGroups(r *reader) []string {
	n := r.count("group count", 2)
	var groups []string
	if n > 0 {
		groups = make([]string, 0, n)
	}
	for i := 0; i < n && r.err == nil; i++ {
		groups = append(groups, r.str("group"))
	}
	return groups
}

// DecodeMulticastRequest decodes one multicast request packet. It accepts
// packets of any length, since peers may be configured for more than
// MaxPacketSize, but nothing else: the version must be 2, the packet type a
// request, the format plaintext, and the data must fill the packet exactly.
// Errors match ErrVersion, ErrFormat or ErrMalformed.
func DecodeMulticastRequest(packet []byte) (MulticastRequest, error) {
	r := &reader{buf: packet, what: "multicast request"}
	readHeader(r, packetRequest)
	var req MulticastRequest
	req.Host = r.str("host")
	r.check("host", checkHostField(req.Host))
	req.Port = r.u16("port")
	r.check("port", checkPort(req.Port))
	req.Groups = readGroups(r)
	n := r.count("heard id count", idLen)
	if n > 0 && r.err == nil {
		req.Heard = make([]djinn.ID, n)
		for i := range req.Heard {
			req.Heard[i] = r.id("heard id")
		}
	}
	r.end()
	if r.err != nil {
		return MulticastRequest{}, r.err
	}
	return req, nil
}

// EncodeMulticastAnnouncement encodes an announcement in the plaintext
// format as one or more packets of at most MaxPacketSize bytes: each packet
// carries the sequence number, host, port and service id, and as many of the
// member groups, in order, as fit (at least one), so the groups of the
// packets, in order, are exactly a.Groups (DJ.2.5.4). No groups make one
// packet with none.
//
// A bad host, port or group, a zero service id, or a group too long to fit in
// a packet with the host, is an error of kind djinn.InvalidArgument.
func EncodeMulticastAnnouncement(a MulticastAnnouncement) ([][]byte, error) {
	if err := checkHostField(a.Host); err != nil {
		return nil, invalid("multicast announcement host: %v", err)
	}
	if err := checkPort(a.Port); err != nil {
		return nil, invalid("multicast announcement port %v", err)
	}
	if a.ServiceID.IsZero() {
		return nil, invalid("multicast announcement service id: missing (all zeros)")
	}
	if err := checkGroups(a.Groups); err != nil {
		return nil, invalid("multicast announcement %v", err)
	}
	// fixed: header, sequence number, host, port, group count, service id.
	fixed := headerLen + 8 + 2 + len(a.Host) + 2 + 2 + idLen

	var packets [][]byte
	groups := a.Groups
	for {
		room := MaxPacketSize - fixed
		n := 0
		for n < len(groups) && n < maxCount && 2+len(groups[n]) <= room {
			room -= 2 + len(groups[n])
			n++
		}
		if n == 0 && len(groups) > 0 {
			return nil, invalid("multicast announcement group %q: %d bytes, too long for a %d-byte packet with host %q",
				abbrev(groups[0]), len(groups[0]), MaxPacketSize, abbrev(a.Host))
		}
		p := make([]byte, 0, MaxPacketSize)
		p = appendHeader(p, packetAnnouncement)
		p = binary.BigEndian.AppendUint64(p, uint64(a.Seq))
		p = appendString(p, a.Host)
		p = binary.BigEndian.AppendUint16(p, uint16(a.Port))
		p = binary.BigEndian.AppendUint16(p, uint16(n))
		for _, g := range groups[:n] {
			p = appendString(p, g)
		}
		p = append(p, a.ServiceID[:]...)
		packets = append(packets, p)
		if groups = groups[n:]; len(groups) == 0 {
			return packets, nil
		}
	}
}

// DecodeMulticastAnnouncement decodes one multicast announcement packet,
// with the same rules as DecodeMulticastRequest; the service id must not be
// zero.
func DecodeMulticastAnnouncement(packet []byte) (MulticastAnnouncement, error) {
	r := &reader{buf: packet, what: "multicast announcement"}
	readHeader(r, packetAnnouncement)
	var a MulticastAnnouncement
	a.Seq = int64(r.u64("sequence number"))
	a.Host = r.str("host")
	r.check("host", checkHostField(a.Host))
	a.Port = r.u16("port")
	r.check("port", checkPort(a.Port))
	a.Groups = readGroups(r)
	a.ServiceID = r.id("service id")
	if r.err == nil && a.ServiceID.IsZero() {
		r.failf("service id: missing (all zeros)")
	}
	r.end()
	if r.err != nil {
		return MulticastAnnouncement{}, r.err
	}
	return a, nil
}
