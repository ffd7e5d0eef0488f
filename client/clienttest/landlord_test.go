package clienttest

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/batch"
	"github.com/djinn-go/djinn/internal/grpcerr"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// The landlord judges the renewal service in its tests and in the renewal
// bench: these tests pin the rules it judges by.

func cookieOf(pb *djinnpb.Lease) djinn.ID { return djinn.ID(pb.GetCookie()) }

func TestLandlordTerms(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := NewLandlord(time.Minute, time.Minute)
		tests := []struct {
			name string
			ask  time.Duration
			want time.Duration
			err  error
		}{
			{"LE.2.2 shorter than max is granted", 30 * time.Second, 30 * time.Second, nil},
			{"LE.2.2 max is granted", time.Minute, time.Minute, nil},
			{"LE.2.2 longer than max is capped", time.Hour, time.Minute, nil},
			{"LE.2.2 forever is capped", djinn.Forever, time.Minute, nil},
			{"LE.2.2 any is the default", djinn.Any, time.Minute, nil},
			{"LE.2.1 a renewed lease is like any other: zero is invalid, as for a grant", 0, 0, djinn.ErrInvalidArgument},
			{"LE.2.2 negative is invalid", -5 * time.Second, 0, djinn.ErrInvalidArgument},
		}
		for _, tt := range tests {
			pb, err := l.Grant(djinn.Any)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := l.Renew(t.Context(), &djinnpb.RenewRequest{Cookie: pb.GetCookie(), DurationNanos: int64(tt.ask)})
			if tt.err != nil {
				if !errors.Is(grpcerr.FromStatus(err), tt.err) {
					t.Errorf("%s: asked %s, got %v, want %v", tt.name, tt.ask, err, tt.err)
				}
				continue
			}
			if err != nil || time.Duration(resp.GetGrantedNanos()) != tt.want {
				t.Errorf("%s: asked %s, granted %s (%v), want %s", tt.name, tt.ask, time.Duration(resp.GetGrantedNanos()), err, tt.want)
			}
		}
		if c := l.Counts(); c.Renewed != 5 || c.Lapses != 0 || c.RenewCalls != 7 {
			t.Errorf("counts %+v: want 7 calls, 5 renewed, no lapse", c)
		}
	})
}

func TestLandlordLapse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := NewLandlord(time.Minute, time.Minute)
		pb, _ := l.Grant(djinn.Any)
		renew := func() error {
			_, err := l.Renew(t.Context(), &djinnpb.RenewRequest{Cookie: pb.GetCookie(), DurationNanos: int64(djinn.Any)})
			return grpcerr.FromStatus(err)
		}
		time.Sleep(time.Minute - time.Nanosecond)
		if err := renew(); err != nil {
			t.Fatalf("renewal a nanosecond before expiry: %v", err)
		}
		time.Sleep(time.Minute) // the renewal's term, to the nanosecond: expired
		if err := renew(); !errors.Is(err, djinn.ErrUnknownLease) {
			t.Fatalf("renewal at expiry: %v, want unknown lease", err)
		}
		if err := renew(); !errors.Is(err, djinn.ErrUnknownLease) {
			t.Fatalf("renewal after a lapse: %v, want unknown lease", err)
		}
		if c := l.Counts(); c.Lapses != 1 || c.Unknown != 1 || c.Renewed != 1 || c.Live != 0 {
			t.Errorf("counts %+v: want 1 lapse, 1 unknown, 1 renewed, none live", c)
		}
		if !l.Known(cookieOf(pb)) {
			t.Error("a lapsed lease is forgotten: want it known until cancelled")
		}

		// A lease nobody renews is a lapse too, found by the sweep, once.
		l.Grant(djinn.Any)
		time.Sleep(30 * time.Second)
		if live := l.Sweep(); live != 1 {
			t.Errorf("sweep before expiry: %d live, want 1", live)
		}
		time.Sleep(30 * time.Second)
		if live := l.Sweep(); live != 0 || l.Counts().Lapses != 2 {
			t.Errorf("sweep at expiry: %d live, %d lapses; want 0 and 2", live, l.Counts().Lapses)
		}
		if l.Sweep(); l.Counts().Lapses != 2 {
			t.Errorf("a second sweep counted the lapse again: %d lapses", l.Counts().Lapses)
		}
	})
}

