package client

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// SerialFormat is how a lease writes its expiration when it is encoded
// (LE.2.2's DURATION and ABSOLUTE).
type SerialFormat int32

// The serial formats.
const (
	// SerialDuration writes the time left at encoding: right between
	// machines whose clocks are not synchronized. It is the default.
	SerialDuration SerialFormat = SerialFormat(djinnpb.SerialFormat_SERIAL_FORMAT_DURATION)
	// SerialAbsolute writes the expiration instant: right for storing a
	// lease to be read back on the same machine.
	SerialAbsolute SerialFormat = SerialFormat(djinnpb.SerialFormat_SERIAL_FORMAT_ABSOLUTE)
)

func (f SerialFormat) String() string {
	switch f {
	case SerialDuration:
		return "duration"
	case SerialAbsolute:
		return "absolute"
	}
	return fmt.Sprintf("SerialFormat(%d)", int32(f))
}

// Lease is a lease held by this program (LE.2.2): who granted it (the
// landlord's reference), the cookie that names it there, and when it
// expires by the local clock.
//
// Leases are used by pointer. Like Jini's Lease.renew, Renew changes the
// lease's expiration in place, so every holder of the *Lease (a LeaseMap, a
// Renewer, the program) sees the renewed expiration; a mutex makes that safe
// for concurrent use. Two *Lease values for the same landlord and cookie are
// the same lease (Equal), and LeaseMap and Renewer treat them so.
//
// The cookie is a capability: anyone who has it can renew or cancel the
// lease. String does not print it; Token does.
type Lease struct {
	landlord djinn.Ref
	cookie   djinn.ID

	mu         sync.Mutex
	expiration time.Time     // guarded by mu
	sent       time.Time     // guarded by mu: when the request that set expiration was sent
	granted    time.Duration // guarded by mu: what the landlord granted at the grant or last renewal; -1: not known
	format     SerialFormat  // guarded by mu
}

// NewLease returns a lease granted by landlord under cookie that expires at
// expiration (djinn.EndOfTime for a Forever lease), in the duration serial
// format. Servers use it; clients get leases from LeaseFromProto or
// ParseToken.
func NewLease(landlord djinn.Ref, cookie djinn.ID, expiration time.Time) *Lease {
	return &Lease{landlord: landlord, cookie: cookie, expiration: expiration, format: SerialDuration, granted: -1}
}

// LeaseFromProto converts a lease received in the answer to a request sent
// at sent. In the duration format the lease expires at sent + duration, not
// at the time the answer arrived (LE.2.3), so the holder never believes it
// has more time than the grantor gave; Forever stays Forever
// (djinn.EndOfTime). The landlord endpoint, the 16-byte cookie, the format
// and the time are checked.
func LeaseFromProto(pb *djinnpb.Lease, sent time.Time) (*Lease, error) {
	if pb == nil {
		return nil, djinn.Errorf(djinn.InvalidArgument, "lease: missing")
	}
	if pb.GetLandlord() == nil {
		return nil, djinn.Errorf(djinn.InvalidArgument, "lease landlord: missing")
	}
	if err := djinn.CheckStoredEndpoint(pb.GetLandlord().GetEndpoint()); err != nil {
		return nil, djinn.Errorf(djinn.InvalidArgument, "lease landlord: %v", err)
	}
	landlord, err := RefFromProto("lease landlord", pb.GetLandlord())
	if err != nil {
		return nil, err
	}
	cookie, err := djinn.IDFromBytes("lease cookie", pb.GetCookie())
	if err != nil {
		return nil, err
	}
	l := &Lease{landlord: landlord, cookie: cookie, sent: sent, granted: -1}
	switch f := pb.GetFormat(); f {
	case djinnpb.SerialFormat_SERIAL_FORMAT_UNSPECIFIED, djinnpb.SerialFormat_SERIAL_FORMAT_DURATION:
		d := time.Duration(pb.GetDurationNanos())
		if d < 0 {
			return nil, djinn.Errorf(djinn.InvalidArgument, "lease duration %s: negative", d)
		}
		l.format = SerialDuration
		l.expiration, l.granted = djinn.AddDuration(sent, d), d
	case djinnpb.SerialFormat_SERIAL_FORMAT_ABSOLUTE:
		n := pb.GetExpirationUnixNanos()
		if n < 0 {
			return nil, djinn.Errorf(djinn.InvalidArgument, "lease expiration %d: before 1970", n)
		}
		l.format = SerialAbsolute
		l.expiration = fromUnixNanos(n)
	default:
		return nil, djinn.Errorf(djinn.InvalidArgument, "lease serial format %d: want duration (1) or absolute (2)", int32(f))
	}
	return l, nil
}

