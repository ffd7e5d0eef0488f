package discovery

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"

	"github.com/djinn-go/djinn"
)

// DefaultMaxMessageSize is the limit on a unicast message that the readers
// use when given a limit of 0 or less.
const DefaultMaxMessageSize = 64 << 10

// unicastHeaderLen is the length of a unicast response header: protocol
// version (4) and selected format id (8).
const unicastHeaderLen = 4 + 8

func limitOf(maxSize int) int {
	if maxSize <= 0 {
		return DefaultMaxMessageSize
	}
	return maxSize
}

// ioError reports a failure of the connection itself. A connection that
// ends inside a message is a truncated message (ErrMalformed); any other
// failure keeps its cause in the chain and is of kind djinn.Unavailable.
func ioError(what, field string, err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return malformed("%s: truncated: the connection ended before the %s", what, field)
	}
	return newProtoError(err, djinn.Unavailable, "%s: %s: %v", what, field, err)
}

// readN reads exactly n bytes. Its buffer grows with the bytes that arrive,
// not with n, so a peer that claims a long message and sends little costs
// little.
func readN(r io.Reader, n int, what, field string) ([]byte, error) {
	var buf bytes.Buffer
	got, err := buf.ReadFrom(io.LimitReader(r, int64(n)))
	if err != nil {
		return nil, ioError(what, field, err)
	}
	if got < int64(n) {
		return nil, ioError(what, field, io.ErrUnexpectedEOF)
	}
	return buf.Bytes(), nil
}

func writeAll(w io.Writer, b []byte, what string) error {
	if _, err := w.Write(b); err != nil {
		return newProtoError(err, djinn.Unavailable, "%s: write: %v", what, err)
	}
	return nil
}

// encodeUnicastRequest encodes a version 2 unicast request (DJ.2.6.6).
func encodeUnicastRequest(formats []FormatID) ([]byte, error) {
	if len(formats) > maxCount {
		return nil, invalid("unicast request: %d proposed formats, more than %d", len(formats), maxCount)
	}
	b := make([]byte, 0, 6+8*len(formats))
	b = binary.BigEndian.AppendUint32(b, ProtocolVersion)
	b = binary.BigEndian.AppendUint16(b, uint16(len(formats)))
	for i, f := range formats {
		if f == NullFormat {
			return nil, invalid("unicast request: proposed format %d: the null format id 0 is reserved", i)
		}
		b = binary.BigEndian.AppendUint64(b, uint64(f))
	}
	return b, nil
}

// decodeUnicastRequest decodes a whole version 2 unicast request.
func decodeUnicastRequest(b []byte) ([]FormatID, error) {
	r := &reader{buf: b, what: "unicast request"}
	if v := r.u32("protocol version"); r.err == nil && v != ProtocolVersion {
		return nil, badVersion(r.what, v)
	}
	n := r.count("proposed format count", 8)
	var formats []FormatID
	if n > 0 && r.err == nil {
		formats = make([]FormatID, n)
		for i := range formats {
			if formats[i] = FormatID(r.u64("proposed format")); r.err == nil && formats[i] == NullFormat {
				r.failf("proposed format %d: the null format id 0 is reserved", i)
			}
		}
	}
	r.end()
	if r.err != nil {
		return nil, r.err
	}
	return formats, nil
}

// WriteUnicastRequest writes a version 2 unicast request (DJ.2.6.6) that
// proposes formats, most preferred first: the discovering entity's first
// message on a unicast discovery connection. More than 65535 formats, or the
// null format, are an error of kind djinn.InvalidArgument.
func WriteUnicastRequest(w io.Writer, formats []FormatID) error {
	b, err := encodeUnicastRequest(formats)
	if err != nil {
		return err
	}
	return writeAll(w, b, "unicast request")
}

// ReadUnicastRequest reads a unicast request and returns its proposed
// formats, most preferred first. It reads exactly the request's bytes. A
// request longer than maxSize bytes (DefaultMaxMessageSize if maxSize <= 0)
// is refused before its formats are read (ErrTooLarge); a version 1 request
// gets ErrVersion, and the caller should close the connection, since
// version 1 can only be answered with a Java-serialized proxy.
func ReadUnicastRequest(r io.Reader, maxSize int) ([]FormatID, error) {
	const what = "unicast request"
	head, err := readN(r, 4, what, "protocol version")
	if err != nil {
		return nil, err
	}
	if v := binary.BigEndian.Uint32(head); v != ProtocolVersion {
		return nil, badVersion(what, v)
	}
	count, err := readN(r, 2, what, "proposed format count")
	if err != nil {
		return nil, err
	}
	n := int(binary.BigEndian.Uint16(count))
	if size := 6 + 8*n; size > limitOf(maxSize) {
		return nil, newProtoError(ErrTooLarge, djinn.ResourceExhausted,
			"%s: %d proposed formats make %d bytes, more than the limit of %d", what, n, size, limitOf(maxSize))
	}
	ids, err := readN(r, 8*n, what, "proposed formats")
	if err != nil {
		return nil, err
	}
	return decodeUnicastRequest(append(append(head, count...), ids...))
}

