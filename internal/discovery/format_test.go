package discovery

import "testing"

// The spec (DJ.3.1-DJ.3.3) prints the ids of three standard formats as
// Java longs; FormatIDOf must agree with it, and the constants with
// FormatIDOf.
func TestFormatIDs(t *testing.T) {
	for _, tc := range []struct {
		name string
		want int64
	}{
		{"net.jini.discovery.plaintext", 8507042184704347702},         // DJ.3.1
		{"net.jini.discovery.x500.SHA1withDSA", -4239414871821148892}, // DJ.3.2
		{"net.jini.discovery.x500.SHA1withRSA", -248696397102000882},  // DJ.3.3
	} {
		if got := int64(FormatIDOf(tc.name)); got != tc.want {
			t.Errorf("FormatIDOf(%q) = %d, want %d", tc.name, got, tc.want)
		}
	}
	if got := FormatIDOf(PlaintextFormatName); got != PlaintextFormat {
		t.Errorf("FormatIDOf(%q) = %v, constant says %v", PlaintextFormatName, got, PlaintextFormat)
	}
	if got := FormatIDOf(GRPCFormatName); got != GRPCFormat {
		t.Errorf("FormatIDOf(%q) = %v, constant says %v", GRPCFormatName, got, GRPCFormat)
	}
	for id, name := range knownFormats {
		if id != NullFormat && FormatIDOf(name) != id {
			t.Errorf("knownFormats[%v] = %q, whose id is %v", id, name, FormatIDOf(name))
		}
	}
}

func TestFormatIDString(t *testing.T) {
	for _, tc := range []struct {
		id   FormatID
		want string
	}{
		{PlaintextFormat, "0x760f15cb7490ce36 (net.jini.discovery.plaintext)"},
		{GRPCFormat, "0xf756aac76c808bed (com.github.djinn-go.djinn.grpc.v1)"},
		{NullFormat, "0x0000000000000000 (null)"},
		{42, "0x000000000000002a"},
	} {
		if got := tc.id.String(); got != tc.want {
			t.Errorf("String() = %q, want %q", got, tc.want)
		}
	}
}
