package main

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
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/internal/batch"
	"github.com/djinn-go/djinn/internal/grpcerr"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// The bench landlord is the renewal bench's judge: these tests pin the
// rules it judges by.

func TestBenchLandlordTerms(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newBenchLandlord(djinn.Ref{Service: djinn.NewID(), Object: djinn.NewID()}, time.Minute)
		tests := []struct {
			name string
			ask  time.Duration
			want time.Duration
			err  error
		}{
			{"shorter than max is granted", 30 * time.Second, 30 * time.Second, nil},
			{"max is granted", time.Minute, time.Minute, nil},
			{"longer than max is capped", time.Hour, time.Minute, nil},
			{"forever is capped", djinn.Forever, time.Minute, nil},
			{"any is max", djinn.Any, time.Minute, nil},
			{"zero is invalid", 0, 0, djinn.ErrInvalidArgument},
			{"negative is invalid", -5 * time.Second, 0, djinn.ErrInvalidArgument},
		}
		for _, tt := range tests {
			cookie, _ := l.grant(time.Now())
			resp, err := l.Renew(t.Context(), &djinnpb.RenewRequest{Cookie: cookie[:], DurationNanos: int64(tt.ask)})
			if tt.err != nil {
				if !errors.Is(err, tt.err) {
					t.Errorf("%s: asked %s, got %v, want %v", tt.name, tt.ask, err, tt.err)
				}
				continue
			}
			if err != nil || time.Duration(resp.GetGrantedNanos()) != tt.want {
				t.Errorf("%s: asked %s, granted %s (%v), want %s", tt.name, tt.ask, time.Duration(resp.GetGrantedNanos()), err, tt.want)
			}
		}
		if c := l.counts(); c.Renewed != 5 || c.Lapses != 0 {
			t.Errorf("counts %+v: want 5 renewed, no lapse", c)
		}
	})
}

func TestBenchLandlordLapse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newBenchLandlord(djinn.Ref{Service: djinn.NewID(), Object: djinn.NewID()}, time.Minute)
		cookie, _ := l.grant(time.Now())
		renew := func() error {
			_, err := l.Renew(t.Context(), &djinnpb.RenewRequest{Cookie: cookie[:], DurationNanos: int64(djinn.Any)})
			return err
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
		if c := l.counts(); c.Lapses != 1 || c.Unknown != 1 || c.Renewed != 1 || c.Live != 0 {
			t.Errorf("counts %+v: want 1 lapse, 1 unknown, 1 renewed, none live", c)
		}

		// A lease nobody renews is a lapse too, found by the sweep.
		l.grant(time.Now())
		time.Sleep(30 * time.Second)
		if live := l.sweep(time.Now()); live != 1 {
			t.Errorf("sweep before expiry: %d live, want 1", live)
		}
		time.Sleep(30 * time.Second)
		if live := l.sweep(time.Now()); live != 0 || l.counts().Lapses != 2 {
			t.Errorf("sweep at expiry: %d live, %d lapses; want 0 and 2", live, l.counts().Lapses)
		}
	})
}

func TestBenchLandlordRenewAll(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newBenchLandlord(djinn.Ref{Service: djinn.NewID(), Object: djinn.NewID()}, time.Minute)
		old, _ := l.grant(time.Now())
		time.Sleep(time.Minute)
		a, _ := l.grant(time.Now())
		b, _ := l.grant(time.Now())
		req := &djinnpb.RenewAllRequest{Cookies: batch.PackCookies([]djinn.ID{a, old, b}),
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
		if c := l.counts(); c.RenewAllCalls != 1 || c.Renewed != 2 || c.Lapses != 1 {
			t.Errorf("counts %+v: want 1 call, 2 renewed, 1 lapse", c)
		}

		for _, bad := range []*djinnpb.RenewAllRequest{
			{Cookies: make([]byte, 17), DurationNanos: []int64{1}},
			{Cookies: a[:], DurationNanos: []int64{1, 2}},
		} {
			if _, err := l.RenewAll(t.Context(), bad); !errors.Is(err, djinn.ErrInvalidArgument) {
				t.Errorf("%d bytes of cookies, %d durations: %v, want invalid argument", len(bad.Cookies), len(bad.DurationNanos), err)
			}
		}
	})
}

// TestBenchLandlordWire: over gRPC the landlord's errors carry their djinn
// kinds, as the renewal service expects of any landlord.
func TestBenchLandlordWire(t *testing.T) {
	l, err := startBenchLandlord(time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer l.close()
	cc, err := grpc.NewClient(l.ref.Endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
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
	cookie, _ := l.grant(time.Now())
	resp, err := ll.Renew(ctx, &djinnpb.RenewRequest{Cookie: cookie[:], DurationNanos: int64(djinn.Forever)})
	if err != nil || resp.GetGrantedNanos() != int64(time.Minute) {
		t.Errorf("renewal: %v %v, want 1m granted", resp, err)
	}
	if _, err := ll.Cancel(ctx, &djinnpb.CancelRequest{Cookie: cookie[:]}); err != nil {
		t.Errorf("cancel: %v", err)
	}
	if c := l.counts(); c.Cancelled != 1 || c.Live != 0 || c.Lapses != 0 {
		t.Errorf("counts %+v: want 1 cancelled, none live, no lapse", c)
	}
}

// TestRenewalBenchCountsEvents: every renewal failure event counts, and
// the first one's error is kept for the report.
func TestRenewalBenchCountsEvents(t *testing.T) {
	var b renewalBench
	payload, err := anypb.New(&djinnpb.RenewalFailure{Error: grpcerr.ToProto(djinn.Errorf(djinn.UnknownLease, "lease 12: gone"))})
	if err != nil {
		t.Fatal(err)
	}
	failure := int64(djinnpb.RenewalEventID_RENEWAL_EVENT_ID_RENEWAL_FAILURE)
	for _, ev := range []*client.RemoteEvent{
		{ID: failure, Seq: 1, Payload: payload},
		{ID: failure, Seq: 2},
		{ID: int64(djinnpb.RenewalEventID_RENEWAL_EVENT_ID_EXPIRATION_WARNING), Seq: 1},
	} {
		if err := b.notify(t.Context(), ev); err != nil {
			t.Fatal(err)
		}
	}
	if b.failures.Load() != 2 || b.warnings.Load() != 1 {
		t.Errorf("%d failures, %d warnings: want 2 and 1", b.failures.Load(), b.warnings.Load())
	}
	if first, _ := b.firstErr.Load().(string); first != "UNKNOWN_LEASE: lease 12: gone" {
		t.Errorf("first failure %q", first)
	}
}
