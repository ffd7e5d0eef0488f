package lds_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/discovery"
	"github.com/djinn-go/djinn/internal/lds"
	"github.com/djinn-go/djinn/internal/state/statetest"
	"github.com/djinn-go/djinn/proto/djinnpb"
	"github.com/djinn-go/djinn/proto/statepb"
)

// fakeDiscovery is a Discoverer that reports what the test says and
// records what it is asked.
type fakeDiscovery struct {
	events chan discovery.Event

	mu       sync.Mutex
	all      bool
	groups   []string
	locators []discovery.Locator
	groupSet int // SetGroups and SetAllGroups calls
	discards []djinn.ID
}

var _ lds.Discoverer = (*fakeDiscovery)(nil)

func newFakeDiscovery() *fakeDiscovery { return &fakeDiscovery{events: make(chan discovery.Event)} }

func (d *fakeDiscovery) Events() <-chan discovery.Event { return d.events }

func (d *fakeDiscovery) SetGroups(groups ...string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.all, d.groups = false, groups
	d.groupSet++
	return nil
}

func (d *fakeDiscovery) SetAllGroups() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.all, d.groups = true, nil
	d.groupSet++
	return nil
}

func (d *fakeDiscovery) SetLocators(locs ...discovery.Locator) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.locators = locs
	return nil
}

func (d *fakeDiscovery) Discard(id djinn.ID) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.discards = append(d.discards, id)
}

func info(r lds.Registrar) discovery.RegistrarInfo {
	l, err := discovery.ParseLocator(r.Locator)
	if err != nil {
		panic(err)
	}
	return discovery.RegistrarInfo{ServiceID: r.ID, Groups: r.Groups, Endpoint: r.Endpoint, Locator: l}
}

func (d *fakeDiscovery) discovered(rs ...lds.Registrar) {
	for _, r := range rs {
		d.events <- discovery.Event{Kind: discovery.Discovered, Registrar: info(r)}
	}
}

func (d *fakeDiscovery) discarded(r lds.Registrar, why discovery.Reason) {
	d.events <- discovery.Event{Kind: discovery.Discarded, Registrar: info(r), Reason: why}
}

// discover runs the fixture's service's discovery with d until the test
// ends.
func (f *fixture) discover(d lds.Discoverer, cfg lds.DiscoverConfig) {
	ctx, cancel := context.WithCancel(f.ctx)
	var wg sync.WaitGroup
	wg.Go(func() { f.svc.Discover(ctx, d, cfg) })
	f.t.Cleanup(func() { cancel(); wg.Wait() })
	synctest.Wait()
}

// logged returns the LDSFound and LDSLost commands logged, as "+r1,r2" and
// "-r1".
func logged(log *statetest.Log) []string {
	var out []string
	for _, c := range log.Commands() {
		switch op := c.Op.(type) {
		case *statepb.Command_LdsFound:
			s := "+"
			for i, r := range op.LdsFound.GetRegistrars() {
				if i > 0 {
					s += ","
				}
				s += "r" + string('0'+rune(r.GetServiceId()[1]))
			}
			out = append(out, s)
		case *statepb.Command_LdsLost:
			s := "-"
			for i, id := range op.LdsLost.GetServiceIds() {
				if i > 0 {
					s += ","
				}
				s += "r" + string('0'+rune(id[1]))
			}
			out = append(out, s)
		}
	}
	return out
}

var own = discovery.Locator{Host: "127.0.0.1", Port: 4160}

