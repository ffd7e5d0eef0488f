package server

import (
	"context"
	"fmt"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	protov2 "google.golang.org/protobuf/proto"
)

// A request that does not decode — malformed protobuf, or a string field
// that is not UTF-8 — is the caller's fault and answered INVALID_ARGUMENT,
// naming the message and what is wrong with it. gRPC answers INTERNAL to
// any codec error, and writes that status to the caller as soon as the
// receive fails, before a handler or an interceptor could change it. So
// the server's codec (requestCodec) does not fail: it sets the failure
// aside, keyed by the message it could not fill, and the handlers of every
// service the registrar registers (decoding) take it back right after
// decoding and answer with it. A message whose failure is set aside is
// never handled.

// requestCodec is the server's codec: protobuf, whose decoding failures
// are set aside for the handlers decoding wraps.
type requestCodec struct {
	encoding.CodecV2
	failed *sync.Map // message (a pointer) -> error
}

func newRequestCodec(failed *sync.Map) requestCodec {
	return requestCodec{CodecV2: encoding.GetCodecV2(proto.Name), failed: failed}
}

// Unmarshal implements encoding.CodecV2.
func (c requestCodec) Unmarshal(data mem.BufferSlice, v any) error {
	err := c.CodecV2.Unmarshal(data, v)
	if err == nil {
		return nil
	}
	name := fmt.Sprintf("%T", v)
	if m, ok := v.(protov2.Message); ok {
		name = string(m.ProtoReflect().Descriptor().FullName())
	}
	c.failed.Store(v, status.Errorf(codes.InvalidArgument, "request %s does not decode: %v: send a valid protobuf message, its strings in UTF-8", name, err))
	return nil
}

// decoding returns a copy of desc whose handlers answer a request that
// does not decode with the error requestCodec set aside in failed.
func decoding(desc *grpc.ServiceDesc, failed *sync.Map) *grpc.ServiceDesc {
	d := *desc
	d.Methods = make([]grpc.MethodDesc, len(desc.Methods))
	for i, m := range desc.Methods {
		h := m.Handler
		m.Handler = func(srv any, ctx context.Context, dec func(any) error, in grpc.UnaryServerInterceptor) (any, error) {
			return h(srv, ctx, func(v any) error { return decoded(failed, v, dec(v)) }, in)
		}
		d.Methods[i] = m
	}
	d.Streams = make([]grpc.StreamDesc, len(desc.Streams))
	for i, sd := range desc.Streams {
		h := sd.Handler
		sd.Handler = func(srv any, ss grpc.ServerStream) error { return h(srv, decodingStream{ss, failed}) }
		d.Streams[i] = sd
	}
	return &d
}

// decoded returns the error of a decoding of v: err, or the failure
// requestCodec set aside for v.
func decoded(failed *sync.Map, v any, err error) error {
	if f, ok := failed.LoadAndDelete(v); ok {
		return f.(error)
	}
	return err
}

// decodingStream answers a stream's message that does not decode with the
// error requestCodec set aside.
type decodingStream struct {
	grpc.ServerStream
	failed *sync.Map
}

func (s decodingStream) RecvMsg(m any) error { return decoded(s.failed, m, s.ServerStream.RecvMsg(m)) }
