package discovery

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/djinn-go/djinn"
)

// checkDecodeError checks an error from a decoder or reader: it matches one
// of the package's sentinels and carries the djinn kind that goes with it.
func checkDecodeError(t *testing.T, err error) {
	t.Helper()
	kinds := map[error]djinn.Kind{
		ErrMalformed: djinn.InvalidArgument,
		ErrVersion:   djinn.Unsupported,
		ErrFormat:    djinn.Unsupported,
		ErrNoFormat:  djinn.Unsupported,
		ErrTooLarge:  djinn.ResourceExhausted,
	}
	for sentinel, kind := range kinds {
		if errors.Is(err, sentinel) {
			if got := djinn.KindOf(err); got != kind {
				t.Fatalf("error %q matches %v but is of kind %v, want %v", err, sentinel, got, kind)
			}
			return
		}
	}
	t.Fatalf("error %q (kind %v) matches none of the package's sentinels", err, djinn.KindOf(err))
}

func mustEncodeRequest(f *testing.F, req MulticastRequest) [][]byte {
	packets, err := EncodeMulticastRequest(req)
	if err != nil {
		f.Fatal(err)
	}
	return packets
}

func FuzzDecodeMulticastRequest(f *testing.F) {
	seeds := [][]byte{
		nil,
		requestHeader,
		cat(requestHeader, str("h"), u16(1), u16(0), u16(0)),
		cat(requestHeader, str("h"), u16(1), u16(1), str("a\xc0\x80"), u16(0)),
		cat(requestHeader, str("h"), u16(1), u16(0), u16(65535)),
		cat(header(1, 1, PlaintextFormat), str("h")),
		cat(header(2, 0, PlaintextFormat), str("h")),
		cat(header(2, 1, GRPCFormat), str("h")),
		cat(requestHeader, str("h"), u16(1), u16(1), str(strings.Repeat("g", 600)), u16(1), make([]byte, 16)),
	}
	seeds = append(seeds, mustEncodeRequest(f, MulticastRequest{Host: "10.0.0.1", Port: 4160, Groups: []string{"", "blue"}, Heard: []djinn.ID{testID(1)}})...)
	seeds = append(seeds, mustEncodeRequest(f, MulticastRequest{Host: "h", Port: 1, Groups: []string{"a", "b", strings.Repeat("c", 480)}, Heard: []djinn.ID{testID(1), testID(2)}})...)
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		req, err := DecodeMulticastRequest(b)
		if err != nil {
			checkDecodeError(t, err)
			return
		}
		packets, err := EncodeMulticastRequest(req)
		if len(b) <= MaxPacketSize {
			// A packet that fits is exactly what the encoder makes of it.
			if err != nil || len(packets) != 1 || !bytes.Equal(packets[0], b) {
				t.Fatalf("re-encoding %+v = %x, %v; want %x", req, packets, err, b)
			}
			return
		}
		// A bigger packet (from a peer with a bigger limit) is split.
		if err != nil {
			if !errors.Is(err, djinn.ErrInvalidArgument) || !strings.Contains(err.Error(), "too long") {
				t.Fatalf("re-encoding %+v: %v", req, err)
			}
			return
		}
		checkRequestSplit(t, req, packets)
	})
}

func FuzzDecodeMulticastAnnouncement(f *testing.F) {
	id := testID(1)
	seeds := [][]byte{
		nil,
		announcementHeader,
		cat(announcementHeader, u64(1), str("h"), u16(1), u16(0), id[:]),
		cat(announcementHeader, u64(1), str("h"), u16(1), u16(0), make([]byte, 16)),
		cat(announcementHeader, u64(1), str("h"), u16(1), u16(2), str(""), str("\xf0\x9f\x98\x80"), id[:]),
		cat(announcementHeader, u64(1), str("h"), u16(1), u16(1), str(strings.Repeat("g", 600)), id[:]),
		cat(header(2, 0, FormatIDOf("net.jini.discovery.x500.SHA1withDSA")), u64(1)),
	}
	for _, a := range []MulticastAnnouncement{
		{Seq: 7, Host: "lus.example", Port: 4160, ServiceID: id, Groups: []string{"blue"}},
		{Seq: -1, Host: "h", Port: 1, ServiceID: id, Groups: []string{strings.Repeat("a", 300), strings.Repeat("b", 300), ""}},
	} {
		packets, err := EncodeMulticastAnnouncement(a)
		if err != nil {
			f.Fatal(err)
		}
		seeds = append(seeds, packets...)
	}
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := DecodeMulticastAnnouncement(b)
		if err != nil {
			checkDecodeError(t, err)
			return
		}
		packets, err := EncodeMulticastAnnouncement(a)
		if len(b) <= MaxPacketSize {
			if err != nil || len(packets) != 1 || !bytes.Equal(packets[0], b) {
				t.Fatalf("re-encoding %+v = %x, %v; want %x", a, packets, err, b)
			}
			return
		}
		if err != nil {
			if !errors.Is(err, djinn.ErrInvalidArgument) || !strings.Contains(err.Error(), "too long") {
				t.Fatalf("re-encoding %+v: %v", a, err)
			}
			return
		}
		checkAnnouncementSplit(t, a, packets)
	})
}