// TestDiscoverFollowsTheManagedSets: discovery looks for the union of the
// registrations' groups and locators, and this server's own lookup
// service, and follows their changes.
func TestDiscoverFollowsTheManagedSets(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := start(t, newMachine(), lds.Config{})
		d := newFakeDiscovery()
		f.discover(d, lds.DiscoverConfig{Groups: true, Locators: []discovery.Locator{own}})
		check := func(all bool, groups []string, locs ...discovery.Locator) {
			t.Helper()
			synctest.Wait()
			d.mu.Lock()
			defer d.mu.Unlock()
			if d.all != all || !slices.Equal(d.groups, groups) || !slices.Equal(d.locators, locs) {
				t.Fatalf("discovering all %v groups %q locators %v; want %v %q %v", d.all, d.groups, d.locators, all, groups, locs)
			}
		}
		check(false, nil, own)
		_, a := f.register(&djinnpb.LDSRegisterRequest{Groups: []string{"b", "a"}, Locators: []string{loc(1)}})
		_, b := f.register(&djinnpb.LDSRegisterRequest{Groups: []string{"b", "c"}, Locators: []string{loc(1), loc(2)}})
		l1, l2 := info(reg(1)).Locator, info(reg(2)).Locator
		check(false, []string{"a", "b", "c"}, own, l1, l2)
		if _, err := f.svc.ChangeGroups(context.Background(), &djinnpb.LDSGroupsRequest{LeaseCookie: a, Op: djinnpb.SetOp_SET_OP_SET, AllGroups: true}); err != nil {
			t.Fatal(err)
		}
		check(true, nil, own, l1, l2)
		d.mu.Lock()
		n := d.groupSet
		d.mu.Unlock()
		// A change that leaves the union alone is not handed on.
		if _, err := f.svc.ChangeLocators(context.Background(), &djinnpb.LDSLocatorsRequest{LeaseCookie: b, Op: djinnpb.SetOp_SET_OP_REMOVE, Locators: []string{loc(1)}}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if d.groupSet != n {
			t.Errorf("an unchanged union was handed on again")
		}
		if errs := f.lessor.Cancel(context.Background(), []djinn.ID{djinn.ID(a)}); errs[0] != nil {
			t.Fatal(errs[0])
		}
		check(false, []string{"b", "c"}, own, l2)
	})
}

// TestDiscoverWithoutMulticast: without group discovery no groups are
// handed on; a registration that wants groups hears of lookup services
// found at others' locators.
func TestDiscoverWithoutMulticast(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := start(t, newMachine(), lds.Config{})
		d := newFakeDiscovery()
		f.discover(d, lds.DiscoverConfig{})
		f.register(&djinnpb.LDSRegisterRequest{Groups: []string{"a"}})
		f.register(&djinnpb.LDSRegisterRequest{Locators: []string{loc(1)}})
		d.discovered(reg(1, "a"))
		time.Sleep(time.Second)
		if d.groupSet != 0 {
			t.Errorf("groups handed to discovery without multicast")
		}
		if evs := f.snd.take(t); len(evs) != 2 {
			t.Errorf("events %v, want r1 discovered by both", evs)
		}
	})
}

// TestDiscoverCoalesces (LD.4.2): lookup services found together are logged
// together, and each registration hears of them in one event.
func TestDiscoverCoalesces(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := start(t, newMachine(), lds.Config{})
		d := newFakeDiscovery()
		f.discover(d, lds.DiscoverConfig{Groups: true, Coalesce: 50 * time.Millisecond})
		f.register(&djinnpb.LDSRegisterRequest{AllGroups: true})
		d.discovered(reg(3, "c"), reg(1, "a"))
		time.Sleep(20 * time.Millisecond)
		d.discovered(reg(2, "b"))
		time.Sleep(time.Second)
		d.discovered(reg(4, "d"))
		time.Sleep(time.Second)
		if got := logged(f.log.Log); !slices.Equal(got, []string{"+r1,r2,r3", "+r4"}) {
			t.Errorf("logged %q, want the first three together", got)
		}
		evs := f.snd.take(t)
		if len(evs) != 2 || !slices.Equal(ids(evs[0]), []byte{1, 2, 3}) {
			t.Errorf("events %v, want one for r1, r2, r3, then r4", evs)
		}
	})
}

// TestDiscoverLost (LD.3.1): what discovery drops is logged lost, and
// registrations that want it by group hear it discarded; changed groups
// are logged found.
func TestDiscoverLost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := start(t, newMachine(), lds.Config{})
		d := newFakeDiscovery()
		f.discover(d, lds.DiscoverConfig{Groups: true})
		f.register(&djinnpb.LDSRegisterRequest{Groups: []string{"a"}})
		d.discovered(reg(1, "a"), reg(2, "a"))
		time.Sleep(time.Second)
		d.discarded(reg(1, "a"), discovery.Unreachable)
		d.events <- discovery.Event{Kind: discovery.Changed, Registrar: info(reg(2, "b"))}
		time.Sleep(time.Second)
		if got := logged(f.log.Log); !slices.Equal(got, []string{"+r1,r2", "-r1", "+r2"}) {
			t.Errorf("logged %q", got)
		}
		evs := f.snd.take(t)
		if len(evs) != 3 || !evs[1].GetDiscarded() || !slices.Equal(ids(evs[1]), []byte{1}) || !evs[2].GetDiscarded() || !slices.Equal(ids(evs[2]), []byte{2}) {
			t.Errorf("events %v, want r1,r2 discovered, r1 discarded, r2 discarded (no longer in a)", evs)
		}
	})
}

