package discovery

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/djinn-go/djinn"
)

// unhex turns hex written with spaces, newlines and // comments into bytes.
func unhex(t testing.TB, s string) []byte {
	t.Helper()
	var clean strings.Builder
	for line := range strings.Lines(s) {
		line, _, _ = strings.Cut(line, "//")
		clean.WriteString(strings.Join(strings.Fields(line), ""))
	}
	b, err := hex.DecodeString(clean.String())
	if err != nil {
		t.Fatalf("bad hex in test: %v", err)
	}
	return b
}

// testID returns a distinct non-zero id for each n.
func testID(n int) djinn.ID {
	var id djinn.ID
	binary.BigEndian.PutUint64(id[:8], 0xd1d1d1d1_00000000|uint64(n))
	binary.BigEndian.PutUint64(id[8:], uint64(n)+1)
	return id
}

// Packet builders for hand-made packets.
func u16(n int) []byte    { return binary.BigEndian.AppendUint16(nil, uint16(n)) }
func u32(n uint32) []byte { return binary.BigEndian.AppendUint32(nil, n) }
func u64(n uint64) []byte { return binary.BigEndian.AppendUint64(nil, n) }
func str(s string) []byte { return append(u16(len(s)), s...) }
func cat(parts ...[]byte) []byte {
	return slices.Concat(parts...)
}

func header(version uint32, packetType byte, f FormatID) []byte {
	return cat(u32(version), []byte{packetType}, u64(uint64(f)))
}

func sameRequest(a, b MulticastRequest) bool {
	return a.Host == b.Host && a.Port == b.Port && slices.Equal(a.Groups, b.Groups) && slices.Equal(a.Heard, b.Heard)
}

func sameAnnouncement(a, b MulticastAnnouncement) bool {
	return a.Seq == b.Seq && a.Host == b.Host && a.Port == b.Port && a.ServiceID == b.ServiceID && slices.Equal(a.Groups, b.Groups)
}

// The golden request, derived field by field from DJ.2.4.5 and DJ.3.1.1.
func TestMulticastRequestGolden(t *testing.T) {
	var id djinn.ID
	for i := range id {
		id[i] = byte(i)
	}
	req := MulticastRequest{Host: "10.0.0.1", Port: 4160, Groups: []string{"", "blue"}, Heard: []djinn.ID{id}}
	want := unhex(t, `
		00000002                          // i32 protocol version 2
		01                                // u8 packet type 1: request
		760f15cb7490ce36                  // i64 format id of net.jini.discovery.plaintext
		0008 31302e302e302e31             // str host "10.0.0.1"
		1040                              // u16 port 4160
		0002                              // u16 group count 2
		0000                              // str "" (the public group)
		0004 626c7565                     // str "blue"
		0001                              // u16 heard id count 1
		000102030405060708090a0b0c0d0e0f  // id: most significant half first
	`)
	got, err := EncodeMulticastRequest(req)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || !bytes.Equal(got[0], want) {
		t.Fatalf("EncodeMulticastRequest =\n%x\nwant\n%x", got, want)
	}
	back, err := DecodeMulticastRequest(want)
	if err != nil || !sameRequest(back, req) {
		t.Fatalf("DecodeMulticastRequest = %+v, %v; want %+v", back, err, req)
	}
}

// The golden announcement, derived field by field from DJ.2.5.3 and
// DJ.3.1.2.
func TestMulticastAnnouncementGolden(t *testing.T) {
	var id djinn.ID
	for i := range id {
		id[i] = 0xf0 | byte(i)
	}
	a := MulticastAnnouncement{Seq: 7, Host: "lus.example", Port: 4160, ServiceID: id, Groups: []string{"blue"}}
	want := unhex(t, `
		00000002                          // i32 protocol version 2
		00                                // u8 packet type 0: announcement
		760f15cb7490ce36                  // i64 format id of net.jini.discovery.plaintext
		0000000000000007                  // i64 sequence number 7
		000b 6c75732e6578616d706c65       // str host "lus.example"
		1040                              // u16 port 4160
		0001                              // u16 group count 1
		0004 626c7565                     // str "blue"
		f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff  // id of the lookup service
	`)
	got, err := EncodeMulticastAnnouncement(a)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || !bytes.Equal(got[0], want) {
		t.Fatalf("EncodeMulticastAnnouncement =\n%x\nwant\n%x", got, want)
	}
	back, err := DecodeMulticastAnnouncement(want)
	if err != nil || !sameAnnouncement(back, a) {
		t.Fatalf("DecodeMulticastAnnouncement = %+v, %v; want %+v", back, err, a)
	}
}