func TestLandlordRenewAll(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := NewLandlord(time.Minute, time.Minute)
		old, _ := l.Grant(djinn.Any)
		time.Sleep(time.Minute)
		a, _ := l.Grant(djinn.Any)
		b, _ := l.Grant(djinn.Any)
		req := &djinnpb.RenewAllRequest{Cookies: batch.PackCookies([]djinn.ID{cookieOf(a), cookieOf(old), cookieOf(b)}),
			DurationNanos: []int64{int64(djinn.Any), int64(time.Minute), int64(10 * time.Second)}}
		resp, err := l.RenewAll(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		g := resp.GetGrantedNanos()
		if len(g) != 3 || g[0] != int64(time.Minute) || g[1] != 0 || g[2] != int64(10*time.Second) {
			t.Errorf("granted %v: want [1m 0 10s]", g)
		}
		errs, err := batch.ErrorsFrom(3, resp.GetErrors())
		if err != nil || errs[0] != nil || !errors.Is(errs[1], djinn.ErrUnknownLease) || errs[2] != nil {
			t.Errorf("errors %v (%v): want only the expired lease's, unknown lease", errs, err)
		}
		if c := l.Counts(); c.RenewAllCalls != 1 || c.Renewed != 2 || c.Lapses != 1 {
			t.Errorf("counts %+v: want 1 call, 2 renewed, 1 lapse", c)
		}
		for _, bad := range []*djinnpb.RenewAllRequest{
			{Cookies: make([]byte, 17), DurationNanos: []int64{1}},
			{Cookies: a.GetCookie(), DurationNanos: []int64{1, 2}},
		} {
			if _, err := l.RenewAll(t.Context(), bad); !errors.Is(grpcerr.FromStatus(err), djinn.ErrInvalidArgument) {
				t.Errorf("%d bytes of cookies, %d durations: %v, want invalid argument", len(bad.Cookies), len(bad.DurationNanos), err)
			}
		}
	})
}

// TestLandlordHold: a held call waits before acting; its context ending
// fails it as unavailable with nothing changed; release lets the others go.
func TestLandlordHold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := NewLandlord(time.Minute, time.Minute)
		pb, _ := l.Grant(djinn.Any)
		release := l.Hold()
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 2)
		go func() {
			_, err := l.Renew(ctx, &djinnpb.RenewRequest{Cookie: pb.GetCookie(), DurationNanos: int64(time.Minute)})
			done <- grpcerr.FromStatus(err)
		}()
		go func() {
			_, err := l.Renew(t.Context(), &djinnpb.RenewRequest{Cookie: pb.GetCookie(), DurationNanos: int64(30 * time.Second)})
			done <- err
		}()
		synctest.Wait()
		if n := l.Waiting(); n != 2 {
			t.Fatalf("%d calls waiting, want 2", n)
		}
		cancel()
		if err := <-done; !errors.Is(err, djinn.ErrUnavailable) {
			t.Errorf("held call whose context ended: %v, want unavailable", err)
		}
		release()
		if err := <-done; err != nil {
			t.Errorf("released call: %v", err)
		}
		if exp, _ := l.Expiration(cookieOf(pb)); !exp.Equal(time.Now().Add(30 * time.Second)) {
			t.Errorf("expires %v, want only the released renewal applied", exp)
		}
	})
}

// TestLandlordWire: over gRPC the landlord's errors carry their djinn
// kinds, as the renewal service expects of any landlord, and RenewStream
// answers each request with its own error.
func TestLandlordWire(t *testing.T) {
	l := NewLandlord(time.Minute, time.Minute)
	stop, err := l.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	cc, err := grpc.NewClient(l.Ref().Endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ll := djinnpb.NewLandlordClient(cc)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	_, err = ll.RenewAll(ctx, &djinnpb.RenewAllRequest{Cookies: make([]byte, 20), DurationNanos: []int64{1}})
	if status.Code(err) != codes.InvalidArgument || !errors.Is(grpcerr.FromStatus(err), djinn.ErrInvalidArgument) {
		t.Errorf("20 bytes of cookies: %v, want invalid argument", err)
	}
	never := djinn.NewID()
	_, err = ll.Renew(ctx, &djinnpb.RenewRequest{Cookie: never[:], DurationNanos: int64(djinn.Any)})
	if status.Code(err) != codes.NotFound || !errors.Is(grpcerr.FromStatus(err), djinn.ErrUnknownLease) {
		t.Errorf("renewal of a lease never granted: %v, want unknown lease", err)
	}
	pb, _ := l.Grant(djinn.Any)
	resp, err := ll.Renew(ctx, &djinnpb.RenewRequest{Cookie: pb.GetCookie(), DurationNanos: int64(djinn.Forever)})
	if err != nil || resp.GetGrantedNanos() != int64(time.Minute) {
		t.Errorf("renewal: %v %v, want 1m granted", resp, err)
	}
	stream, err := ll.RenewStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range [][]byte{pb.GetCookie(), never[:]} {
		if err := stream.Send(&djinnpb.RenewRequest{Cookie: c, DurationNanos: int64(time.Minute)}); err != nil {
			t.Fatal(err)
		}
	}
	if r, err := stream.Recv(); err != nil || r.GetError() != nil || r.GetGrantedNanos() != int64(time.Minute) {
		t.Errorf("stream renewal: %v %v, want 1m granted", r, err)
	}
	if r, err := stream.Recv(); err != nil || r.GetError().GetKind() != string(djinn.UnknownLease) {
		t.Errorf("stream renewal of a lease never granted: %v %v, want unknown lease", r, err)
	}
	if _, err := ll.Cancel(ctx, &djinnpb.CancelRequest{Cookie: pb.GetCookie()}); err != nil {
		t.Errorf("cancel: %v", err)
	}
	if c := l.Counts(); c.Cancelled != 1 || c.Live != 0 || c.Lapses != 0 || c.StreamRenewals != 2 {
		t.Errorf("counts %+v: want 1 cancelled, none live, no lapse, 2 stream renewals", c)
	}
}