// TestDiscoverClientDiscard (LD.4.1.1): a client's discard has discovery
// drop the lookup service; that drop is not logged as a loss, and when
// discovery finds it again the client hears of it again.
func TestDiscoverClientDiscard(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := start(t, newMachine(), lds.Config{})
		d := newFakeDiscovery()
		f.discover(d, lds.DiscoverConfig{Groups: true, Grace: time.Hour})
		_, a := f.register(&djinnpb.LDSRegisterRequest{Groups: []string{"a"}})
		f.register(&djinnpb.LDSRegisterRequest{Groups: []string{"a"}})
		d.discovered(reg(1, "a"))
		time.Sleep(time.Second)
		r1 := reg(1).ID
		ok, err := f.svc.Discard(context.Background(), &djinnpb.LDSDiscardRequest{LeaseCookie: a, RegistrarServiceId: r1[:]})
		if err != nil || !ok {
			t.Fatalf("discard: %v %v", ok, err)
		}
		synctest.Wait()
		d.mu.Lock()
		discards := slices.Clone(d.discards)
		d.mu.Unlock()
		if !slices.Equal(discards, []djinn.ID{r1}) {
			t.Fatalf("discovery asked to discard %v, want r1", discards)
		}
		d.discarded(reg(1, "a"), discovery.ByUser)
		time.Sleep(time.Second)
		d.discovered(reg(1, "a"))
		time.Sleep(time.Second)
		if got := logged(f.log.Log); !slices.Equal(got, []string{"+r1", "+r1"}) {
			t.Errorf("logged %q, want r1 found twice and never lost", got)
		}
		evs := f.snd.take(t)
		var seqs []string
		for _, ev := range evs {
			s := "+"
			if ev.GetDiscarded() {
				s = "-"
			}
			seqs = append(seqs, s)
		}
		if !slices.Equal(seqs, []string{"+", "+", "-", "+"}) {
			t.Errorf("events %q, want both discover r1, A discards it and discovers it again", seqs)
		}
	})
}

// TestDiscoverGrace: a new leader logs lost the lookup services of the
// table its discovery does not find within the grace period, and so does
// it for one a client discarded and discovery does not find again.
func TestDiscoverGrace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := newMachine()
		f := start(t, log, lds.Config{})
		_, a := f.register(&djinnpb.LDSRegisterRequest{Groups: []string{"a"}})
		f.found(reg(1, "a"), reg(2, "a"), reg(3, "a")) // a previous leader's findings
		d := newFakeDiscovery()
		f.discover(d, lds.DiscoverConfig{Grace: time.Minute})
		d.discovered(reg(1, "a"))
		time.Sleep(30 * time.Second)
		d.discovered(reg(3, "a"))
		time.Sleep(time.Second)
		r3 := reg(3).ID
		if ok, err := f.svc.Discard(context.Background(), &djinnpb.LDSDiscardRequest{LeaseCookie: a, RegistrarServiceId: r3[:]}); err != nil || !ok {
			t.Fatalf("discard r3: %v %v", ok, err)
		}
		time.Sleep(30 * time.Second)
		if got := logged(log.Log); !slices.Equal(got, []string{"+r1,r2,r3", "+r1", "+r3", "-r2"}) {
			t.Errorf("after the grace period: logged %q, want r2 lost", got)
		}
		time.Sleep(time.Minute)
		if got := logged(log.Log); !slices.Equal(got, []string{"+r1,r2,r3", "+r1", "+r3", "-r2", "-r3"}) {
			t.Errorf("a minute after the discard: logged %q, want r3 lost too", got)
		}
		rs, err := f.svc.Registrars(a)
		if err != nil || len(rs) != 1 || rs[0].GetServiceId()[1] != 1 {
			t.Errorf("registrars %v %v, want r1 alone", rs, err)
		}
	})
}
