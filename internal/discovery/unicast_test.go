package discovery

import (
	"bytes"
	"errors"
	"io"
	"net"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/djinn-go/djinn"
)

var (
	sslFormat      = FormatIDOf("net.jini.discovery.ssl")
	kerberosFormat = FormatIDOf("net.jini.discovery.kerberos")
)

// conn is a connection made of what the peer sent and what we write.
type conn struct {
	in  io.Reader
	out bytes.Buffer
}

func (c *conn) Read(b []byte) (int, error)  { return c.in.Read(b) }
func (c *conn) Write(b []byte) (int, error) { return c.out.Write(b) }

func testResponse() UnicastResponse {
	var id djinn.ID
	for i := range id {
		id[i] = 0xa0 | byte(i)
	}
	return UnicastResponse{
		Locator:   Locator{Host: "lus.example", Port: 4160},
		Endpoint:  "lus.example:7000",
		ServiceID: id,
		Groups:    []string{"blue"},
	}
}

func sameResponse(a, b UnicastResponse) bool {
	return a.Locator == b.Locator && a.Endpoint == b.Endpoint && a.ServiceID == b.ServiceID && slices.Equal(a.Groups, b.Groups)
}

// A Java client proposing only Java formats gets the null answer, byte for
// byte as DJ.2.6.6-DJ.2.6.8 lay it out, and nothing more.
func TestUnicastJavaClientGetsNullFormat(t *testing.T) {
	javaRequest := unhex(t, `
		00000002          // i32 protocol version 2
		0002              // u16 proposed format count 2
		760f15cb7490ce36  // i64 net.jini.discovery.plaintext
		19356a348a65fc34  // i64 net.jini.discovery.ssl
	`)
	if got, err := encodeUnicastRequest([]FormatID{PlaintextFormat, sslFormat}); err != nil || !bytes.Equal(got, javaRequest) {
		t.Fatalf("encodeUnicastRequest = %x, %v; want %x", got, err, javaRequest)
	}
	nullAnswer := unhex(t, `
		00000002          // i32 protocol version 2
		0000000000000000  // i64 selected format: null, and nothing follows
	`)
	c := &conn{in: bytes.NewReader(javaRequest)}
	err := ServeUnicast(c, testResponse(), 0)
	if !errors.Is(err, ErrNoFormat) || djinn.KindOf(err) != djinn.Unsupported {
		t.Errorf("ServeUnicast: %v (kind %v), want ErrNoFormat", err, djinn.KindOf(err))
	}
	if err != nil && !strings.Contains(err.Error(), "net.jini.discovery.plaintext") {
		t.Errorf("error %q does not name the proposed formats", err)
	}
	if !bytes.Equal(c.out.Bytes(), nullAnswer) {
		t.Errorf("ServeUnicast wrote %x, want %x", c.out.Bytes(), nullAnswer)
	}
	// What River's client does with it: version 2, format 0, failure.
	_, err = ReadUnicastResponseHeader(bytes.NewReader(nullAnswer), []FormatID{PlaintextFormat, sslFormat})
	if !errors.Is(err, ErrNoFormat) {
		t.Errorf("ReadUnicastResponseHeader of the null answer: %v, want ErrNoFormat", err)
	}
}