func TestMulticastRequestRoundTrip(t *testing.T) {
	for _, req := range []MulticastRequest{
		{Host: "h", Port: 1},
		{Host: "client.example", Port: 65535, Groups: []string{""}},
		{Host: "::1", Port: 4160, Groups: []string{"a", "b", "c"}, Heard: []djinn.ID{testID(1), testID(2)}},
		{Host: "fe80::1%eth0", Port: 4160, Heard: []djinn.ID{testID(1)}},
		{Host: "h", Port: 9, Groups: []string{"grüße", "日本", "\u00a0x\uffff"}},
		{Host: strings.Repeat("h", MaxHostLen), Port: 9, Groups: []string{"g"}},
	} {
		packets, err := EncodeMulticastRequest(req)
		if err != nil {
			t.Errorf("EncodeMulticastRequest(%+v): %v", req, err)
			continue
		}
		if len(packets) != 1 {
			t.Errorf("EncodeMulticastRequest(%+v): %d packets, want 1", req, len(packets))
		}
		got, err := DecodeMulticastRequest(packets[0])
		if err != nil || !sameRequest(got, req) {
			t.Errorf("round trip of %+v = %+v, %v", req, got, err)
		}
	}
}

func TestMulticastAnnouncementRoundTrip(t *testing.T) {
	for _, a := range []MulticastAnnouncement{
		{Seq: 0, Host: "h", Port: 1, ServiceID: testID(1)},
		{Seq: -1, Host: "lus.example", Port: 65535, ServiceID: testID(2), Groups: []string{""}},
		{Seq: 1<<63 - 1, Host: "10.1.2.3", Port: 4160, ServiceID: testID(3), Groups: []string{"a", "grüße", ""}},
	} {
		packets, err := EncodeMulticastAnnouncement(a)
		if err != nil {
			t.Errorf("EncodeMulticastAnnouncement(%+v): %v", a, err)
			continue
		}
		if len(packets) != 1 {
			t.Errorf("EncodeMulticastAnnouncement(%+v): %d packets, want 1", a, len(packets))
		}
		got, err := DecodeMulticastAnnouncement(packets[0])
		if err != nil || !sameAnnouncement(got, a) {
			t.Errorf("round trip of %+v = %+v, %v", a, got, err)
		}
	}
}

// checkRequestSplit checks the packets of req against DJ.2.4.6: each at
// most 512 bytes, the same host and port in each, the groups of the packets
// in order exactly req.Groups, each packet's heard ids the longest prefix of
// req.Heard that fits, and no packet that could have held its next group
// with all heard ids.
func checkRequestSplit(t *testing.T, req MulticastRequest, packets [][]byte) {
	t.Helper()
	var groups []string
	for i, p := range packets {
		if len(p) > MaxPacketSize {
			t.Fatalf("packet %d: %d bytes, more than %d", i, len(p), MaxPacketSize)
		}
		got, err := DecodeMulticastRequest(p)
		if err != nil {
			t.Fatalf("packet %d: %v", i, err)
		}
		if got.Host != req.Host || got.Port != req.Port {
			t.Fatalf("packet %d: host %q port %d, want %q %d", i, got.Host, got.Port, req.Host, req.Port)
		}
		if len(req.Groups) > 0 && len(got.Groups) == 0 {
			t.Fatalf("packet %d: no groups", i)
		}
		groups = append(groups, got.Groups...)
		if !slices.Equal(got.Heard, req.Heard[:len(got.Heard)]) {
			t.Fatalf("packet %d: heard ids are not a prefix of the request's", i)
		}
		if len(got.Heard) < len(req.Heard) && len(p)+idLen <= MaxPacketSize {
			t.Fatalf("packet %d: %d bytes with %d of %d heard ids: another would fit", i, len(p), len(got.Heard), len(req.Heard))
		}
		next := len(groups)
		if next < len(req.Groups) && len(got.Heard) == len(req.Heard) && len(p)+2+len(req.Groups[next]) <= MaxPacketSize {
			t.Fatalf("packet %d: %d bytes: group %q would have fit too", i, len(p), req.Groups[next])
		}
	}
	if !slices.Equal(groups, req.Groups) {
		t.Fatalf("groups of the packets %q, want %q", groups, req.Groups)
	}
}

