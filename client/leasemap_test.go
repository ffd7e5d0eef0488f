package client

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client/clienttest"
)

func TestLeaseMapPut(t *testing.T) {
	a := djinn.Ref{Endpoint: "h:1", Service: djinn.NewID(), Object: djinn.NewID()}
	b := djinn.Ref{Endpoint: "h:1", Service: djinn.NewID(), Object: djinn.NewID()}
	la, lb := NewLease(a, djinn.NewID(), time.Time{}), NewLease(b, djinn.NewID(), time.Time{})
	m := NewLeaseMap()
	if !m.CanContainKey(lb) {
		t.Error("LE.2.2 an empty map can contain any lease")
	}
	if err := m.Put(la, time.Minute); err != nil {
		t.Fatal(err)
	}
	if m.CanContainKey(lb) || m.CanContainKey(nil) {
		t.Error("LE.2.2 canContainKey is false for a lease that cannot batch")
	}
	if err := m.Put(lb, time.Minute); !errors.Is(err, djinn.ErrInvalidArgument) || !strings.Contains(err.Error(), "cannot batch") {
		t.Errorf("LE.2.2 put of a non-batchable lease: %v, want invalid argument", err)
	}
	if err := m.Put(NewLease(a, djinn.NewID(), time.Time{}), -2*time.Second); !errors.Is(err, djinn.ErrInvalidArgument) ||
		!strings.Contains(err.Error(), "-2s") {
		t.Errorf("put with negative duration: %v, want invalid argument naming -2s", err)
	}
	if err := m.Put(nil, time.Minute); !errors.Is(err, djinn.ErrInvalidArgument) {
		t.Errorf("put nil: %v", err)
	}
	same := NewLease(a, la.Cookie(), time.Time{})
	if err := m.Put(same, djinn.Any); err != nil {
		t.Fatal(err)
	}
	if d, ok := m.Get(la); !ok || d != djinn.Any || m.Len() != 1 {
		t.Errorf("a second value for the same lease replaces the first: %v %v %d", d, ok, m.Len())
	}
	if !m.Remove(la) || m.Remove(la) || m.Len() != 0 {
		t.Error("remove")
	}
	if !m.CanContainKey(lb) {
		t.Error("an emptied map can contain any lease")
	}
	m2, err := la.CreateLeaseMap(time.Hour)
	if err != nil || m2.Len() != 1 {
		t.Errorf("LE.2.2 createLeaseMap holds the lease: %v", err)
	}
}

// TestZeroLeaseMap: a LeaseMap declared, not made by NewLeaseMap, is an
// empty map ready to use.
func TestZeroLeaseMap(t *testing.T) {
	ll, p := startLandlord(t, time.Minute, time.Hour)
	var m LeaseMap
	if m.Len() != 0 || !m.CanContainKey(grant(t, ll, time.Minute)) {
		t.Fatal("the zero map is not empty")
	}
	l := grant(t, ll, time.Minute)
	if err := m.Put(l, time.Hour); err != nil {
		t.Fatalf("Put in the zero map: %v", err)
	}
	if d, ok := m.Get(l); !ok || d != time.Hour || m.Len() != 1 {
		t.Fatalf("after Put: %v, %v, %d leases", d, ok, m.Len())
	}
	if err := m.RenewAll(t.Context(), p); err != nil {
		t.Fatalf("RenewAll: %v", err)
	}
}

