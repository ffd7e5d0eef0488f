package client

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client/clienttest"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

func wireLease(mod func(*djinnpb.Lease)) *djinnpb.Lease {
	svc, obj, cookie := djinn.NewID(), djinn.NewID(), djinn.NewID()
	pb := &djinnpb.Lease{
		Landlord:      &djinnpb.Ref{Endpoint: "127.0.0.1:4160", ServiceId: svc[:], ObjectId: obj[:]},
		Cookie:        cookie[:],
		DurationNanos: int64(time.Minute),
		Format:        djinnpb.SerialFormat_SERIAL_FORMAT_DURATION,
	}
	if mod != nil {
		mod(pb)
	}
	return pb
}

func TestLeaseFromProto(t *testing.T) {
	sent := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name    string
		mod     func(*djinnpb.Lease)
		wantExp time.Time
		wantErr string // substring; "" for success
	}{
		{"LE.2.3 expiration is send time plus duration", nil, sent.Add(time.Minute), ""},
		{"LE.2.2 FOREVER stays forever", func(pb *djinnpb.Lease) { pb.DurationNanos = math.MaxInt64 }, djinn.EndOfTime, ""},
		{"LE.2.2 zero duration is already expired", func(pb *djinnpb.Lease) { pb.DurationNanos = 0 }, sent, ""},
		{"unspecified format reads as duration", func(pb *djinnpb.Lease) { pb.Format = 0 }, sent.Add(time.Minute), ""},
		{"LE.2.2 ABSOLUTE format is an instant", func(pb *djinnpb.Lease) {
			pb.Format = djinnpb.SerialFormat_SERIAL_FORMAT_ABSOLUTE
			pb.ExpirationUnixNanos = sent.Add(time.Hour).UnixNano()
		}, sent.Add(time.Hour), ""},
		{"absolute forever", func(pb *djinnpb.Lease) {
			pb.Format = djinnpb.SerialFormat_SERIAL_FORMAT_ABSOLUTE
			pb.ExpirationUnixNanos = math.MaxInt64
		}, djinn.EndOfTime, ""},
		{"missing landlord", func(pb *djinnpb.Lease) { pb.Landlord = nil }, time.Time{}, "lease landlord: missing"},
		{"landlord without endpoint", func(pb *djinnpb.Lease) { pb.Landlord.Endpoint = "" }, time.Time{}, `endpoint ""`},
		{"landlord endpoint without port", func(pb *djinnpb.Lease) { pb.Landlord.Endpoint = "host" }, time.Time{}, `endpoint "host"`},
		{"landlord service id short", func(pb *djinnpb.Lease) { pb.Landlord.ServiceId = []byte{1} }, time.Time{}, "service id: 1 bytes, want 16"},
		{"cookie of 15 bytes", func(pb *djinnpb.Lease) { pb.Cookie = pb.Cookie[:15] }, time.Time{}, "lease cookie: 15 bytes, want 16"},
		{"cookie missing", func(pb *djinnpb.Lease) { pb.Cookie = nil }, time.Time{}, "lease cookie: missing"},
		{"negative duration", func(pb *djinnpb.Lease) { pb.DurationNanos = -5 }, time.Time{}, "lease duration -5ns: negative"},
		{"unknown format", func(pb *djinnpb.Lease) { pb.Format = 7 }, time.Time{}, "lease serial format 7"},
		{"absolute before 1970", func(pb *djinnpb.Lease) {
			pb.Format = djinnpb.SerialFormat_SERIAL_FORMAT_ABSOLUTE
			pb.ExpirationUnixNanos = -1
		}, time.Time{}, "lease expiration -1: before 1970"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := LeaseFromProto(wireLease(tt.mod), sent)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, djinn.ErrInvalidArgument) {
					t.Fatalf("err = %v, want invalid argument containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !l.Expiration().Equal(tt.wantExp) {
				t.Errorf("expiration %v, want %v", l.Expiration(), tt.wantExp)
			}
		})
	}
	if _, err := LeaseFromProto(nil, sent); !errors.Is(err, djinn.ErrInvalidArgument) {
		t.Errorf("nil lease: err = %v", err)
	}
}

func TestLeaseProto(t *testing.T) {
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	l := NewLease(djinn.Ref{Endpoint: "h:1", Service: djinn.NewID(), Object: djinn.NewID()}, djinn.NewID(), now.Add(time.Minute))
	if pb := l.Proto(now.Add(15 * time.Second)); pb.GetDurationNanos() != int64(45*time.Second) ||
		pb.GetFormat() != djinnpb.SerialFormat_SERIAL_FORMAT_DURATION {
		t.Errorf("LE.2.2 DURATION form is the time left at encoding: %v", pb)
	}
	if pb := l.Proto(now.Add(2 * time.Minute)); pb.GetDurationNanos() != 0 {
		t.Errorf("expired lease encodes duration %d, want 0", pb.GetDurationNanos())
	}
	if err := l.SetSerialFormat(SerialAbsolute); err != nil {
		t.Fatal(err)
	}
	if pb := l.Proto(now); pb.GetExpirationUnixNanos() != now.Add(time.Minute).UnixNano() ||
		pb.GetFormat() != djinnpb.SerialFormat_SERIAL_FORMAT_ABSOLUTE {
		t.Errorf("LE.2.2 ABSOLUTE form is the expiration instant: %v", pb)
	}
	if err := l.SetSerialFormat(3); !errors.Is(err, djinn.ErrInvalidArgument) || !strings.Contains(err.Error(), "3") {
		t.Errorf("SetSerialFormat(3) = %v, want invalid argument naming 3", err)
	}
	forever := NewLease(l.Landlord(), djinn.NewID(), djinn.EndOfTime)
	if pb := forever.Proto(now); pb.GetDurationNanos() != math.MaxInt64 {
		t.Errorf("forever lease encodes %d", pb.GetDurationNanos())
	}
	if s := l.String(); strings.Contains(s, l.Cookie().String()) {
		t.Errorf("String %q shows the cookie", s)
	}
}