func TestMulticastRequestSplit(t *testing.T) {
	many := func(n int, format string) []string {
		g := make([]string, n)
		for i := range g {
			g[i] = fmt.Sprintf(format, i)
		}
		return g
	}
	ids := func(n int) []djinn.ID {
		out := make([]djinn.ID, n)
		for i := range out {
			out[i] = testID(i)
		}
		return out
	}
	// fixed is the packet's size without groups and heard ids, for host "h":
	// header 13, host 2+1, port 2, group count 2, id count 2.
	const fixed = 13 + 3 + 2 + 2 + 2
	maxGroup := strings.Repeat("g", MaxPacketSize-fixed-2)
	for _, tc := range []struct {
		name    string
		req     MulticastRequest
		packets int
	}{
		{"many groups", MulticastRequest{Host: "h", Port: 1, Groups: many(300, "group-%03d")}, 7},
		{"many groups and a few heard ids", MulticastRequest{Host: "h", Port: 1, Groups: many(300, "group-%03d"), Heard: ids(5)}, 9},
		{"long group names", MulticastRequest{Host: "h", Port: 1, Groups: many(5, strings.Repeat("x", 300)+"%d")}, 5},
		{"a group of the largest size", MulticastRequest{Host: "h", Port: 1, Groups: []string{maxGroup, "a", maxGroup}}, 3},
		{"many heard ids, no groups", MulticastRequest{Host: "h", Port: 1, Heard: ids(100)}, 1},
		{"many heard ids and groups", MulticastRequest{Host: "h", Port: 1, Groups: many(4, "g%d"), Heard: ids(100)}, 4},
		// Two groups of 2+2 bytes leave room for 30 ids exactly.
		{"heard ids that just fit", MulticastRequest{Host: "h", Port: 1, Groups: []string{"ab", "cd"}, Heard: ids((MaxPacketSize - fixed - 8) / idLen)}, 1},
		{"one heard id too many", MulticastRequest{Host: "h", Port: 1, Groups: []string{"ab", "cd"}, Heard: ids((MaxPacketSize-fixed-8)/idLen + 1)}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			packets, err := EncodeMulticastRequest(tc.req)
			if err != nil {
				t.Fatal(err)
			}
			if len(packets) != tc.packets {
				t.Errorf("%d packets, want %d", len(packets), tc.packets)
			}
			checkRequestSplit(t, tc.req, packets)
		})
	}
	// A group that fills a packet to the byte, and one byte more.
	packets, err := EncodeMulticastRequest(MulticastRequest{Host: "h", Port: 1, Groups: []string{maxGroup}})
	if err != nil || len(packets) != 1 || len(packets[0]) != MaxPacketSize {
		t.Errorf("a group of %d bytes: %d packets, %v; want one of %d bytes", len(maxGroup), len(packets), err, MaxPacketSize)
	}
	_, err = EncodeMulticastRequest(MulticastRequest{Host: "h", Port: 1, Groups: []string{maxGroup + "g"}})
	if !errors.Is(err, djinn.ErrInvalidArgument) || !strings.Contains(err.Error(), "too long for a 512-byte packet") {
		t.Errorf("a group of %d bytes: %v, want a too-long error", len(maxGroup)+1, err)
	}
}

// checkAnnouncementSplit checks the packets of a against DJ.2.5.4.
func checkAnnouncementSplit(t *testing.T, a MulticastAnnouncement, packets [][]byte) {
	t.Helper()
	var groups []string
	for i, p := range packets {
		if len(p) > MaxPacketSize {
			t.Fatalf("packet %d: %d bytes, more than %d", i, len(p), MaxPacketSize)
		}
		got, err := DecodeMulticastAnnouncement(p)
		if err != nil {
			t.Fatalf("packet %d: %v", i, err)
		}
		if got.Seq != a.Seq || got.Host != a.Host || got.Port != a.Port || got.ServiceID != a.ServiceID {
			t.Fatalf("packet %d: %+v does not repeat %+v", i, got, a)
		}
		if len(a.Groups) > 0 && len(got.Groups) == 0 {
			t.Fatalf("packet %d: no groups", i)
		}
		groups = append(groups, got.Groups...)
		if next := len(groups); next < len(a.Groups) && len(p)+2+len(a.Groups[next]) <= MaxPacketSize {
			t.Fatalf("packet %d: %d bytes: group %q would have fit too", i, len(p), a.Groups[next])
		}
	}
	if !slices.Equal(groups, a.Groups) {
		t.Fatalf("groups of the packets %q, want %q", groups, a.Groups)
	}
}

