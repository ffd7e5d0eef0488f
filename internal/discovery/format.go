package discovery

import (
	"crypto/sha1"
	"encoding/binary"
	"fmt"
)

// FormatID identifies a discovery format (DJ.2.2.2): the first eight bytes
// of the SHA-1 hash of the format's name in UTF-8, read as a big-endian
// number. Java holds it in a signed long; the bits are the same.
type FormatID uint64

// The format names this package knows.
const (
	// PlaintextFormatName is the standard plaintext format (DJ.3.1): the
	// one every Jini peer speaks for multicast, and the one whose unicast
	// answer carries a Java-serialized proxy.
	PlaintextFormatName = "net.jini.discovery.plaintext"
	// GRPCFormatName is djinn's own unicast format: its answer carries the
	// registrar's locator, gRPC endpoint, service id and member groups. The
	// name follows the spec's advice of a reverse-DNS prefix (DJ.2.2.1),
	// from the module path github.com/djinn-go/djinn; a future incompatible
	// layout gets a new name (….v2), never a change under this one.
	GRPCFormatName = "com.github.djinn-go.djinn.grpc.v1"
)

// The format ids. Each is FormatIDOf of its name; tests check that, and that
// PlaintextFormat equals 8507042184704347702, the value printed in the spec.
const (
	// NullFormat is the reserved id 0: in a unicast answer it means "none
	// of the proposed formats is acceptable".
	NullFormat FormatID = 0
	// PlaintextFormat is FormatIDOf(PlaintextFormatName).
	PlaintextFormat FormatID = 0x760f15cb7490ce36
	// GRPCFormat is FormatIDOf(GRPCFormatName).
	GRPCFormat FormatID = 0xf756aac76c808bed
)

// FormatIDOf returns the format id of a format name.
func FormatIDOf(name string) FormatID {
	sum := sha1.Sum([]byte(name))
	return FormatID(binary.BigEndian.Uint64(sum[:8]))
}

// knownFormats names the ids of the formats specified for Jini (DJ.3) and
// ours, so errors and logs can say which format a peer used.
var knownFormats = map[FormatID]string{
	NullFormat:      "null",
	PlaintextFormat: PlaintextFormatName,
	GRPCFormat:      GRPCFormatName,
	FormatIDOf("net.jini.discovery.x500.SHA1withDSA"): "net.jini.discovery.x500.SHA1withDSA",
	FormatIDOf("net.jini.discovery.x500.SHA1withRSA"): "net.jini.discovery.x500.SHA1withRSA",
	FormatIDOf("net.jini.discovery.ssl"):              "net.jini.discovery.ssl",
	FormatIDOf("net.jini.discovery.kerberos"):         "net.jini.discovery.kerberos",
}

// String returns the id in hex, followed by the format's name when it is
// one of the Jini standard formats or ours: "0x760f15cb7490ce36
// (net.jini.discovery.plaintext)".
func (f FormatID) String() string {
	if name, ok := knownFormats[f]; ok {
		return fmt.Sprintf("0x%016x (%s)", uint64(f), name)
	}
	return fmt.Sprintf("0x%016x", uint64(f))
}
