package grpcerr

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/djinn-go/djinn"
)

// TestRoundTrip: every kind survives the server edge and the client edge,
// with its message, and keeps matching its sentinel.
func TestRoundTrip(t *testing.T) {
	for _, k := range djinn.Kinds() {
		in := fmt.Errorf("ctx: %w", djinn.Errorf(k, "lease %s: gone", "ab12"))
		st := Status(in)
		if got := status.Code(st); got != Code(k) {
			t.Errorf("%s: code %v, want %v", k, got, Code(k))
		}
		out := FromStatus(st)
		if !errors.Is(out, k) {
			t.Errorf("%s: after the wire the error is %v (kind %s)", k, out, djinn.KindOf(out))
		}
		if out.Error() != in.Error() {
			t.Errorf("%s: message %q, want %q", k, out.Error(), in.Error())
		}
	}
}

func TestCommittedTravels(t *testing.T) {
	in := &djinn.Error{Kind: djinn.TimeoutExpired, Message: "commit", Committed: true}
	var out *djinn.Error
	if !errors.As(FromStatus(Status(in)), &out) || !out.Committed {
		t.Fatalf("committed flag lost: %+v", out)
	}
}

func TestForeignStatuses(t *testing.T) {
	tests := []struct {
		err  error
		kind djinn.Kind
	}{
		{status.Error(codes.Unavailable, "conn refused"), djinn.Unavailable},
		{status.Error(codes.Unimplemented, "no method"), djinn.Unsupported},
		{status.Error(codes.InvalidArgument, "bad"), djinn.InvalidArgument},
		{errors.New("dial tcp: refused"), djinn.Unavailable},
	}
	for _, tt := range tests {
		if got := djinn.KindOf(FromStatus(tt.err)); got != tt.kind {
			t.Errorf("FromStatus(%v) kind %s, want %s", tt.err, got, tt.kind)
		}
	}
	if !errors.Is(FromStatus(status.Error(codes.DeadlineExceeded, "late")), context.DeadlineExceeded) {
		t.Error("deadline exceeded does not match context.DeadlineExceeded")
	}
	if status.Code(Status(context.Canceled)) != codes.Canceled {
		t.Error("context.Canceled is not Canceled")
	}
	if FromStatus(nil) != nil || Status(nil) != nil || FromProto(nil) != nil || ToProto(nil) != nil {
		t.Error("nil does not map to nil")
	}
}

// TestTransportMessage: a transport failure reads as its cause, without
// gRPC's wrapping; a message of another kind is left as it is.
func TestTransportMessage(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`connection error: desc = "transport: Error while dialing: dial tcp 127.0.0.1:1: connect: connection refused"`,
			"dial tcp 127.0.0.1:1: connect: connection refused"},
		{`last connection error: connection error: desc = "transport: Error while dialing: dial tcp: lookup nosuch.invalid: no such host"`,
			"dial tcp: lookup nosuch.invalid: no such host"},
		{`connection error: desc = "transport: authentication handshake failed: tls: failed to verify certificate: x509: certificate signed by unknown authority"`,
			"TLS handshake failed: tls: failed to verify certificate: x509: certificate signed by unknown authority"},
		{`connection error: desc = "error reading server preface: EOF"`, "error reading server preface: EOF"},
		{"lease 1f: unknown, expired or cancelled", "lease 1f: unknown, expired or cancelled"},
	} {
		if got := TransportMessage(tc.in); got != tc.want {
			t.Errorf("TransportMessage(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	err := FromStatus(status.Error(codes.Unavailable, `connection error: desc = "transport: Error while dialing: dial tcp 127.0.0.1:1: connect: connection refused"`))
	if got := err.Error(); got != "dial tcp 127.0.0.1:1: connect: connection refused" || djinn.KindOf(err) != djinn.Unavailable {
		t.Errorf("FromStatus of a refused connection: %q (%s), want its cause alone, Unavailable", got, djinn.KindOf(err))
	}
}