func TestLeaseMapRenewAll(t *testing.T) {
	ll, p := startLandlord(t, 5*time.Minute, time.Hour)
	ctx := context.Background()

	t.Run("LE.2.2 renewAll renews every lease in one round trip", func(t *testing.T) {
		m := NewLeaseMap()
		durations := []time.Duration{time.Minute, djinn.Any, djinn.Forever}
		wants := []time.Duration{time.Minute, 5 * time.Minute, time.Hour}
		var leases []*Lease
		for _, d := range durations {
			l := grant(t, ll, time.Second)
			leases = append(leases, l)
			if err := m.Put(l, d); err != nil {
				t.Fatal(err)
			}
		}
		before := time.Now()
		if err := m.RenewAll(ctx, p); err != nil {
			t.Fatal(err)
		}
		after := time.Now()
		calls := pending(ll)
		if len(calls) != 1 || calls[0].Method != "RenewAll" || len(calls[0].Cookies) != 3 {
			t.Fatalf("calls %+v, want one RenewAll of 3", calls)
		}
		for i, l := range leases {
			if calls[0].Durations[i] != durations[i] {
				t.Errorf("lease %d requested %v, want %v", i, calls[0].Durations[i], durations[i])
			}
			if exp := l.Expiration(); exp.Before(before.Add(wants[i])) || exp.After(after.Add(wants[i])) {
				t.Errorf("lease %d expires %v, want within [%v, %v]", i, exp, before.Add(wants[i]), after.Add(wants[i]))
			}
		}
		if m.Len() != 3 {
			t.Errorf("map holds %d leases, want 3", m.Len())
		}
	})

	t.Run("LE.2.2 renewAll removes failed leases and reports them", func(t *testing.T) {
		m := NewLeaseMap()
		ok, gone, denied := grant(t, ll, time.Minute), grant(t, ll, time.Minute), grant(t, ll, time.Minute)
		for _, l := range []*Lease{ok, gone, denied} {
			if err := m.Put(l, time.Minute); err != nil {
				t.Fatal(err)
			}
		}
		ll.Forget(gone.Cookie())
		ll.FailRenewals(denied.Cookie(), djinn.Errorf(djinn.LeaseDenied, "quota"))
		deniedExp := denied.Expiration()
		err := m.RenewAll(ctx, p)
		var lme *LeaseMapError
		if !errors.As(err, &lme) {
			t.Fatalf("err = %v, want *LeaseMapError", err)
		}
		if lme.Op != "renew" || lme.Total != 3 || len(lme.Failed) != 2 ||
			!strings.HasPrefix(lme.Error(), "renew 2 of 3 leases failed") {
			t.Errorf("error %q with %d failed", lme.Error(), len(lme.Failed))
		}
		if !errors.Is(lme.Failed[gone], djinn.ErrUnknownLease) || !errors.Is(lme.Failed[denied], djinn.ErrLeaseDenied) {
			t.Errorf("LE.2.2 each lease maps to its own error: %v", lme.Failed)
		}
		if !errors.Is(err, djinn.ErrUnknownLease) {
			t.Error("errors.Is looks through the leases' errors")
		}
		if _, in := m.Get(ok); !in || m.Len() != 1 {
			t.Errorf("LE.2.2 failed leases leave the map, others stay: len %d", m.Len())
		}
		if !denied.Expiration().Equal(deniedExp) {
			t.Error("LE.2.2 a failed renewal leaves the lease intact")
		}
		pending(ll)
	})

	t.Run("LE.2.2 cancelAll keeps cancelled leases and removes failures", func(t *testing.T) {
		m := NewLeaseMap()
		a, b := grant(t, ll, time.Minute), grant(t, ll, time.Minute)
		m.Put(a, time.Minute)
		m.Put(b, time.Minute)
		ll.Forget(b.Cookie())
		err := m.CancelAll(ctx, p)
		var lme *LeaseMapError
		if !errors.As(err, &lme) || len(lme.Failed) != 1 || !errors.Is(lme.Failed[b], djinn.ErrUnknownLease) {
			t.Fatalf("err = %v, want a LeaseMapError for b", err)
		}
		if _, in := m.Get(a); !in || m.Len() != 1 {
			t.Errorf("map holds %d leases, want only a", m.Len())
		}
		if _, live := ll.Expiration(a.Cookie()); live {
			t.Error("a was not cancelled")
		}
		if calls := pending(ll); len(calls) != 1 || calls[0].Method != "CancelAll" {
			t.Errorf("calls %+v, want one CancelAll", calls)
		}
		if err := m.CancelAll(ctx, p); !errors.As(err, &lme) || m.Len() != 0 {
			t.Errorf("cancelAll of cancelled leases: %v", err)
		}
		pending(ll)
	})

	t.Run("an unreachable landlord leaves the map unchanged", func(t *testing.T) {
		m := NewLeaseMap()
		l := grant(t, ll, time.Minute)
		m.Put(l, time.Minute)
		ll.SetDown(djinn.Errorf(djinn.Unavailable, "down for a test"))
		defer ll.SetDown(nil)
		for _, err := range []error{m.RenewAll(ctx, p), m.CancelAll(ctx, p)} {
			var lme *LeaseMapError
			if !errors.Is(err, djinn.ErrUnavailable) || errors.As(err, &lme) {
				t.Errorf("err = %v, want unavailable", err)
			}
		}
		if m.Len() != 1 {
			t.Error("the map lost its lease")
		}
		pending(ll)
	})

	t.Run("an empty map makes no call", func(t *testing.T) {
		if err := NewLeaseMap().RenewAll(ctx, p); err != nil {
			t.Fatal(err)
		}
		if err := NewLeaseMap().CancelAll(ctx, p); err != nil {
			t.Fatal(err)
		}
		if calls := pending(ll); len(calls) != 0 {
			t.Errorf("calls %+v", calls)
		}
	})
}

// TestLeaseMapRenewAllFromSendTime checks LE.2.3 for batches.
func TestLeaseMapRenewAllFromSendTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ll := clienttest.NewLandlord(time.Minute, time.Hour)
		ll.SetLatency(3 * time.Second)
		m := NewLeaseMap()
		a, b := grant(t, ll, time.Minute), grant(t, ll, time.Minute)
		m.Put(a, 10*time.Minute)
		m.Put(b, djinn.Any)
		sent := time.Now()
		if err := m.renewAll(context.Background(), inProcess(ll)); err != nil {
			t.Fatal(err)
		}
		if !a.Expiration().Equal(sent.Add(10*time.Minute)) || !b.Expiration().Equal(sent.Add(time.Minute)) {
			t.Errorf("expirations %v %v, want send time + grant", a.Expiration(), b.Expiration())
		}
	})
}
