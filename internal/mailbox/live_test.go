package mailbox_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/mailbox"
)

// A delivery stream, of its own or shared, ends with NoSuchObject exactly
// when its registration's lease ends: cancelled, expired at a renewed
// expiration, or expired at an earlier one its owner renewed it to — never
// at an expiration the lease no longer has.
func TestDeliveriesEndWhenTheLeaseEnds(t *testing.T) {
	cookie := func(r mailbox.Registration) djinn.ID {
		var c djinn.ID
		copy(c[:], r.Lease.Cookie)
		return c
	}
	tests := []struct {
		name  string
		lease time.Duration
		// then acts on the lease while the stream runs, having received
		// event 1, and returns how long until the lease ends.
		then func(t *testing.T, f *fixture, r mailbox.Registration) time.Duration
	}{
		{"EM.4 a cancelled lease", time.Hour, func(t *testing.T, f *fixture, r mailbox.Registration) time.Duration {
			if err := f.lessor.Cancel(context.Background(), []djinn.ID{cookie(r)})[0]; err != nil {
				t.Fatal(err)
			}
			return 0
		}},
		{"EM.4 a lease that expires", time.Minute, func(*testing.T, *fixture, mailbox.Registration) time.Duration {
			return time.Minute
		}},
		{"LE.2.2 a lease renewed past its first expiration", time.Minute, func(t *testing.T, f *fixture, r mailbox.Registration) time.Duration {
			if _, err := f.lessor.Renew(context.Background(), cookie(r), 10*time.Minute); err != nil {
				t.Fatal(err)
			}
			return 10 * time.Minute
		}},
		{"LE.2.2 a lease its owner renews to expire earlier", time.Hour, func(t *testing.T, f *fixture, r mailbox.Registration) time.Duration {
			if _, err := f.lessor.Renew(context.Background(), cookie(r), 2*time.Minute); err != nil {
				t.Fatal(err)
			}
			return 2 * time.Minute
		}},
	}
	for _, form := range []string{"own stream", "shared stream"} {
		for _, tt := range tests {
			t.Run(form+"/"+tt.name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					f := newFixture(t, 1000)
					defer f.stop()
					r := f.register(tt.lease)
					got, ended, stop := openForm(f, form, r)
					defer stop()
					f.notifyN(r, 1, 1)
					synctest.Wait()
					left := tt.then(t, f, r)
					if left > 0 {
						// Just before the end: still running, still delivering.
						time.Sleep(left - time.Second)
						f.notifyN(r, 2, 2)
						synctest.Wait()
						if err, over := ended(); over {
							t.Fatalf("%s: ended with %v a second before its lease ends", form, err)
						}
						if idx := got(); !slices.Equal(idx, span(1, 2)) {
							t.Fatalf("%s: got %v a second before its lease ends, want 1..2", form, idx)
						}
						time.Sleep(time.Second)
					}
					synctest.Wait()
					if err, over := ended(); !over || !errors.Is(err, djinn.ErrNoSuchObject) {
						t.Fatalf("%s after the lease ended: ended %v with %v, want NoSuchObject", form, over, err)
					}
				})
			})
		}
	}
}

// openForm opens a delivery stream of registration r in the form named,
// returning the indexes it received, how it ended (false: it runs) and its
// stop.
func openForm(f *fixture, form string, r mailbox.Registration) (got func() []uint64, ended func() (error, bool), stop func()) {
	if form == "own stream" {
		s := f.stream(context.Background(), r.ID, mailbox.StreamOpen{})
		var end error
		var over bool
		return s.indexes, func() (error, bool) {
			if !over {
				end, over = s.ended()
			}
			return end, over
		}, s.stop
	}
	s := f.shared(context.Background(), 0, mailbox.SharedRequest{Add: joins(r)})
	return func() []uint64 { return s.indexes(r.ID) }, func() (error, bool) { return s.endedWith(r.ID) }, s.stop
}

// A registration's description (its lease, its stored events) is confirmed
// with the leader lease, or a quorum, after it is read: a deposed leader
// that has not heard of its successor (which may have acknowledged events,
// or ended the registration) answers Unavailable, not what it last knew.
func TestDeposedLeaderDescribesNoRegistration(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, 0)
		defer f.stop()
		r := f.register(time.Minute)
		ctx := context.Background()
		if _, err := f.svc.Get(ctx, r.ID); err != nil {
			t.Fatalf("the registration at the leader: %v", err)
		}
		f.log.Deposed.Store(true)
		if _, err := f.svc.Get(ctx, r.ID); !errors.Is(err, djinn.ErrUnavailable) {
			t.Fatalf("the registration at a deposed leader: %v; want Unavailable", err)
		}
	})
}

// "No such registration" is an answer from this node's state too: a
// deposed leader that has not heard of its successor (which may have
// registered it) answers Unavailable, not NotFound.
func TestDeposedLeaderDeniesNoRegistration(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, 0)
		defer f.stop()
		f.register(time.Minute)
		ctx := context.Background()
		if _, err := f.svc.Get(ctx, djinn.NewID()); !errors.Is(err, djinn.ErrNoSuchObject) {
			t.Fatalf("an unknown registration at the leader: %v; want NoSuchObject", err)
		}
		f.log.Deposed.Store(true)
		if _, err := f.svc.Get(ctx, djinn.NewID()); !errors.Is(err, djinn.ErrUnavailable) {
			t.Fatalf("an unknown registration at a deposed leader: %v; want Unavailable", err)
		}
	})
}