func TestMulticastAnnouncementSplit(t *testing.T) {
	many := func(n int, format string) []string {
		g := make([]string, n)
		for i := range g {
			g[i] = fmt.Sprintf(format, i)
		}
		return g
	}
	// fixed for host "h": header 13, sequence number 8, host 2+1, port 2,
	// group count 2, service id 16.
	const fixed = 13 + 8 + 3 + 2 + 2 + 16
	maxGroup := strings.Repeat("g", MaxPacketSize-fixed-2)
	for _, tc := range []struct {
		name    string
		groups  []string
		packets int
	}{
		{"no groups", nil, 1},
		{"many groups", many(300, "group-%03d"), 8}, // 42 groups of 2+9 bytes a packet
		{"long group names", many(5, strings.Repeat("x", 300)+"%d"), 5},
		{"groups of the largest size", []string{maxGroup, "", maxGroup}, 3},
		{"many empty groups", make([]string, 500), 3}, // 234 a packet
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := MulticastAnnouncement{Seq: 42, Host: "h", Port: 4160, ServiceID: testID(7), Groups: tc.groups}
			packets, err := EncodeMulticastAnnouncement(a)
			if err != nil {
				t.Fatal(err)
			}
			if len(packets) != tc.packets {
				t.Errorf("%d packets, want %d", len(packets), tc.packets)
			}
			checkAnnouncementSplit(t, a, packets)
		})
	}
	a := MulticastAnnouncement{Seq: 1, Host: "h", Port: 1, ServiceID: testID(1), Groups: []string{maxGroup}}
	packets, err := EncodeMulticastAnnouncement(a)
	if err != nil || len(packets) != 1 || len(packets[0]) != MaxPacketSize {
		t.Errorf("a group of %d bytes: %d packets, %v; want one of %d bytes", len(maxGroup), len(packets), err, MaxPacketSize)
	}
	a.Groups = []string{"ok", maxGroup + "g"}
	_, err = EncodeMulticastAnnouncement(a)
	if !errors.Is(err, djinn.ErrInvalidArgument) || !strings.Contains(err.Error(), "too long for a 512-byte packet") {
		t.Errorf("a group of %d bytes: %v, want a too-long error", len(maxGroup)+1, err)
	}
}

func TestEncodeMulticastRequestRejects(t *testing.T) {
	ok := MulticastRequest{Host: "h", Port: 4160, Groups: []string{"g"}}
	for _, tc := range []struct {
		name   string
		change func(*MulticastRequest)
		msg    string
	}{
		{"DJ.2.4.3 host must be present", func(r *MulticastRequest) { r.Host = "" }, "host: empty"},
		{"host of at most 255 bytes", func(r *MulticastRequest) { r.Host = strings.Repeat("h", 256) }, "256 bytes, longer than 255"},
		{"host must be valid utf-8", func(r *MulticastRequest) { r.Host = "h\xff" }, "invalid utf-8 at byte 1"},
		{"DJ.3.1.1 port is an unsigned short", func(r *MulticastRequest) { r.Port = 65536 }, "port 65536"},
		{"port 0 cannot be connected to", func(r *MulticastRequest) { r.Port = 0 }, "port 0"},
		{"negative port", func(r *MulticastRequest) { r.Port = -5 }, "port -5"},
		{"group must be valid utf-8", func(r *MulticastRequest) { r.Groups = []string{"a", "\xc0\x80"} }, `group 1 "\xc0\x80": invalid utf-8 at byte 0`},
		{"group without nul", func(r *MulticastRequest) { r.Groups = []string{"a\x00"} }, "nul character at byte 1"},
		{"group within the basic multilingual plane", func(r *MulticastRequest) { r.Groups = []string{"x😀"} }, "U+1F600 at byte 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := ok
			tc.change(&req)
			packets, err := EncodeMulticastRequest(req)
			if err == nil {
				t.Fatalf("EncodeMulticastRequest(%+v) = %x, want an error", req, packets)
			}
			if !errors.Is(err, djinn.ErrInvalidArgument) || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error %q (kind %v) does not say %q", err, djinn.KindOf(err), tc.msg)
			}
		})
	}
}