// fuzzGroups splits s into groups at each NUL (which no group may hold).
func fuzzGroups(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, "\x00")
}

func FuzzEncodeMulticastRequest(f *testing.F) {
	f.Add("h", 4160, "a\x00b", uint8(3))
	f.Add("10.0.0.1", 1, strings.Repeat("group\x00", 200), uint8(0))
	f.Add("h", 65535, strings.Repeat("g", 300)+"\x00"+strings.Repeat("x", 200), uint8(40))
	f.Add("", 0, "\xff", uint8(1))
	f.Fuzz(func(t *testing.T, host string, port int, groups string, heard uint8) {
		req := MulticastRequest{Host: host, Port: port, Groups: fuzzGroups(groups)}
		for i := range int(heard) {
			req.Heard = append(req.Heard, testID(i))
		}
		packets, err := EncodeMulticastRequest(req)
		if err != nil {
			if !errors.Is(err, djinn.ErrInvalidArgument) {
				t.Fatalf("EncodeMulticastRequest: %v is of kind %v", err, djinn.KindOf(err))
			}
			return
		}
		checkRequestSplit(t, req, packets)
	})
}

func FuzzEncodeMulticastAnnouncement(f *testing.F) {
	f.Add(int64(1), "h", 4160, "a\x00b")
	f.Add(int64(-5), "lus", 1, strings.Repeat("group\x00", 200))
	f.Add(int64(0), "h", 65535, strings.Repeat("g", 466)+"\x00x")
	f.Add(int64(0), "", 0, "\xed\xa0\x80")
	f.Fuzz(func(t *testing.T, seq int64, host string, port int, groups string) {
		a := MulticastAnnouncement{Seq: seq, Host: host, Port: port, ServiceID: testID(9), Groups: fuzzGroups(groups)}
		packets, err := EncodeMulticastAnnouncement(a)
		if err != nil {
			if !errors.Is(err, djinn.ErrInvalidArgument) {
				t.Fatalf("EncodeMulticastAnnouncement: %v is of kind %v", err, djinn.KindOf(err))
			}
			return
		}
		checkAnnouncementSplit(t, a, packets)
	})
}

func FuzzReadUnicastRequest(f *testing.F) {
	f.Add([]byte{})
	f.Add(u32(1))
	f.Add(cat(u32(2), u16(0)))
	f.Add(cat(u32(2), u16(1), u64(uint64(GRPCFormat))))
	f.Add(cat(u32(2), u16(2), u64(uint64(PlaintextFormat)), u64(uint64(sslFormat)), []byte("trailing")))
	f.Add(cat(u32(2), u16(1), u64(0)))
	f.Add(cat(u32(2), u16(65535)))
	f.Fuzz(func(t *testing.T, b []byte) {
		r := bytes.NewReader(b)
		formats, err := ReadUnicastRequest(r, 0)
		if err != nil {
			checkDecodeError(t, err)
			return
		}
		consumed := b[:len(b)-r.Len()]
		again, err := encodeUnicastRequest(formats)
		if err != nil || !bytes.Equal(again, consumed) {
			t.Fatalf("re-encoding %v = %x, %v; want %x", formats, again, err, consumed)
		}
		if decoded, err := decodeUnicastRequest(again); err != nil || !slices.Equal(decoded, formats) {
			t.Fatalf("decoding %x = %v, %v; want %v", again, decoded, err, formats)
		}
	})
}

func FuzzReadUnicastResponseHeader(f *testing.F) {
	f.Add(cat(u32(2), u64(uint64(GRPCFormat))))
	f.Add(cat(u32(2), u64(0)))
	f.Add(cat(u32(2), u64(uint64(PlaintextFormat))))
	f.Add(cat(u32(2), u64(uint64(sslFormat))))
	f.Add(cat(u32(1), u64(0)))
	f.Add([]byte{0, 0, 0, 2})
	proposed := []FormatID{GRPCFormat, PlaintextFormat}
	f.Fuzz(func(t *testing.T, b []byte) {
		selected, err := ReadUnicastResponseHeader(bytes.NewReader(b), proposed)
		if err != nil {
			checkDecodeError(t, err)
			return
		}
		if !slices.Contains(proposed, selected) {
			t.Fatalf("selected %v, which was not proposed", selected)
		}
		if again := appendResponseHeader(nil, selected); !bytes.Equal(again, b[:unicastHeaderLen]) {
			t.Fatalf("re-encoding %v = %x, want %x", selected, again, b[:unicastHeaderLen])
		}
	})
}