// A djinn client and a djinn registrar agree on djinn's format; the bytes
// are derived from DJ.2.6.6, DJ.2.6.7 and the layout in doc.go.
func TestUnicastGolden(t *testing.T) {
	request := unhex(t, `
		00000002          // i32 protocol version 2
		0001              // u16 proposed format count 1
		f756aac76c808bed  // i64 com.github.djinn-go.djinn.grpc.v1
	`)
	answer := unhex(t, `
		00000002                               // i32 protocol version 2
		f756aac76c808bed                       // i64 selected format: djinn's
		00000039                               // u32 57 bytes follow
		000b 6c75732e6578616d706c65            // str locator host "lus.example"
		1040                                   // u16 locator port 4160
		0010 6c75732e6578616d706c653a37303030  // str endpoint "lus.example:7000"
		a0a1a2a3a4a5a6a7a8a9aaabacadaeaf       // id of the registrar
		0001                                   // u16 group count 1
		0004 626c7565                          // str "blue"
	`)
	c := &conn{in: bytes.NewReader(request)}
	if err := ServeUnicast(c, testResponse(), 0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(c.out.Bytes(), answer) {
		t.Fatalf("ServeUnicast wrote\n%x\nwant\n%x", c.out.Bytes(), answer)
	}
	client := &conn{in: bytes.NewReader(answer)}
	resp, err := RequestUnicast(client, 0)
	if err != nil || !sameResponse(resp, testResponse()) {
		t.Fatalf("RequestUnicast = %+v, %v; want %+v", resp, err, testResponse())
	}
	if !bytes.Equal(client.out.Bytes(), request) {
		t.Errorf("RequestUnicast sent %x, want %x", client.out.Bytes(), request)
	}
}

// Client and server over a real (in-memory) connection.
func TestUnicastOverPipe(t *testing.T) {
	server, client := net.Pipe()
	defer client.Close()
	done := make(chan error, 1)
	go func() {
		defer server.Close()
		done <- ServeUnicast(server, testResponse(), 0)
	}()
	resp, err := RequestUnicast(client, 0)
	if err != nil || !sameResponse(resp, testResponse()) {
		t.Fatalf("RequestUnicast = %+v, %v", resp, err)
	}
	if err := <-done; err != nil {
		t.Fatalf("ServeUnicast: %v", err)
	}
}

func TestNegotiate(t *testing.T) {
	other := FormatIDOf("org.example.other")
	for _, tc := range []struct {
		name     string
		proposed []FormatID
		want     FormatID
	}{
		{"DJ.2.6.8 nothing proposed", nil, NullFormat},
		{"DJ.2.6.8 only Java formats", []FormatID{PlaintextFormat, sslFormat, kerberosFormat}, NullFormat},
		{"DJ.2.6.8 only ours", []FormatID{GRPCFormat}, GRPCFormat},
		{"DJ.2.6.8 ours after others", []FormatID{other, PlaintextFormat, GRPCFormat}, GRPCFormat},
		{"DJ.2.6.8 ours first", []FormatID{GRPCFormat, PlaintextFormat}, GRPCFormat},
	} {
		if got := Negotiate(tc.proposed); got != tc.want {
			t.Errorf("%s: Negotiate(%v) = %v, want %v", tc.name, tc.proposed, got, tc.want)
		}
	}
}

func TestUnicastRequestRoundTrip(t *testing.T) {
	many := make([]FormatID, 300)
	for i := range many {
		many[i] = FormatID(i + 1)
	}
	for _, formats := range [][]FormatID{nil, {GRPCFormat}, {PlaintextFormat, sslFormat, GRPCFormat}, many} {
		var buf bytes.Buffer
		if err := WriteUnicastRequest(&buf, formats); err != nil {
			t.Fatal(err)
		}
		buf.WriteString("after") // the reader must not read past the request
		got, err := ReadUnicastRequest(&buf, 0)
		if err != nil || !slices.Equal(got, formats) {
			t.Errorf("round trip of %v = %v, %v", formats, got, err)
		}
		if buf.String() != "after" {
			t.Errorf("ReadUnicastRequest left %q, want %q", buf.String(), "after")
		}
	}
}

func TestWriteUnicastRequestRejects(t *testing.T) {
	for _, tc := range []struct {
		name    string
		formats []FormatID
		msg     string
	}{
		{"DJ.2.2.2 null format is reserved", []FormatID{GRPCFormat, NullFormat}, "proposed format 1: the null format id 0 is reserved"},
		{"DJ.2.6.6 count is an unsigned short", make([]FormatID, 65536), "65536 proposed formats, more than 65535"},
	} {
		var buf bytes.Buffer
		err := WriteUnicastRequest(&buf, tc.formats)
		if !errors.Is(err, djinn.ErrInvalidArgument) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: %v, want an invalid argument error saying %q", tc.name, err, tc.msg)
		}
		if buf.Len() != 0 {
			t.Errorf("%s: wrote %d bytes", tc.name, buf.Len())
		}
	}
}

// failingReader returns some bytes, then an error that is not EOF.
type failingReader struct {
	data []byte
	err  error
}

func (r *failingReader) Read(b []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, r.err
	}
	n := copy(b, r.data)
	r.data = r.data[n:]
	return n, nil
}

