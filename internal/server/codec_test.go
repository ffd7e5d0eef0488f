package server_test

import (
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/djinn-go/djinn/internal/server/servertest"
)

// rawCodec sends a request's bytes as they are, as a broken or hostile
// client would.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error)   { return v.([]byte), nil }
func (rawCodec) Unmarshal(b []byte, v any) error { *(v.(*[]byte)) = b; return nil }
func (rawCodec) Name() string                    { return "proto" }

// TestUndecodableRequests: a request that is not valid protobuf, or whose
// string field is not UTF-8, is answered INVALID_ARGUMENT naming the
// message, on unary calls and on streams alike, never INTERNAL.
func TestUndecodableRequests(t *testing.T) {
	t.Parallel()
	srv := servertest.Start(t, servertest.Config(t))
	cc, err := grpc.NewClient(srv.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithDefaultCallOptions(grpc.ForceCodec(rawCodec{})))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	notWire := []byte{0xff, 0xff, 0xff, 0xff}
	notUTF8 := []byte{0x0a, 0x02, 0xff, 0xfe} // field 1, a string of two bytes that are not UTF-8
	for _, tc := range []struct {
		name, method, message string
		req                   []byte
	}{
		{"malformed protobuf", "/djinn.v1.Landlord/Renew", "djinn.v1.RenewRequest", notWire},
		{"a string field that is not UTF-8", "/djinn.v1.Admin/Join", "djinn.v1.JoinRequest", notUTF8},
		{"malformed protobuf, to a method with its own handler", "/djinn.v1.LookupService/Lookup", "djinn.v1.LookupRequest", notWire},
	} {
		var resp []byte
		err := cc.Invoke(testContext(t), tc.method, tc.req, &resp)
		wantUndecodable(t, tc.name, err, tc.message)
	}

	stream, err := cc.NewStream(testContext(t), &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}, "/djinn.v1.Landlord/RenewStream")
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.SendMsg(notWire); err != nil {
		t.Fatal(err)
	}
	var resp []byte
	wantUndecodable(t, "malformed protobuf on a stream", stream.RecvMsg(&resp), "djinn.v1.RenewRequest")
}

func wantUndecodable(t *testing.T, name string, err error, message string) {
	t.Helper()
	st, _ := status.FromError(err)
	if st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), message) {
		t.Errorf("%s: %v, want INVALID_ARGUMENT naming %s", name, err, message)
	}
}