func FuzzReadGRPCResponse(f *testing.F) {
	id := testID(1)
	for _, resp := range []UnicastResponse{
		testResponse(),
		{Locator: Locator{"::1", 1}, Endpoint: "[::1]:443", ServiceID: id, Groups: []string{"", "grüße"}},
	} {
		b, err := encodeGRPCResponse(resp)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{})
	f.Add(u32(0xffffffff))
	f.Add(grpcBody(str("LUS"), u16(4160), str("lus:7000"), id[:], u16(0)))
	f.Add(grpcBody(str("lus"), u16(4160), str("lus:7000"), id[:], u16(2), str("a")))
	f.Fuzz(func(t *testing.T, b []byte) {
		r := bytes.NewReader(b)
		resp, err := ReadGRPCResponse(r, 0)
		if err != nil {
			checkDecodeError(t, err)
			return
		}
		consumed := b[:len(b)-r.Len()]
		again, err := encodeGRPCResponse(resp)
		if err != nil || !bytes.Equal(again, consumed) {
			t.Fatalf("re-encoding %+v = %x, %v; want %x", resp, again, err, consumed)
		}
		decoded, err := ReadGRPCResponse(bytes.NewReader(again), 0)
		if err != nil || !sameResponse(decoded, resp) {
			t.Fatalf("decoding %x = %+v, %v; want %+v", again, decoded, err, resp)
		}
	})
}

// Whatever a client sends, the registrar answers with nothing (a request it
// cannot read), the null answer (no djinn format proposed: every Java
// client), or the header and data of djinn's format.
func FuzzServeUnicast(f *testing.F) {
	f.Add(cat(u32(2), u16(2), u64(uint64(PlaintextFormat)), u64(uint64(sslFormat))))
	f.Add(cat(u32(2), u16(1), u64(uint64(GRPCFormat))))
	f.Add(cat(u32(2), u16(0)))
	f.Add(u32(1))
	f.Fuzz(func(t *testing.T, b []byte) {
		c := &conn{in: bytes.NewReader(b)}
		err := ServeUnicast(c, testResponse(), 0)
		proposed, rerr := ReadUnicastRequest(bytes.NewReader(b), 0)
		switch {
		case rerr != nil:
			if err == nil || c.out.Len() != 0 {
				t.Fatalf("unreadable request %x: ServeUnicast wrote %x, %v", b, c.out.Bytes(), err)
			}
		case !slices.Contains(proposed, GRPCFormat):
			if !errors.Is(err, ErrNoFormat) || !bytes.Equal(c.out.Bytes(), cat(u32(2), u64(0))) {
				t.Fatalf("proposals %v: ServeUnicast wrote %x, %v; want the null answer", proposed, c.out.Bytes(), err)
			}
		default:
			body, _ := encodeGRPCResponse(testResponse())
			if err != nil || !bytes.Equal(c.out.Bytes(), cat(u32(2), u64(uint64(GRPCFormat)), body)) {
				t.Fatalf("proposals %v: ServeUnicast wrote %x, %v", proposed, c.out.Bytes(), err)
			}
		}
	})
}

func FuzzParseLocator(f *testing.F) {
	for _, s := range []string{
		"jini://lus.example", "jini://lus.example:4161/", "JINI://LUS", "jini://[::1]:99",
		"jini://[2001:db8::1]/", "jini://10.0.0.1", "jini://host:", "jini://user@host",
		"jini://host/path", "jini://host?q", "jini://host#f", "http://host", "jini://[fe80::1%25eth0]",
		"jini://a..b", "jini://host:0", "jini://host:65536", "", "jini://", "jini://1.2.3",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		l, err := ParseLocator(s)
		if err != nil {
			if !errors.Is(err, djinn.ErrInvalidArgument) {
				t.Fatalf("ParseLocator(%q): %v is of kind %v", s, err, djinn.KindOf(err))
			}
			return
		}
		if err := l.check(); err != nil {
			t.Fatalf("ParseLocator(%q) = %+v, not canonical: %v", s, l, err)
		}
		again, err := ParseLocator(l.String())
		if err != nil || again != l {
			t.Fatalf("ParseLocator(%q) = %+v, %v; want %+v", l.String(), again, err, l)
		}
		if nl, err := NewLocator(l.Host, l.Port); err != nil || nl != l {
			t.Fatalf("NewLocator(%q, %d) = %+v, %v; want %+v", l.Host, l.Port, nl, err, l)
		}
	})
}