func TestLeaseCanBatch(t *testing.T) {
	a := djinn.Ref{Endpoint: "h:1", Service: djinn.NewID(), Object: djinn.NewID()}
	b := djinn.Ref{Endpoint: "h:1", Service: djinn.NewID(), Object: a.Object}
	moved := a
	moved.Endpoint = "elsewhere:2"
	l1, l2 := NewLease(a, djinn.NewID(), time.Time{}), NewLease(moved, djinn.NewID(), time.Time{})
	if !l1.CanBatch(l2) {
		t.Error("LE.2.2 leases of one landlord (Ref.Equal) must batch")
	}
	if l1.CanBatch(NewLease(b, djinn.NewID(), time.Time{})) {
		t.Error("leases of different landlords must not batch")
	}
	if l1.CanBatch(nil) || l1.Equal(l2) || !l1.Equal(NewLease(moved, l1.Cookie(), time.Time{})) {
		t.Error("Equal is landlord and cookie")
	}
}

func TestLeaseRenewCancel(t *testing.T) {
	ll, p := startLandlord(t, 5*time.Minute, time.Hour)
	ctx := context.Background()
	tests := []struct {
		name    string
		d       time.Duration
		granted time.Duration
	}{
		{"LE.2.2 ANY gets the landlord's choice", djinn.Any, 5 * time.Minute},
		{"LE.2.2 grant is no more than requested", 2 * time.Minute, 2 * time.Minute},
		{"LE.2.2 landlord may grant less than requested", djinn.Forever, time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := grant(t, ll, time.Minute)
			before := time.Now()
			if err := l.Renew(ctx, p, tt.d); err != nil {
				t.Fatal(err)
			}
			after := time.Now()
			if exp := l.Expiration(); exp.Before(before.Add(tt.granted)) || exp.After(after.Add(tt.granted)) {
				t.Errorf("expiration %v not within [%v, %v]", exp, before.Add(tt.granted), after.Add(tt.granted))
			}
			if c := nextCall(t, ll); c.Method != "Renew" || c.Durations[0] != tt.d {
				t.Errorf("landlord saw %+v", c)
			}
		})
	}

	t.Run("negative duration refused before sending", func(t *testing.T) {
		l := grant(t, ll, time.Minute)
		err := l.Renew(ctx, p, -5*time.Second)
		if !errors.Is(err, djinn.ErrInvalidArgument) || !strings.Contains(err.Error(), "-5s") {
			t.Errorf("err = %v, want invalid argument naming -5s", err)
		}
		if calls := pending(ll); len(calls) != 0 {
			t.Errorf("landlord was called: %+v", calls)
		}
	})

	t.Run("LE.2.2 cancel, then the lease is unknown", func(t *testing.T) {
		l := grant(t, ll, time.Minute)
		if err := l.Cancel(ctx, p); err != nil {
			t.Fatal(err)
		}
		exp := l.Expiration()
		if err := l.Renew(ctx, p, time.Minute); !errors.Is(err, djinn.ErrUnknownLease) {
			t.Errorf("renew after cancel: %v, want unknown lease", err)
		}
		if !l.Expiration().Equal(exp) {
			t.Error("LE.2.2 a failed renewal must leave the lease intact")
		}
		if err := l.Cancel(ctx, p); !errors.Is(err, djinn.ErrUnknownLease) {
			t.Errorf("second cancel: %v, want unknown lease", err)
		}
		pending(ll)
	})

	t.Run("LE.2.2 renewal denied", func(t *testing.T) {
		l := grant(t, ll, time.Minute)
		ll.FailRenewals(l.Cookie(), djinn.Errorf(djinn.LeaseDenied, "no"))
		if err := l.Renew(ctx, p, time.Minute); !errors.Is(err, djinn.ErrLeaseDenied) {
			t.Errorf("err = %v, want lease denied", err)
		}
		pending(ll)
	})

	t.Run("unreachable landlord is indefinite", func(t *testing.T) {
		l := NewLease(djinn.Ref{Endpoint: "127.0.0.1:1", Service: djinn.NewID(), Object: djinn.NewID()}, djinn.NewID(), time.Now())
		err := l.Renew(ctx, p, time.Minute)
		if !errors.Is(err, djinn.ErrUnavailable) || djinn.IsDefinite(err) {
			t.Errorf("err = %v, want unavailable", err)
		}
	})
}