func TestEncodeMulticastAnnouncementRejects(t *testing.T) {
	ok := MulticastAnnouncement{Host: "h", Port: 4160, ServiceID: testID(1), Groups: []string{"g"}}
	for _, tc := range []struct {
		name   string
		change func(*MulticastAnnouncement)
		msg    string
	}{
		{"DJ.2.5.1 host must be present", func(a *MulticastAnnouncement) { a.Host = "" }, "host: empty"},
		{"host of at most 255 bytes", func(a *MulticastAnnouncement) { a.Host = strings.Repeat("h", 300) }, "300 bytes"},
		{"DJ.3.1.2 port is an unsigned short", func(a *MulticastAnnouncement) { a.Port = 70000 }, "port 70000"},
		{"port 0 cannot be connected to", func(a *MulticastAnnouncement) { a.Port = 0 }, "port 0"},
		{"DJ.2.5.1 service id must be present", func(a *MulticastAnnouncement) { a.ServiceID = djinn.ID{} }, "service id: missing"},
		{"group must be valid utf-8", func(a *MulticastAnnouncement) { a.Groups = []string{"\xed\xa0\x80"} }, "invalid utf-8"},
		{"group within the basic multilingual plane", func(a *MulticastAnnouncement) { a.Groups = []string{"😀"} }, "U+1F600"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := ok
			tc.change(&a)
			packets, err := EncodeMulticastAnnouncement(a)
			if err == nil {
				t.Fatalf("EncodeMulticastAnnouncement(%+v) = %x, want an error", a, packets)
			}
			if !errors.Is(err, djinn.ErrInvalidArgument) || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error %q (kind %v) does not say %q", err, djinn.KindOf(err), tc.msg)
			}
		})
	}
}

// requestHeader is a valid request header.
var requestHeader = header(2, packetRequest, PlaintextFormat)

