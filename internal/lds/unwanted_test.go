package lds_test

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/discovery"
	"github.com/djinn-go/djinn/internal/lds"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// eventsOf returns, as "+r1" (discovered) and "-r1" (discarded), the
// events sent for the registration with event id eid since the last take.
func (s *sender) eventsOf(t testing.TB, eid int64) []string {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, ev := range s.sent {
		if ev.GetEventId() != eid {
			continue
		}
		var de djinnpb.RemoteDiscoveryEvent
		if err := ev.GetPayload().UnmarshalTo(&de); err != nil {
			t.Fatal(err)
		}
		sign := "+"
		if de.GetDiscarded() {
			sign = "-"
		}
		for _, r := range de.GetRegistrars() {
			sign += "r" + string('0'+rune(r.GetServiceId()[1]))
		}
		out = append(out, sign)
	}
	return out
}

// narrowed runs the scenario: R1 wants all groups and discovers
// r1 (group a); R1 is cancelled, which narrows discovery to nothing; R2 is
// registered for group a at once. Discovery's discard of r1 for lack of
// interest arrives before (early) or after R2's registration; discovery
// then finds r1 again for R2. It returns R2's events.
func narrowed(t *testing.T, early bool) []string {
	f := start(t, newMachine(), lds.Config{})
	d := newFakeDiscovery()
	f.discover(d, lds.DiscoverConfig{Groups: true})
	_, r1 := f.register(&djinnpb.LDSRegisterRequest{AllGroups: true})
	d.discovered(reg(1, "a"))
	time.Sleep(time.Second)
	if errs := f.lessor.Cancel(context.Background(), []djinn.ID{djinn.ID(r1)}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	synctest.Wait()
	if early {
		d.discarded(reg(1, "a"), discovery.NoInterest)
		synctest.Wait()
	}
	r2, _ := f.register(&djinnpb.LDSRegisterRequest{Groups: []string{"a"}})
	if !early {
		d.discarded(reg(1, "a"), discovery.NoInterest)
	}
	d.discovered(reg(1, "a"))
	time.Sleep(time.Second)
	return f.snd.eventsOf(t, r2.EventID)
}

// LD.3.1, LD.4.1.1: a discard caused by the service's own narrowing of
// discovery (cancelling R1) is no loss: R2, registered meanwhile for the
// lookup service's group, hears it discovered once, never discarded.
func TestLD31NarrowingIsNoLossForOthers(t *testing.T) {
	for _, c := range []struct {
		name  string
		early bool
	}{
		{"LD.3.1 discard heard after R2 registered", false},
		{"LD.3.1 discard heard before R2 registered", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				if got := narrowed(t, c.early); !slices.Equal(got, []string{"+r1"}) {
					t.Fatalf("R2 heard %q, want r1 discovered once", got)
				}
			})
		})
	}
}

// LD.3.1: a lookup service whose groups changed so that discovery no
// longer looks for it is discarded at once by the registrations that
// wanted its old groups (a passive no-interest discard), and kept by those
// that want it by locator.
func TestLD31GroupsChangedIsDiscardedAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := start(t, newMachine(), lds.Config{})
		d := newFakeDiscovery()
		f.discover(d, lds.DiscoverConfig{Groups: true})
		byGroup, _ := f.register(&djinnpb.LDSRegisterRequest{Groups: []string{"a"}})
		byLoc, _ := f.register(&djinnpb.LDSRegisterRequest{Locators: []string{loc(1)}})
		d.discovered(reg(1, "a"))
		time.Sleep(time.Second)
		d.discarded(reg(1, "b"), discovery.NoInterest) // it moved to group b
		synctest.Wait()
		if got := f.snd.eventsOf(t, byGroup.EventID); !slices.Equal(got, []string{"+r1", "-r1"}) {
			t.Errorf("the registration for group a heard %q, want r1 discovered then discarded", got)
		}
		if got := f.snd.eventsOf(t, byLoc.EventID); !slices.Equal(got, []string{"+r1"}) {
			t.Errorf("the registration for its locator heard %q, want r1 discovered only", got)
		}
	})
}

// LD.3.1: without group discovery, a lookup service found at a locator
// that no registration wants any more is looked for by nothing: the
// registrations that had it by group discard it.
func TestLD31NothingLooksForItAnyMoreIsALoss(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := start(t, newMachine(), lds.Config{})
		d := newFakeDiscovery()
		f.discover(d, lds.DiscoverConfig{})
		byGroup, _ := f.register(&djinnpb.LDSRegisterRequest{Groups: []string{"ops"}})
		_, byLoc := f.register(&djinnpb.LDSRegisterRequest{Locators: []string{loc(2)}})
		d.discovered(reg(2, "ops"))
		time.Sleep(time.Second)
		if _, err := f.svc.ChangeLocators(context.Background(), &djinnpb.LDSLocatorsRequest{LeaseCookie: byLoc, Op: djinnpb.SetOp_SET_OP_REMOVE, Locators: []string{loc(2)}}); err != nil {
			t.Fatal(err)
		}
		d.discarded(reg(2, "ops"), discovery.Removed)
		synctest.Wait()
		if got := f.snd.eventsOf(t, byGroup.EventID); !slices.Equal(got, []string{"+r2", "-r2"}) {
			t.Errorf("the registration for group ops heard %q, want r2 discovered then discarded", got)
		}
	})
}