// Negotiate picks the format a djinn registrar answers in (DJ.2.6.8): the
// first of the proposed formats it can answer in, which is only GRPCFormat,
// or NullFormat when there is none. A Java client proposes only Java formats
// (plaintext, ssl, kerberos, all of which carry a Java-serialized proxy), and
// so gets NullFormat: the protocol's way to say "no common format", which
// River reports as a failed negotiation.
func Negotiate(proposed []FormatID) FormatID {
	for _, f := range proposed {
		if f == GRPCFormat {
			return f
		}
	}
	return NullFormat
}

func appendResponseHeader(b []byte, selected FormatID) []byte {
	b = binary.BigEndian.AppendUint32(b, ProtocolVersion)
	return binary.BigEndian.AppendUint64(b, uint64(selected))
}

// WriteUnicastResponseHeader writes the start of a version 2 unicast
// response (DJ.2.6.7): the protocol version and the selected format.
// Selecting NullFormat makes the whole response: nothing may follow it.
func WriteUnicastResponseHeader(w io.Writer, selected FormatID) error {
	return writeAll(w, appendResponseHeader(nil, selected), "unicast response")
}

// decodeUnicastResponseHeader decodes a unicast response header and checks
// the selected format against the proposed ones.
func decodeUnicastResponseHeader(b []byte, proposed []FormatID) (FormatID, error) {
	r := &reader{buf: b, what: "unicast response"}
	if v := r.u32("protocol version"); r.err == nil && v != ProtocolVersion {
		return NullFormat, badVersion(r.what, v)
	}
	f := FormatID(r.u64("selected format"))
	r.end()
	switch {
	case r.err != nil:
		return NullFormat, r.err
	case f == NullFormat:
		return NullFormat, newProtoError(ErrNoFormat, djinn.Unsupported,
			"unicast response: the lookup service accepts none of the proposed formats %s", formatList(proposed))
	}
	for _, p := range proposed {
		if p == f {
			return f, nil
		}
	}
	return NullFormat, newProtoError(ErrFormat, djinn.Unsupported,
		"unicast response: selected format %v was not proposed (proposed %s)", f, formatList(proposed))
}

// ReadUnicastResponseHeader reads the start of a unicast response and
// returns the selected format, which must be one of proposed. The null
// format gets ErrNoFormat.
func ReadUnicastResponseHeader(r io.Reader, proposed []FormatID) (FormatID, error) {
	b, err := readN(r, unicastHeaderLen, "unicast response", "header")
	if err != nil {
		return NullFormat, err
	}
	return decodeUnicastResponseHeader(b, proposed)
}

func formatList(formats []FormatID) string {
	s := make([]string, len(formats))
	for i, f := range formats {
		s[i] = f.String()
	}
	return "[" + strings.Join(s, ", ") + "]"
}

// UnicastResponse is the data of a unicast response in djinn's format
// (GRPCFormat): what a client needs to use a djinn registrar.
type UnicastResponse struct {
	// Locator is the registrar's unicast discovery address as the registrar
	// names itself (the spec's unicast discovery host and port, DJ.2.6.3).
	// It must be canonical (see NewLocator).
	Locator Locator
	// Endpoint is the registrar's gRPC endpoint, "host:port": the spec's
	// registrar proxy, in djinn's terms.
	Endpoint string
	// ServiceID is the registrar's service id; it must not be zero.
	ServiceID djinn.ID
	// Groups are the registrar's member groups.
	Groups []string
}

// checkEndpoint checks a gRPC endpoint "host:port".
func checkEndpoint(ep string) error {
	if err := checkString(ep); err != nil {
		return invalid("%q: %v", abbrev(ep), err)
	}
	host, port, err := net.SplitHostPort(ep)
	if err != nil {
		return invalid("%q: not host:port", abbrev(ep))
	}
	if host == "" {
		return invalid("%q: empty host", abbrev(ep))
	}
	if _, err := canonicalHost(host, false); err != nil {
		return invalid("%q: %v", abbrev(ep), err)
	}
	if _, err := parsePort(port); err != nil {
		return invalid("%q: %v", abbrev(ep), err)
	}
	return nil
}