func TestDecodeMulticastRequestRejects(t *testing.T) {
	for _, tc := range []struct {
		name     string
		packet   []byte
		sentinel error
		kind     djinn.Kind
		msg      string
	}{
		{"empty packet", nil, ErrMalformed, djinn.InvalidArgument, "truncated: protocol version needs 4 bytes at offset 0, 0 left"},
		{"DJ.2.4.5 header truncated", requestHeader[:12], ErrMalformed, djinn.InvalidArgument, "format id needs 8 bytes at offset 5"},
		{"DJ.2.4.4 version 1 packet", cat(u32(1), u32(4160), u32(0), u32(0)), ErrVersion, djinn.Unsupported, "protocol version 1: only version 2"},
		{"DJ.2.4.3 version 3", cat(header(3, 1, PlaintextFormat), str("h"), u16(1), u16(0), u16(0)), ErrVersion, djinn.Unsupported, "protocol version 3"},
		{"DJ.2.4.3 announcement type", cat(header(2, 0, PlaintextFormat), str("h"), u16(1), u16(0), u16(0)), ErrMalformed, djinn.InvalidArgument, "packet type 0 (an announcement), want 1 (a request)"},
		{"DJ.2.4.3 unknown type", cat(header(2, 9, PlaintextFormat), str("h"), u16(1), u16(0), u16(0)), ErrMalformed, djinn.InvalidArgument, "packet type 9 (unknown)"},
		{"DJ.3.2 signed format", cat(header(2, 1, FormatIDOf("net.jini.discovery.x500.SHA1withDSA")), str("h")), ErrFormat, djinn.Unsupported, "format 0xc52a92a2ad979d24 (net.jini.discovery.x500.SHA1withDSA)"},
		{"DJ.2.2.2 null format", header(2, 1, NullFormat), ErrFormat, djinn.Unsupported, "format 0x0000000000000000 (null)"},
		{"host length truncated", cat(requestHeader, []byte{0}), ErrMalformed, djinn.InvalidArgument, "host length needs 2 bytes at offset 13"},
		{"host longer than the packet", cat(requestHeader, u16(100), []byte("abc")), ErrMalformed, djinn.InvalidArgument, "host needs 100 bytes at offset 15, 3 left"},
		{"DJ.2.4.3 empty host", cat(requestHeader, str(""), u16(1), u16(0), u16(0)), ErrMalformed, djinn.InvalidArgument, "host: empty"},
		{"host over 255 bytes", cat(requestHeader, str(strings.Repeat("h", 256)), u16(1), u16(0), u16(0)), ErrMalformed, djinn.InvalidArgument, "host: 256 bytes"},
		{"host not utf-8", cat(requestHeader, str("h\xfe"), u16(1), u16(0), u16(0)), ErrMalformed, djinn.InvalidArgument, `host "h\xfe": invalid utf-8 at byte 1`},
		{"port truncated", cat(requestHeader, str("h"), []byte{1}), ErrMalformed, djinn.InvalidArgument, "port needs 2 bytes"},
		{"port 0", cat(requestHeader, str("h"), u16(0), u16(0), u16(0)), ErrMalformed, djinn.InvalidArgument, "port: 0: must be 1 to 65535"},
		{"group count beyond the packet", cat(requestHeader, str("h"), u16(1), u16(65535), str("g")), ErrMalformed, djinn.InvalidArgument, "group count 65535: the 3 bytes left hold at most 1"},
		{"group truncated", cat(requestHeader, str("h"), u16(1), u16(1), u16(5), []byte("ab")), ErrMalformed, djinn.InvalidArgument, "group needs 5 bytes"},
		{"group not utf-8", cat(requestHeader, str("h"), u16(1), u16(1), str("a\x80"), u16(0)), ErrMalformed, djinn.InvalidArgument, `group "a\x80": invalid utf-8 at byte 1`},
		{"modified utf-8 nul", cat(requestHeader, str("h"), u16(1), u16(1), str("a\xc0\x80"), u16(0)), ErrMalformed, djinn.InvalidArgument, "invalid utf-8 at byte 1"},
		{"raw nul", cat(requestHeader, str("h"), u16(1), u16(1), str("a\x00"), u16(0)), ErrMalformed, djinn.InvalidArgument, "nul character at byte 1"},
		{"modified utf-8 surrogate pair", cat(requestHeader, str("h"), u16(1), u16(1), str("\xed\xa0\xbd\xed\xb8\x80"), u16(0)), ErrMalformed, djinn.InvalidArgument, "invalid utf-8 at byte 0"},
		{"four-byte utf-8", cat(requestHeader, str("h"), u16(1), u16(1), str("\xf0\x9f\x98\x80"), u16(0)), ErrMalformed, djinn.InvalidArgument, "U+1F600 at byte 0"},
		{"overlong utf-8", cat(requestHeader, str("h"), u16(1), u16(1), str("\xc1\x81"), u16(0)), ErrMalformed, djinn.InvalidArgument, "invalid utf-8"},
		{"heard count missing", cat(requestHeader, str("h"), u16(1), u16(0)), ErrMalformed, djinn.InvalidArgument, "heard id count needs 2 bytes"},
		{"heard count beyond the packet", cat(requestHeader, str("h"), u16(1), u16(0), u16(2), make([]byte, 20)), ErrMalformed, djinn.InvalidArgument, "heard id count 2: the 20 bytes left hold at most 1"},
		{"heard count claims all", cat(requestHeader, str("h"), u16(1), u16(0), u16(65535)), ErrMalformed, djinn.InvalidArgument, "heard id count 65535: the 0 bytes left hold at most 0"},
		{"trailing byte", cat(requestHeader, str("h"), u16(1), u16(0), u16(0), []byte{0}), ErrMalformed, djinn.InvalidArgument, "1 trailing bytes after offset 22"},
		{"trailing bytes after ids", cat(requestHeader, str("h"), u16(1), u16(0), u16(1), make([]byte, 16), []byte("sig")), ErrMalformed, djinn.InvalidArgument, "3 trailing bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := DecodeMulticastRequest(tc.packet)
			if err == nil {
				t.Fatalf("DecodeMulticastRequest(%x) = %+v, want an error", tc.packet, req)
			}
			if !errors.Is(err, tc.sentinel) || djinn.KindOf(err) != tc.kind {
				t.Errorf("error %q matches %v of kind %v, want %v of kind %v", err, tc.sentinel, djinn.KindOf(err), tc.sentinel, tc.kind)
			}
			if !strings.HasPrefix(err.Error(), "multicast request: ") || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error %q does not say %q", err, tc.msg)
			}
		})
	}
}

