package client

import (
	"encoding/base64"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// TokenPrefix starts every printable lease token.
const TokenPrefix = "djinn-lease:"

// MaxTokenLen bounds the length of a token ParseToken accepts.
const MaxTokenLen = 4096

var tokenEncoding = base64.RawURLEncoding.Strict()

// Token returns the lease's printable form: TokenPrefix, then the unpadded
// base64url encoding of the lease's wire form in its serial format (the time
// left now, or the expiration instant). Anyone holding the token can renew
// or cancel the lease.
//
// The token names its landlord by reference, and a reference to a cluster
// service names the cluster by its service id: a client that follows the
// cluster (dialled to any member, or having reached one) renews the lease
// at whichever member serves, even when the member that granted it, whose
// endpoint the token carries, is gone. So the token carries no member list
// and its format is the same as before clusters were followed: every token
// ever printed still parses.
func (l *Lease) Token() string { return l.token(time.Now()) }

func (l *Lease) token(now time.Time) string {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(l.Proto(now))
	if err != nil {
		// A message of scalars and bytes always marshals.
		panic("client: marshal lease: " + err.Error())
	}
	return TokenPrefix + tokenEncoding.EncodeToString(b)
}

// ParseToken parses a token made by Token. A duration token's lease expires
// the encoded time left after now. Any input is safe: bad tokens get an
// error of kind djinn.InvalidArgument that says what is wrong.
func ParseToken(s string) (*Lease, error) { return parseToken(s, time.Now()) }

func parseToken(s string, now time.Time) (*Lease, error) {
	if len(s) > MaxTokenLen {
		return nil, djinn.Errorf(djinn.InvalidArgument, "lease token of %d bytes: longer than %d", len(s), MaxTokenLen)
	}
	rest, ok := strings.CutPrefix(s, TokenPrefix)
	if !ok {
		return nil, djinn.Errorf(djinn.InvalidArgument, "lease token %q: want %s prefix", abbrev(s), TokenPrefix)
	}
	b, err := tokenEncoding.DecodeString(rest)
	if err != nil {
		return nil, djinn.Errorf(djinn.InvalidArgument, "lease token %q: not unpadded base64url: %v", abbrev(s), err)
	}
	var pb djinnpb.Lease
	if err := proto.Unmarshal(b, &pb); err != nil {
		return nil, djinn.Errorf(djinn.InvalidArgument, "lease token %q: not a lease: %v", abbrev(s), err)
	}
	l, err := LeaseFromProto(&pb, now)
	if err != nil {
		return nil, djinn.Errorf(djinn.InvalidArgument, "lease token %q: %v", abbrev(s), err)
	}
	l.granted = -1 // this program was granted nothing: Granted does not know
	return l, nil
}

// abbrev shortens untrusted input quoted in an error.
func abbrev(s string) string {
	const max = 48
	if len(s) <= max {
		return s
	}
	return s[:max] + "..."
}