func TestReadUnicastRequestRejects(t *testing.T) {
	reset := errors.New("connection reset")
	for _, tc := range []struct {
		name     string
		in       io.Reader
		max      int
		sentinel error
		kind     djinn.Kind
		msg      string
	}{
		{"nothing sent", bytes.NewReader(nil), 0, ErrMalformed, djinn.InvalidArgument, "truncated: the connection ended before the protocol version"},
		{"DJ.2.6.4 version 1 request", bytes.NewReader(u32(1)), 0, ErrVersion, djinn.Unsupported, "protocol version 1: only version 2"},
		{"version -1", bytes.NewReader(u32(0xffffffff)), 0, ErrVersion, djinn.Unsupported, "protocol version -1"},
		{"count truncated", bytes.NewReader(cat(u32(2), []byte{0})), 0, ErrMalformed, djinn.InvalidArgument, "before the proposed format count"},
		{"formats truncated", bytes.NewReader(cat(u32(2), u16(2), u64(1))), 0, ErrMalformed, djinn.InvalidArgument, "before the proposed formats"},
		{"claims more than it sends", bytes.NewReader(cat(u32(2), u16(8000), u64(1))), 0, ErrMalformed, djinn.InvalidArgument, "before the proposed formats"},
		{"DJ.2.2.2 null format proposed", bytes.NewReader(cat(u32(2), u16(2), u64(uint64(GRPCFormat)), u64(0))), 0, ErrMalformed, djinn.InvalidArgument, "proposed format 1: the null format id 0 is reserved"},
		{"over the limit", bytes.NewReader(cat(u32(2), u16(10))), 80, ErrTooLarge, djinn.ResourceExhausted, "10 proposed formats make 86 bytes, more than the limit of 80"},
		{"over the default limit", bytes.NewReader(cat(u32(2), u16(65535))), 0, ErrTooLarge, djinn.ResourceExhausted, "more than the limit of 65536"},
		{"connection fails", &failingReader{data: u32(2), err: reset}, 0, reset, djinn.Unavailable, "proposed format count: connection reset"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ReadUnicastRequest(tc.in, tc.max)
			if err == nil {
				t.Fatalf("ReadUnicastRequest = %v, want an error", got)
			}
			if !errors.Is(err, tc.sentinel) || djinn.KindOf(err) != tc.kind {
				t.Errorf("error %q (kind %v), want %v of kind %v", err, djinn.KindOf(err), tc.sentinel, tc.kind)
			}
			if !strings.HasPrefix(err.Error(), "unicast request: ") || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error %q does not say %q", err, tc.msg)
			}
		})
	}
}

func TestReadUnicastResponseHeader(t *testing.T) {
	proposed := []FormatID{GRPCFormat}
	for _, tc := range []struct {
		name     string
		in       []byte
		want     FormatID
		sentinel error
		msg      string
	}{
		{"DJ.2.6.7 selected ours", cat(u32(2), u64(uint64(GRPCFormat))), GRPCFormat, nil, ""},
		{"DJ.2.6.7 null format", cat(u32(2), u64(0)), NullFormat, ErrNoFormat, "accepts none of the proposed formats [0xf756aac76c808bed (com.github.djinn-go.djinn.grpc.v1)]"},
		{"DJ.2.6.7 format not proposed", cat(u32(2), u64(uint64(PlaintextFormat))), NullFormat, ErrFormat, "selected format 0x760f15cb7490ce36 (net.jini.discovery.plaintext) was not proposed"},
		{"DJ.2.6.5 version 1 answer", cat(u32(1), u64(0)), NullFormat, ErrVersion, "protocol version 1"},
		{"truncated", cat(u32(2), u32(0)), NullFormat, ErrMalformed, "the connection ended before the header"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ReadUnicastResponseHeader(bytes.NewReader(tc.in), proposed)
			if tc.sentinel == nil {
				if err != nil || got != tc.want {
					t.Fatalf("ReadUnicastResponseHeader = %v, %v; want %v", got, err, tc.want)
				}
				return
			}
			if !errors.Is(err, tc.sentinel) || !strings.HasPrefix(err.Error(), "unicast response: ") || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error %v, want %v saying %q", err, tc.sentinel, tc.msg)
			}
		})
	}
}