var announcementHeader = header(2, packetAnnouncement, PlaintextFormat)

func TestDecodeMulticastAnnouncementRejects(t *testing.T) {
	id := testID(1)
	for _, tc := range []struct {
		name     string
		packet   []byte
		sentinel error
		kind     djinn.Kind
		msg      string
	}{
		{"empty packet", []byte{}, ErrMalformed, djinn.InvalidArgument, "truncated: protocol version"},
		{"DJ.2.5.3 header truncated", announcementHeader[:5], ErrMalformed, djinn.InvalidArgument, "format id needs 8 bytes"},
		{"DJ.2.5.2 version 1 packet", cat(u32(1), str("h"), u32(4160), id[:], u32(0)), ErrVersion, djinn.Unsupported, "protocol version 1"},
		{"DJ.2.5.1 request type", cat(header(2, 1, PlaintextFormat), u64(1), str("h"), u16(1), u16(0), id[:]), ErrMalformed, djinn.InvalidArgument, "packet type 1 (a request), want 0 (an announcement)"},
		{"DJ.3.3 signed format", cat(header(2, 0, FormatIDOf("net.jini.discovery.x500.SHA1withRSA")), u64(1)), ErrFormat, djinn.Unsupported, "net.jini.discovery.x500.SHA1withRSA"},
		{"sequence number truncated", cat(announcementHeader, u32(0)), ErrMalformed, djinn.InvalidArgument, "sequence number needs 8 bytes"},
		{"DJ.2.5.1 empty host", cat(announcementHeader, u64(1), str(""), u16(1), u16(0), id[:]), ErrMalformed, djinn.InvalidArgument, "host: empty"},
		{"port 0", cat(announcementHeader, u64(1), str("h"), u16(0), u16(0), id[:]), ErrMalformed, djinn.InvalidArgument, "port: 0"},
		{"group count beyond the packet", cat(announcementHeader, u64(1), str("h"), u16(1), u16(20), id[:]), ErrMalformed, djinn.InvalidArgument, "group count 20: the 16 bytes left hold at most 8"},
		{"group not utf-8", cat(announcementHeader, u64(1), str("h"), u16(1), u16(1), str("\xff"), id[:]), ErrMalformed, djinn.InvalidArgument, `group "\xff"`},
		{"service id missing", cat(announcementHeader, u64(1), str("h"), u16(1), u16(0)), ErrMalformed, djinn.InvalidArgument, "service id needs 16 bytes at offset 28, 0 left"},
		{"service id truncated", cat(announcementHeader, u64(1), str("h"), u16(1), u16(0), id[:15]), ErrMalformed, djinn.InvalidArgument, "service id needs 16 bytes"},
		{"DJ.2.5.1 zero service id", cat(announcementHeader, u64(1), str("h"), u16(1), u16(0), make([]byte, 16)), ErrMalformed, djinn.InvalidArgument, "service id: missing (all zeros)"},
		{"trailing bytes", cat(announcementHeader, u64(1), str("h"), u16(1), u16(0), id[:], []byte{1, 2}), ErrMalformed, djinn.InvalidArgument, "2 trailing bytes after offset 44"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := DecodeMulticastAnnouncement(tc.packet)
			if err == nil {
				t.Fatalf("DecodeMulticastAnnouncement(%x) = %+v, want an error", tc.packet, a)
			}
			if !errors.Is(err, tc.sentinel) || djinn.KindOf(err) != tc.kind {
				t.Errorf("error %q matches %v of kind %v, want %v of kind %v", err, tc.sentinel, djinn.KindOf(err), tc.sentinel, tc.kind)
			}
			if !strings.HasPrefix(err.Error(), "multicast announcement: ") || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error %q does not say %q", err, tc.msg)
			}
		})
	}
}

// A peer configured for bigger packets may send them; they decode.
func TestDecodeLargePacket(t *testing.T) {
	big := strings.Repeat("g", 1000)
	id := testID(1)
	p := cat(announcementHeader, u64(3), str("h"), u16(1), u16(1), str(big), id[:])
	a, err := DecodeMulticastAnnouncement(p)
	if err != nil || len(a.Groups) != 1 || a.Groups[0] != big {
		t.Fatalf("DecodeMulticastAnnouncement of a %d-byte packet = %+v, %v", len(p), a, err)
	}
}
