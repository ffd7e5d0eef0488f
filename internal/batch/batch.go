// Package batch encodes the compact bulk forms of the Landlord service:
// cookies back to back in one byte string, and sparse per-element errors.
// Bulk renewal is djinn's hottest path, so these forms cost no allocation
// per lease on either side.
package batch

import (
	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/grpcerr"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// MaxLeases bounds the leases in one batch call.
const MaxLeases = 65536

// PackCookies puts cookies back to back.
func PackCookies(ids []djinn.ID) []byte {
	b := make([]byte, 0, 16*len(ids))
	for _, id := range ids {
		b = append(b, id[:]...)
	}
	return b
}

// Cookies splits packed cookies, checking the length and the bound.
func Cookies(b []byte) ([]djinn.ID, error) {
	if len(b)%16 != 0 {
		return nil, djinn.Errorf(djinn.InvalidArgument, "cookies: %d bytes is not a whole number of 16-byte cookies", len(b))
	}
	n := len(b) / 16
	if n > MaxLeases {
		return nil, djinn.Errorf(djinn.InvalidArgument, "batch of %d leases: at most %d", n, MaxLeases)
	}
	out := make([]djinn.ID, n)
	for i := range out {
		copy(out[i][:], b[16*i:])
	}
	return out, nil
}

// Errors converts per-element errors (nil for success) to the sparse form.
func Errors(errs []error) []*djinnpb.IndexedError {
	var out []*djinnpb.IndexedError
	for i, err := range errs {
		if err != nil {
			out = append(out, &djinnpb.IndexedError{Index: uint32(i), Error: grpcerr.ToProto(err)})
		}
	}
	return out
}

// ErrorsFrom expands the sparse form to one error (or nil) per element of
// a batch of n; an index out of range is an error of the whole answer.
func ErrorsFrom(n int, sparse []*djinnpb.IndexedError) ([]error, error) {
	out := make([]error, n)
	for _, e := range sparse {
		i := int(e.GetIndex())
		if i >= n {
			return nil, djinn.Errorf(djinn.Internal, "batch answer names element %d of %d", i, n)
		}
		out[i] = grpcerr.FromProto(e.GetError())
		if out[i] == nil {
			out[i] = djinn.Errorf(djinn.Internal, "batch element %d failed without an error", i)
		}
	}
	return out, nil
}