func TestGRPCResponseRoundTrip(t *testing.T) {
	for _, resp := range []UnicastResponse{
		testResponse(),
		{Locator: Locator{"::1", 1}, Endpoint: "[::1]:443", ServiceID: testID(1)},
		{Locator: Locator{"10.0.0.1", 65535}, Endpoint: "10.0.0.1:7000", ServiceID: testID(2), Groups: []string{"", "grüße"}},
		{Locator: Locator{"lus", 4160}, Endpoint: "LUS.Example:1", ServiceID: testID(3), Groups: make([]string, 1000)},
	} {
		var buf bytes.Buffer
		if err := WriteGRPCResponse(&buf, resp); err != nil {
			t.Fatalf("WriteGRPCResponse(%+v): %v", resp, err)
		}
		buf.WriteString("after")
		got, err := ReadGRPCResponse(&buf, 0)
		if err != nil || !sameResponse(got, resp) {
			t.Errorf("round trip of %+v = %+v, %v", resp, got, err)
		}
		if buf.String() != "after" {
			t.Errorf("ReadGRPCResponse left %q, want %q", buf.String(), "after")
		}
	}
}

func TestWriteGRPCResponseRejects(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*UnicastResponse)
		msg    string
	}{
		{"DJ.2.6.3 locator host must be present", func(r *UnicastResponse) { r.Locator.Host = "" }, "locator host: empty"},
		{"locator must be canonical", func(r *UnicastResponse) { r.Locator.Host = "LUS" }, `locator host "LUS": not canonical, want "lus"`},
		{"locator port 0", func(r *UnicastResponse) { r.Locator.Port = 0 }, "locator port 0"},
		{"endpoint must be host:port", func(r *UnicastResponse) { r.Endpoint = "lus" }, `endpoint "lus": not host:port`},
		{"endpoint host must be present", func(r *UnicastResponse) { r.Endpoint = ":7000" }, `endpoint ":7000": empty host`},
		{"endpoint host must be a host", func(r *UnicastResponse) { r.Endpoint = "a_b:7000" }, `character '_'`},
		{"endpoint port 0", func(r *UnicastResponse) { r.Endpoint = "lus:0" }, `port "0": must be 1 to 65535`},
		{"endpoint port a name", func(r *UnicastResponse) { r.Endpoint = "lus:grpc" }, `not a decimal number`},
		{"DJ.2.6.3 service id must be present", func(r *UnicastResponse) { r.ServiceID = djinn.ID{} }, "service id: missing"},
		{"group must be valid utf-8", func(r *UnicastResponse) { r.Groups = []string{"ok", "\xff"} }, `group 1 "\xff": invalid utf-8`},
		{"group count is an unsigned short", func(r *UnicastResponse) { r.Groups = make([]string, 65536) }, "65536 groups, more than 65535"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := testResponse()
			tc.change(&resp)
			var buf bytes.Buffer
			err := WriteGRPCResponse(&buf, resp)
			if !errors.Is(err, djinn.ErrInvalidArgument) || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("WriteGRPCResponse: %v, want an invalid argument error saying %q", err, tc.msg)
			}
			if buf.Len() != 0 {
				t.Errorf("wrote %d bytes", buf.Len())
			}
			// ServeUnicast checks before it reads.
			c := &conn{in: &failingReader{err: errors.New("must not be read")}}
			if err := ServeUnicast(c, resp, 0); !errors.Is(err, djinn.ErrInvalidArgument) || c.out.Len() != 0 {
				t.Errorf("ServeUnicast: %v, wrote %d bytes; want an invalid argument error and nothing written", err, c.out.Len())
			}
		})
	}
}

// grpcBody wraps body in its length prefix.
func grpcBody(parts ...[]byte) []byte {
	body := cat(parts...)
	return cat(u32(uint32(len(body))), body)
}