func fromUnixNanos(n int64) time.Time {
	if n == math.MaxInt64 {
		return djinn.EndOfTime
	}
	return time.Unix(0, n)
}

func toUnixNanos(t time.Time) int64 {
	switch {
	case !t.Before(djinn.EndOfTime):
		return math.MaxInt64
	case t.Before(time.Unix(0, 0)):
		return 0
	}
	return t.UnixNano()
}

// Proto returns the wire form of the lease at time now, in its serial
// format: the time left at now (duration), or the expiration instant
// (absolute).
func (l *Lease) Proto(now time.Time) *djinnpb.Lease {
	exp, format := l.Expiration(), l.SerialFormat()
	pb := &djinnpb.Lease{
		Landlord: RefToProto(l.landlord),
		Cookie:   l.cookie[:],
		Format:   djinnpb.SerialFormat(format),
	}
	if format == SerialAbsolute {
		pb.ExpirationUnixNanos = toUnixNanos(exp)
	} else {
		pb.DurationNanos = int64(djinn.Remaining(exp, now))
	}
	return pb
}

// Landlord returns the reference of the landlord that granted the lease.
func (l *Lease) Landlord() djinn.Ref { return l.landlord }

// Cookie returns the lease's cookie: the capability that names it at its
// landlord.
func (l *Lease) Cookie() djinn.ID { return l.cookie }

// Expiration returns when the lease expires unless renewed, by the local
// clock; djinn.EndOfTime for a Forever lease.
func (l *Lease) Expiration() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.expiration
}

// Granted returns the duration the landlord granted at the lease's grant,
// or at its last renewal by this program (djinn.Forever for a Forever
// lease), and false for a lease this program did not get from its landlord
// (a parsed token, NewLease).
func (l *Lease) Granted() (time.Duration, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.granted < 0 {
		return 0, false
	}
	return l.granted, true
}

// SerialFormat returns the format Token and Proto use.
func (l *Lease) SerialFormat() SerialFormat {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.format
}

