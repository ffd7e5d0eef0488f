// Package grpcerr is djinn's one table between error kinds and gRPC status
// codes. Servers turn every error into a status with Status at the edge;
// clients turn every status back into a *djinn.Error with FromStatus, so that
// errors.Is(err, djinn.ErrUnknownLease) holds on both sides of the wire.
//
// The kind travels as a djinnpb.Error status detail, so kinds that share a gRPC
// code (UnknownLease and NoSuchObject are both NotFound) stay distinct.
package grpcerr

import (
	"context"
	"errors"
	"strconv"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// codeOf is the table: each kind's gRPC code.
var codeOf = map[djinn.Kind]codes.Code{
	djinn.InvalidArgument:       codes.InvalidArgument,
	djinn.UnknownLease:          codes.NotFound,
	djinn.LeaseDenied:           codes.PermissionDenied,
	djinn.UnknownEvent:          codes.FailedPrecondition,
	djinn.NoSuchObject:          codes.NotFound,
	djinn.UnknownTransaction:    codes.NotFound,
	djinn.CannotJoin:            codes.FailedPrecondition,
	djinn.CannotCommit:          codes.Aborted,
	djinn.CannotAbort:           codes.FailedPrecondition,
	djinn.CrashCount:            codes.Aborted,
	djinn.TimeoutExpired:        codes.DeadlineExceeded,
	djinn.LockNotHeld:           codes.FailedPrecondition,
	djinn.TransactionRolledBack: codes.Aborted,
	djinn.Deadlock:              codes.Aborted,
	djinn.ResourceExhausted:     codes.ResourceExhausted,
	djinn.InvalidIterator:       codes.Aborted,
	djinn.PermissionDenied:      codes.PermissionDenied,
	djinn.Unsupported:           codes.Unimplemented,
	djinn.Unavailable:           codes.Unavailable,
	djinn.Internal:              codes.Internal,
}

// kindOfCode maps statuses that carry no djinn detail (from gRPC itself or a
// foreign peer) to a kind.
var kindOfCode = map[codes.Code]djinn.Kind{
	codes.InvalidArgument:    djinn.InvalidArgument,
	codes.NotFound:           djinn.NoSuchObject,
	codes.PermissionDenied:   djinn.LeaseDenied,
	codes.ResourceExhausted:  djinn.ResourceExhausted,
	codes.Unimplemented:      djinn.Unsupported,
	codes.Unavailable:        djinn.Unavailable,
	codes.DeadlineExceeded:   djinn.Unavailable,
	codes.Canceled:           djinn.Unavailable,
	codes.Aborted:            djinn.Unavailable,
	codes.Unauthenticated:    djinn.LeaseDenied,
	codes.FailedPrecondition: djinn.Unsupported,
	codes.OutOfRange:         djinn.InvalidArgument,
}

// Code returns the gRPC code for a kind.
func Code(k djinn.Kind) codes.Code {
	if c, ok := codeOf[k]; ok {
		return c
	}
	return codes.Internal
}

// Status converts a service error to a gRPC status error. Context errors
// become Canceled or DeadlineExceeded; errors that are already statuses pass
// through.
func Status(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok && !isDjinn(err) {
		return err
	}
	switch {
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	case errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, djinn.ErrTimeoutExpired):
		return status.Error(codes.DeadlineExceeded, err.Error())
	}
	return Proto(ToProto(err))
}

func isDjinn(err error) bool {
	var e *djinn.Error
	var k djinn.Kind
	return errors.As(err, &e) || errors.As(err, &k)
}

// ToProto converts an error to its in-band form (nil for nil).
func ToProto(err error) *djinnpb.Error {
	if err == nil {
		return nil
	}
	k := djinn.KindOf(err)
	if k == djinn.Internal && !isDjinn(err) {
		if s, ok := status.FromError(err); ok {
			return &djinnpb.Error{Code: int32(s.Code()), Kind: string(kindFromCode(s.Code())), Message: s.Message()}
		}
	}
	e := &djinnpb.Error{Code: int32(Code(k)), Kind: string(k), Message: err.Error()}
	var de *djinn.Error
	if errors.As(err, &de) {
		e.Committed = de.Committed
	}
	return e
}

// Proto returns the gRPC status error carrying e.
func Proto(e *djinnpb.Error) error {
	s := status.New(codes.Code(e.GetCode()), e.GetMessage())
	if d, err := s.WithDetails(e); err == nil {
		s = d
	}
	return s.Err()
}

// FromProto converts an in-band error back to a *djinn.Error (nil when e is
// nil or its code is OK).
func FromProto(e *djinnpb.Error) error {
	if e == nil || codes.Code(e.GetCode()) == codes.OK {
		return nil
	}
	k := djinn.Kind(e.GetKind())
	if k == "" {
		k = kindFromCode(codes.Code(e.GetCode()))
	}
	return &djinn.Error{Kind: k, Message: e.GetMessage(), Committed: e.GetCommitted()}
}

// FromStatus converts an error returned by a gRPC call into a *djinn.Error
// whose kind is the one the server named, or one derived from the code.
// Transport failures are Unavailable: the call may or may not have happened.
func FromStatus(err error) error {
	if err == nil {
		return nil
	}
	s, ok := status.FromError(err)
	if !ok {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return err
		}
		return &djinn.Error{Kind: djinn.Unavailable, Message: err.Error()}
	}
	for _, d := range s.Details() {
		if e, ok := d.(*djinnpb.Error); ok {
			return FromProto(e)
		}
	}
	switch s.Code() {
	case codes.Canceled:
		return errors.Join(context.Canceled, &djinn.Error{Kind: djinn.Unavailable, Message: s.Message()})
	case codes.DeadlineExceeded:
		return errors.Join(context.DeadlineExceeded, &djinn.Error{Kind: djinn.Unavailable, Message: s.Message()})
	}
	msg := s.Message()
	if s.Code() == codes.Unavailable {
		msg = TransportMessage(msg)
	}
	return &djinn.Error{Kind: kindFromCode(s.Code()), Message: msg}
}

// TransportMessage is the cause of a transport failure gRPC reports,
// without gRPC's wrapping: `connection error: desc = "transport: Error
// while dialing: dial tcp 127.0.0.1:1: connect: connection refused"` is
// `dial tcp 127.0.0.1:1: connect: connection refused`. Other messages are
// returned as they are.
func TransportMessage(msg string) string {
	msg = strings.TrimPrefix(msg, "last connection error: ")
	if rest, ok := strings.CutPrefix(msg, "connection error: desc = "); ok {
		if u, err := strconv.Unquote(rest); err == nil {
			rest = u
		}
		msg = rest
	}
	msg = strings.TrimPrefix(msg, "transport: Error while dialing: ")
	if rest, ok := strings.CutPrefix(msg, "transport: authentication handshake failed: "); ok {
		msg = "TLS handshake failed: " + rest
	}
	return strings.TrimPrefix(msg, "transport: ")
}

func kindFromCode(c codes.Code) djinn.Kind {
	if k, ok := kindOfCode[c]; ok {
		return k
	}
	return djinn.Internal
}
