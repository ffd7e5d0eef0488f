// Package wire converts between the root package's values and their
// protobuf forms where the services' cores need it — references and lease
// expirations — and between package service's items, entries, templates
// and values and their messages, for the lookup service and its clients.
// MaxReply is the bound of one reply, which answers and listings keep.
package wire

import (
	"crypto/sha256"
	"encoding/hex"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// MaxReply bounds the bytes of one reply: a lookup's answer, a page of a
// listing. It is what a gRPC client receives by default (4 MiB), less
// 64 KiB for what may wrap the reply (a session's reply, a stream's
// response), so that every reply reaches a client that did not raise its
// receive limit. A listing past it comes in pages; an answer past it is
// refused ResourceExhausted, naming its size.
const MaxReply = 4<<20 - 64<<10

// FieldSize is what m takes in a reply as the message field numbered
// field: its tag, its length and its encoding. A page adds its items'
// FieldSizes to keep within MaxReply.
func FieldSize(field protowire.Number, m proto.Message) int {
	return protowire.SizeTag(field) + protowire.SizeBytes(proto.Size(m))
}

// Ref returns r's wire form.
func Ref(r djinn.Ref) *djinnpb.Ref {
	return &djinnpb.Ref{Endpoint: r.Endpoint, ServiceId: r.Service[:], ObjectId: r.Object[:]}
}

// RefFrom reads a wire reference named what in errors: both ids must be
// 16 bytes; the endpoint is not checked (see RefTo).
func RefFrom(what string, r *djinnpb.Ref) (djinn.Ref, error) {
	if r == nil {
		return djinn.Ref{}, djinn.Errorf(djinn.InvalidArgument, "%s: missing", what)
	}
	svc, err := djinn.IDFromBytes(what+" service id", r.GetServiceId())
	if err != nil {
		return djinn.Ref{}, err
	}
	obj, err := djinn.IDFromBytes(what+" object id", r.GetObjectId())
	if err != nil {
		return djinn.Ref{}, err
	}
	return djinn.Ref{Endpoint: r.GetEndpoint(), Service: svc, Object: obj}, nil
}

// RefTo reads a wire reference handed in to call: RefFrom, and an
// endpoint that can be dialled (djinn.CheckEndpoint).
func RefTo(what string, r *djinnpb.Ref) (djinn.Ref, error) {
	ref, err := RefFrom(what, r)
	if err != nil {
		return djinn.Ref{}, err
	}
	if err := djinn.CheckEndpoint(ref.Endpoint); err != nil {
		return djinn.Ref{}, djinn.Errorf(djinn.InvalidArgument, "%s: %v", what, err)
	}
	return ref, nil
}

// RefStored reads a wire reference read back from the replicated log or
// a snapshot, to call: RefFrom, and an endpoint as
// djinn.CheckStoredEndpoint takes it — one accepted before endpoints were
// checked strictly is still taken, never refused as the entry replays.
// A reference handed in now takes RefTo.
func RefStored(what string, r *djinnpb.Ref) (djinn.Ref, error) {
	ref, err := RefFrom(what, r)
	if err != nil {
		return djinn.Ref{}, err
	}
	if err := djinn.CheckStoredEndpoint(ref.Endpoint); err != nil {
		return djinn.Ref{}, djinn.Errorf(djinn.InvalidArgument, "%s: %v", what, err)
	}
	return ref, nil
}

// Nanos is an expiration as the log records it: unix nanoseconds, or
// djinn.Forever for one at or past the end of time.
func Nanos(t time.Time) int64 {
	if !t.Before(djinn.EndOfTime) {
		return int64(djinn.Forever)
	}
	return t.UnixNano()
}

// RecordSize bounds the bytes of one snapshot record that carries a piece
// of a service's encoded state.
const RecordSize = 8 << 20

// Records cuts a service's encoded state b into snapshot records, made by
// mk from each piece (Chunks) and whether it is the last.
func Records[R any](b []byte, mk func(piece []byte, last bool) R) []R {
	cs := Chunks(b)
	out := make([]R, len(cs))
	for i, c := range cs {
		out[i] = mk(c, i == len(cs)-1)
	}
	return out
}

// Chunks cuts b into pieces of at most RecordSize bytes, at least one.
func Chunks(b []byte) [][]byte {
	var out [][]byte
	for len(b) > RecordSize {
		out = append(out, b[:RecordSize])
		b = b[RecordSize:]
	}
	return append(out, b)
}

// TxnSecret reads a transaction's secret from the wire: 16 bytes, or none
// (the zero secret, which names only a transaction from before
// transactions had secrets).
func TxnSecret(b []byte) (djinn.ID, error) {
	var s djinn.ID
	switch len(b) {
	case 0:
	case len(s):
		copy(s[:], b)
	default:
		return s, djinn.Errorf(djinn.InvalidArgument, "transaction secret: %d bytes, want 16", len(b))
	}
	return s, nil
}

// TxnSecretBytes is a transaction's secret on the wire: none for the zero
// secret.
func TxnSecretBytes(s djinn.ID) []byte {
	if s.IsZero() {
		return nil
	}
	return s[:]
}

// Fingerprint names a capability — a lease cookie, or an id that is one
// (a mailbox registration's, a renewal or lock set's) — without giving it
// away: the first 8 bytes of its SHA-256, in hex. The console and the
// server's logs name capabilities by it, alike, so that an operator
// matches a log line to the console's row; neither holds what would let
// its reader use the capability.
func Fingerprint(id djinn.ID) string {
	sum := sha256.Sum256(id[:])
	return hex.EncodeToString(sum[:8])
}