func TestReadGRPCResponseRejects(t *testing.T) {
	id := testID(1)
	good := [][]byte{str("lus"), u16(4160), str("lus:7000"), id[:], u16(0)}
	with := func(i int, b []byte) []byte {
		parts := slices.Clone(good)
		parts[i] = b
		return grpcBody(parts...)
	}
	if _, err := ReadGRPCResponse(bytes.NewReader(grpcBody(good...)), 0); err != nil {
		t.Fatalf("the good response: %v", err)
	}
	for _, tc := range []struct {
		name     string
		in       []byte
		max      int
		sentinel error
		msg      string
	}{
		{"nothing", nil, 0, ErrMalformed, "the connection ended before the data length"},
		{"over the limit", cat(u32(1000), str("lus")), 500, ErrTooLarge, "1004 bytes of data, more than the limit of 500"},
		{"over the default limit", u32(0xffffffff), 0, ErrTooLarge, "4294967299 bytes of data, more than the limit of 65536"},
		{"claims more than it sends", cat(u32(60000), str("lus")), 0, ErrMalformed, "the connection ended before the data"},
		{"length shorter than the fields", cat(u32(5), str("lus")), 0, ErrMalformed, "locator port needs 2 bytes at offset 5, 0 left"},
		{"length longer than the fields", grpcBody(slices.Concat(good...), []byte{0}), 0, ErrMalformed, "1 trailing bytes"},
		{"locator host not canonical", with(0, str("LUS")), 0, ErrMalformed, `locator: locator host "LUS": not canonical`},
		{"locator host not a host", with(0, str("l u s")), 0, ErrMalformed, `character ' '`},
		{"locator port 0", with(1, u16(0)), 0, ErrMalformed, "locator port 0"},
		{"endpoint not host:port", with(2, str("lus")), 0, ErrMalformed, `endpoint: "lus": not host:port`},
		{"endpoint not utf-8", with(2, str("lus:70\xff")), 0, ErrMalformed, `endpoint "lus:70\xff": invalid utf-8`},
		{"zero service id", with(3, make([]byte, 16)), 0, ErrMalformed, "service id: missing"},
		{"group count beyond the data", with(4, u16(3)), 0, ErrMalformed, "group count 3: the 0 bytes left hold at most 0"},
		{"group not utf-8", with(4, cat(u16(1), str("\xc0\x80"))), 0, ErrMalformed, "invalid utf-8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ReadGRPCResponse(bytes.NewReader(tc.in), tc.max)
			if err == nil {
				t.Fatalf("ReadGRPCResponse = %+v, want an error", got)
			}
			if !errors.Is(err, tc.sentinel) || !strings.HasPrefix(err.Error(), "unicast response: ") || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error %q, want %v saying %q", err, tc.sentinel, tc.msg)
			}
		})
	}
}

// A djinn client asking a Java lookup service (which answers only in its
// formats, so with the null format) gets ErrNoFormat, not garbage.
func TestRequestUnicastFromJavaRegistrar(t *testing.T) {
	c := &conn{in: bytes.NewReader(cat(u32(2), u64(0)))}
	_, err := RequestUnicast(c, 0)
	if !errors.Is(err, ErrNoFormat) {
		t.Fatalf("RequestUnicast: %v, want ErrNoFormat", err)
	}
}

// A version 1 client gets no answer at all.
func TestServeUnicastVersion1(t *testing.T) {
	c := &conn{in: bytes.NewReader(u32(1))}
	err := ServeUnicast(c, testResponse(), 0)
	if !errors.Is(err, ErrVersion) || c.out.Len() != 0 {
		t.Fatalf("ServeUnicast: %v, wrote %x; want ErrVersion and nothing", err, c.out.Bytes())
	}
}

// allocated returns the bytes f allocates, on average over a few runs.
func allocated(f func()) uint64 {
	const runs = 20
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range runs {
		f()
	}
	runtime.ReadMemStats(&after)
	return (after.TotalAlloc - before.TotalAlloc) / runs
}

// A peer that claims a long message and sends a short one costs memory in
// proportion to what it sent, not to what it claimed.
func TestClaimedLengthsCostLittle(t *testing.T) {
	const budget = 16 << 10
	for _, tc := range []struct {
		name string
		f    func()
	}{
		{"unicast data of 16 MiB claimed, 10 bytes sent", func() {
			_, _ = ReadGRPCResponse(bytes.NewReader(cat(u32(16<<20), make([]byte, 10))), 32<<20)
		}},
		{"unicast request of 65535 formats claimed, one sent", func() {
			_, _ = ReadUnicastRequest(bytes.NewReader(cat(u32(2), u16(65535), u64(1))), 1<<20)
		}},
		{"65535 groups claimed in a small packet", func() {
			_, _ = DecodeMulticastRequest(cat(requestHeader, str("h"), u16(1), u16(65535), make([]byte, 100)))
		}},
		{"65535 heard ids claimed in a small packet", func() {
			_, _ = DecodeMulticastRequest(cat(requestHeader, str("h"), u16(1), u16(0), u16(65535), make([]byte, 100)))
		}},
	} {
		if got := allocated(tc.f); got > budget {
			t.Errorf("%s: %d bytes allocated, more than %d", tc.name, got, budget)
		}
	}
}