// TestLeaseRenewFromSendTime checks LE.2.3 exactly: with a second of latency
// each way, the renewed lease expires at the send time plus the grant.
func TestLeaseRenewFromSendTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ll := clienttest.NewLandlord(time.Minute, time.Hour)
		ll.SetLatency(time.Second)
		l := grant(t, ll, time.Minute)
		sent := time.Now()
		if err := l.renew(context.Background(), inProcess(ll), 10*time.Minute); err != nil {
			t.Fatal(err)
		}
		if got := time.Since(sent); got != 2*time.Second {
			t.Fatalf("round trip took %v", got)
		}
		if want := sent.Add(10 * time.Minute); !l.Expiration().Equal(want) {
			t.Errorf("expiration %v, want send time + grant %v", l.Expiration(), want)
		}
		srv, _ := ll.Expiration(l.Cookie())
		if !l.Expiration().Before(srv) {
			t.Errorf("the holder's expiration %v must not pass the landlord's %v", l.Expiration(), srv)
		}
	})
}

func TestLeaseRenewedKeepsNewest(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	l := NewLease(djinn.Ref{Endpoint: "h:1"}, djinn.NewID(), t0)
	l.renewed(t0.Add(2*time.Second), time.Minute)
	l.renewed(t0.Add(time.Second), time.Hour) // answer to an older request
	if want := t0.Add(2*time.Second + time.Minute); !l.Expiration().Equal(want) {
		t.Errorf("expiration %v, want %v", l.Expiration(), want)
	}
}

// TestLeaseRenewZero: a renewed lease is just like any other lease
// (LE.2.1), so a renewal for zero is refused as a grant of zero is, before
// any call.
func TestLeaseRenewZero(t *testing.T) {
	ll, p := startLandlord(t, 5*time.Minute, time.Hour)
	l := grant(t, ll, time.Minute)
	if err := l.Renew(context.Background(), p, 0); !errors.Is(err, djinn.ErrInvalidArgument) || !strings.Contains(err.Error(), "0s: must be positive") {
		t.Fatalf("LE.2.1 renew for zero: %v, want an invalid argument naming it", err)
	}
	m := NewLeaseMap()
	if err := m.Put(l, 0); !errors.Is(err, djinn.ErrInvalidArgument) {
		t.Fatalf("LE.2.1 a lease map entry renewed for zero: %v, want an invalid argument", err)
	}
}

// TestLeaseGranted: a lease knows the duration its landlord granted, so a
// holder can tell a request that was cut short (LE.2.2) — also with
// latency, also after a renewal — and a lease it did not get from its
// landlord says it does not know.
func TestLeaseGranted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ll := clienttest.NewLandlord(time.Minute, 5*time.Minute)
		ll.SetLatency(time.Second)
		l := grant(t, ll, time.Minute)
		if g, ok := l.Granted(); !ok || g != time.Minute {
			t.Errorf("granted %v %v, want 1m", g, ok)
		}
		if err := l.renew(context.Background(), inProcess(ll), 10*time.Minute); err != nil {
			t.Fatal(err)
		}
		if g, ok := l.Granted(); !ok || g != 5*time.Minute {
			t.Errorf("granted after asking 10m of a landlord granting at most 5m: %v %v, want 5m", g, ok)
		}
		forever, err := LeaseFromProto(wireLease(func(pb *djinnpb.Lease) { pb.DurationNanos = int64(djinn.Forever) }), time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if g, ok := forever.Granted(); !ok || g != djinn.Forever {
			t.Errorf("forever lease granted %v %v", g, ok)
		}
		parsed, err := ParseToken(l.Token())
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := parsed.Granted(); ok {
			t.Error("a lease read from a token says what was granted")
		}
	})
}

// TestLeaseRefresh: the landlord's answer sets the lease's expiration from
// the time the question was sent (LE.2.3), not what was granted earlier;
// a lease it dropped is unknown.
func TestLeaseRefresh(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ll := clienttest.NewLandlord(time.Minute, time.Hour)
		ll.SetLatency(time.Second)
		l := grant(t, ll, time.Minute)
		parsed, err := ParseToken(l.Token())
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Second)
		sent := time.Now()
		covers, err := parsed.refresh(context.Background(), inProcess(ll))
		if err != nil || covers != "test lease" {
			t.Fatalf("refresh: %q %v", covers, err)
		}
		srv, _ := ll.Expiration(l.Cookie())
		if want := sent.Add(srv.Sub(sent.Add(time.Second))); !parsed.Expiration().Equal(want) {
			t.Errorf("expiration %v, want the send time plus the time left at the landlord, %v", parsed.Expiration(), want)
		}
		ll.Forget(l.Cookie())
		if _, err := parsed.refresh(context.Background(), inProcess(ll)); !errors.Is(err, djinn.ErrUnknownLease) {
			t.Errorf("refresh of a lease the landlord dropped: %v, want unknown lease", err)
		}
	})
}