// SetSerialFormat sets the format Token and Proto use.
func (l *Lease) SetSerialFormat(f SerialFormat) error {
	if f != SerialDuration && f != SerialAbsolute {
		return djinn.Errorf(djinn.InvalidArgument, "lease serial format %d: want duration (1) or absolute (2)", int32(f))
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.format = f
	return nil
}

// CanBatch reports whether l and o can be renewed or cancelled in one call
// (LE.2.2): they must have the same landlord.
func (l *Lease) CanBatch(o *Lease) bool {
	return o != nil && l.landlord.Equal(o.landlord)
}

// Equal reports whether l and o are the same lease: same landlord, same
// cookie.
func (l *Lease) Equal(o *Lease) bool {
	return o != nil && l.cookie == o.cookie && l.landlord.Equal(o.landlord)
}

// leaseKey is a lease's identity, for maps.
type leaseKey struct {
	landlord [32]byte
	cookie   djinn.ID
}

func (l *Lease) key() leaseKey { return leaseKey{l.landlord.Key(), l.cookie} }

// String describes the lease without its cookie: a fingerprint stands in
// for it.
func (l *Lease) String() string {
	return fmt.Sprintf("lease %s at %s expiring %s", l.fingerprint(), l.landlord.Endpoint,
		formatExpiration(l.Expiration()))
}

func (l *Lease) fingerprint() string {
	sum := sha256.Sum256(l.cookie[:])
	return hex.EncodeToString(sum[:4])
}

func formatExpiration(t time.Time) string {
	if !t.Before(djinn.EndOfTime) {
		return "never"
	}
	return t.Round(0).Format(time.RFC3339Nano)
}

// renewed records a renewal granted g in answer to a request sent at sent.
// An answer to an older request than the one that set the expiration does
// not undo it.
func (l *Lease) renewed(sent time.Time, g time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if sent.Before(l.sent) {
		return
	}
	l.sent, l.granted = sent, g
	l.expiration = djinn.AddDuration(sent, g)
}

// checkRenewDuration enforces renew's argument rule, a new lease's: a
// duration is positive, Forever or Any (a renewed lease is like any other,
// LE.2.1).
func checkRenewDuration(d time.Duration) error {
	if d > 0 || d == djinn.Any {
		return nil
	}
	return djinn.Errorf(djinn.InvalidArgument, "lease duration %s: must be positive, Forever or Any (to end a lease, cancel it)", djinn.FormatDuration(d))
}

// checkGranted rejects a granted duration no landlord may return.
func checkGranted(landlord djinn.Ref, g time.Duration) error {
	if g < 0 {
		return djinn.Errorf(djinn.Internal, "landlord %s granted %s: negative", landlord.Endpoint, g)
	}
	return nil
}

// landlordDialer gives the Landlord client for a landlord: the seam between
// the lease machinery and the network.
type landlordDialer func(landlord djinn.Ref) (djinnpb.LandlordClient, error)

// dialLandlord reaches landlords through c: a landlord of a cluster c
// follows at whichever member serves, so a lease outlives the member that
// granted it.
func dialLandlord(c Connector) landlordDialer {
	return func(landlord djinn.Ref) (djinnpb.LandlordClient, error) {
		if c == nil {
			return nil, djinn.Errorf(djinn.InvalidArgument, "connector: missing")
		}
		cc, err := ConnFor(c, landlord)
		if err != nil {
			return nil, err
		}
		return djinnpb.NewLandlordClient(cc), nil
	}
}

// Renew asks the landlord to renew the lease for d from now (LE.2.2): d is
// positive, djinn.Forever or djinn.Any, and the landlord may grant less.
// On success the lease's expiration becomes the time the request was sent
// plus the granted duration; on failure it is unchanged. Errors carry the
// landlord's kind: djinn.ErrUnknownLease, djinn.ErrLeaseDenied, or
// djinn.ErrUnavailable when the landlord could not be reached.
func (l *Lease) Renew(ctx context.Context, c Connector, d time.Duration) error {
	return l.renew(ctx, dialLandlord(c), d)
}

func (l *Lease) renew(ctx context.Context, dial landlordDialer, d time.Duration) error {
	if err := checkRenewDuration(d); err != nil {
		return err
	}
	lc, err := dial(l.landlord)
	if err != nil {
		return err
	}
	sent := time.Now()
	resp, err := lc.Renew(ctx, &djinnpb.RenewRequest{Cookie: l.cookie[:], DurationNanos: int64(d)})
	if err != nil {
		return fromRPC(err)
	}
	g := time.Duration(resp.GetGrantedNanos())
	if err := checkGranted(l.landlord, g); err != nil {
		return err
	}
	l.renewed(sent, g)
	return nil
}

// Refresh asks the landlord how long the lease has left and sets its
// expiration from the answer: the time the request was sent plus the time
// left (LE.2.3). It returns what the lease covers, as the landlord names
// it ("mailbox registration"; empty when it does not say). A lease the
// landlord no longer knows (expired, cancelled) is djinn.ErrUnknownLease.
func (l *Lease) Refresh(ctx context.Context, c Connector) (string, error) {
	return l.refresh(ctx, dialLandlord(c))
}

func (l *Lease) refresh(ctx context.Context, dial landlordDialer) (string, error) {
	lc, err := dial(l.landlord)
	if err != nil {
		return "", err
	}
	sent := time.Now()
	resp, err := lc.Remaining(ctx, &djinnpb.RemainingRequest{Cookie: l.cookie[:]})
	if err != nil {
		return "", fromRPC(err)
	}
	left := time.Duration(resp.GetRemainingNanos())
	if left < 0 {
		return "", djinn.Errorf(djinn.Internal, "landlord %s says lease has %s left: negative", l.landlord.Endpoint, left)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !sent.Before(l.sent) {
		l.sent, l.expiration = sent, djinn.AddDuration(sent, left)
	}
	return resp.GetCovers(), nil
}

// Cancel cancels the lease (LE.2.2): the landlord frees what it guards and
// takes no further action for it. Cancelling a lease the landlord does not
// know (expired, cancelled) fails with djinn.ErrUnknownLease.
func (l *Lease) Cancel(ctx context.Context, c Connector) error {
	lc, err := dialLandlord(c)(l.landlord)
	if err != nil {
		return err
	}
	_, err = lc.Cancel(ctx, &djinnpb.CancelRequest{Cookie: l.cookie[:]})
	return fromRPC(err)
}