// encodeGRPCResponse encodes the data of a response in djinn's format,
// length prefix included.
func encodeGRPCResponse(resp UnicastResponse) ([]byte, error) {
	if err := resp.Locator.check(); err != nil {
		return nil, invalid("unicast response: %v", err)
	}
	if err := checkEndpoint(resp.Endpoint); err != nil {
		return nil, invalid("unicast response endpoint %v", err)
	}
	if resp.ServiceID.IsZero() {
		return nil, invalid("unicast response service id: missing (all zeros)")
	}
	if len(resp.Groups) > maxCount {
		return nil, invalid("unicast response: %d groups, more than %d", len(resp.Groups), maxCount)
	}
	if err := checkGroups(resp.Groups); err != nil {
		return nil, invalid("unicast response %v", err)
	}
	b := make([]byte, 4, 64)
	b = appendString(b, resp.Locator.Host)
	b = binary.BigEndian.AppendUint16(b, uint16(resp.Locator.Port))
	b = appendString(b, resp.Endpoint)
	b = append(b, resp.ServiceID[:]...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(resp.Groups)))
	for _, g := range resp.Groups {
		b = appendString(b, g)
	}
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b, nil
}

// decodeGRPCBody decodes the data of a response in djinn's format, after
// its length prefix.
func decodeGRPCBody(b []byte) (UnicastResponse, error) {
	r := &reader{buf: b, what: "unicast response"}
	var resp UnicastResponse
	resp.Locator.Host = r.str("locator host")
	resp.Locator.Port = r.u16("locator port")
	if r.err == nil {
		r.check("locator", resp.Locator.check())
	}
	resp.Endpoint = r.str("endpoint")
	if r.err == nil {
		r.check("endpoint", checkEndpoint(resp.Endpoint))
	}
	resp.ServiceID = r.id("service id")
	if r.err == nil && resp.ServiceID.IsZero() {
		r.failf("service id: missing (all zeros)")
	}
	resp.Groups = readGroups(r)
	r.end()
	if r.err != nil {
		return UnicastResponse{}, r.err
	}
	return resp, nil
}

// WriteGRPCResponse writes the data of a unicast response in djinn's format:
// what follows a header that selected GRPCFormat. Bad fields are an error of
// kind djinn.InvalidArgument, and then nothing is written.
func WriteGRPCResponse(w io.Writer, resp UnicastResponse) error {
	b, err := encodeGRPCResponse(resp)
	if err != nil {
		return err
	}
	return writeAll(w, b, "unicast response")
}

// ReadGRPCResponse reads the data of a unicast response in djinn's format.
// Data longer than maxSize bytes (DefaultMaxMessageSize if maxSize <= 0),
// length prefix included, is refused before it is read (ErrTooLarge).
func ReadGRPCResponse(r io.Reader, maxSize int) (UnicastResponse, error) {
	const what = "unicast response"
	prefix, err := readN(r, 4, what, "data length")
	if err != nil {
		return UnicastResponse{}, err
	}
	n := binary.BigEndian.Uint32(prefix)
	if size := 4 + uint64(n); size > uint64(limitOf(maxSize)) {
		return UnicastResponse{}, newProtoError(ErrTooLarge, djinn.ResourceExhausted,
			"%s: %d bytes of data, more than the limit of %d", what, size, limitOf(maxSize))
	}
	body, err := readN(r, int(n), what, "data")
	if err != nil {
		return UnicastResponse{}, err
	}
	return decodeGRPCBody(body)
}

// ServeUnicast runs the registrar's side of unicast discovery on a
// connection (the one it accepted, or the one it opened to a multicast
// request's response server, DJ.2.6.1): it reads
// the request, negotiates (Negotiate), and answers with resp in djinn's
// format, or with the null format when the client proposed none that djinn
// serves. In that case the error matches ErrNoFormat and names the proposed
// formats; the answer has been sent all the same, and the caller closes the
// connection. resp is checked before anything is read.
func ServeUnicast(rw io.ReadWriter, resp UnicastResponse, maxSize int) error {
	body, err := encodeGRPCResponse(resp)
	if err != nil {
		return err
	}
	proposed, err := ReadUnicastRequest(rw, maxSize)
	if err != nil {
		return err
	}
	selected := Negotiate(proposed)
	msg := appendResponseHeader(make([]byte, 0, unicastHeaderLen+len(body)), selected)
	if selected == NullFormat {
		if err := writeAll(rw, msg, "unicast response"); err != nil {
			return err
		}
		return newProtoError(ErrNoFormat, djinn.Unsupported,
			"unicast discovery: the client proposed %s, none of them %v: answered with the null format",
			formatList(proposed), GRPCFormat)
	}
	return writeAll(rw, append(msg, body...), "unicast response")
}

// RequestUnicast runs the discovering side of unicast discovery on a
// connection: it proposes GRPCFormat alone and reads the answer. A lookup
// service that does not speak djinn's format (a Java one) answers with the
// null format, and RequestUnicast returns an error matching ErrNoFormat.
func RequestUnicast(rw io.ReadWriter, maxSize int) (UnicastResponse, error) {
	proposed := []FormatID{GRPCFormat}
	if err := WriteUnicastRequest(rw, proposed); err != nil {
		return UnicastResponse{}, err
	}
	if _, err := ReadUnicastResponseHeader(rw, proposed); err != nil {
		return UnicastResponse{}, err
	}
	return ReadGRPCResponse(rw, maxSize)
}
