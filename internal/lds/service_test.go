package lds_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/event"
	"github.com/djinn-go/djinn/internal/lds"
	"github.com/djinn-go/djinn/internal/lease"
	"github.com/djinn-go/djinn/internal/lock"
	"github.com/djinn-go/djinn/proto/djinnpb"
	"github.com/djinn-go/djinn/proto/statepb"
)

// sender is an event sender whose listeners accept everything, or fail
// with fail while it is set.
type sender struct {
	mu    sync.Mutex
	sent  []*djinnpb.RemoteEvent
	fail  error
	tries int
}

func (s *sender) Send(_ context.Context, _ djinn.Ref, evs []*djinnpb.RemoteEvent) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tries++
	if s.fail != nil {
		return 0, s.fail
	}
	s.sent = append(s.sent, evs...)
	return len(evs), nil
}

func (s *sender) failWith(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail = err
}

// take returns the events sent since the last call, decoded.
func (s *sender) take(t testing.TB) []*djinnpb.RemoteDiscoveryEvent {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*djinnpb.RemoteDiscoveryEvent
	for _, ev := range s.sent {
		var de djinnpb.RemoteDiscoveryEvent
		if err := ev.GetPayload().UnmarshalTo(&de); err != nil {
			t.Fatal(err)
		}
		out = append(out, &de)
	}
	s.sent = nil
	return out
}

var self = djinn.Ref{Endpoint: "127.0.0.1:4161", Service: djinn.ID{5}, Object: djinn.ID{'l', 'd', 's'}}

// fixture is a leader's service over a log, in a synctest bubble.
type fixture struct {
	t      *testing.T
	log    machine
	lessor *lease.Lessor
	svc    *lds.Service
	snd    *sender
	ctx    context.Context
	stop   func()
}

func start(t *testing.T, log machine, cfg lds.Config) *fixture {
	f := &fixture{t: t, log: log, snd: &sender{}}
	f.lessor = lease.NewLessor(log.M.Leases, log, lease.Config{Slack: 10 * time.Second})
	cfg.Delivery = event.Config{Sender: f.snd, MinBackoff: time.Second, MaxBackoff: time.Second}
	svc, err := lds.NewService(log.st, f.lessor, log, time.Now, func() djinn.Ref { return self }, cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.svc = svc
	ctx, cancel := context.WithCancel(context.Background())
	f.ctx = ctx
	var wg sync.WaitGroup
	wg.Go(func() { f.lessor.Run(ctx) })
	f.stop = func() { cancel(); wg.Wait(); svc.Close() }
	t.Cleanup(f.stop)
	synctest.Wait()
	return f
}

func (f *fixture) register(req *djinnpb.LDSRegisterRequest) (lds.Registered, []byte) {
	f.t.Helper()
	if req.Listener == nil {
		req.Listener = listener
	}
	if req.LeaseDurationNanos == 0 {
		req.LeaseDurationNanos = int64(time.Hour)
	}
	r, err := f.svc.Register(context.Background(), req)
	if err != nil {
		f.t.Fatal(err)
	}
	return r, r.Lease.GetCookie()
}

func (f *fixture) propose(cmd *statepb.Command) {
	f.t.Helper()
	if _, err := f.log.Propose(context.Background(), cmd); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) found(rs ...lds.Registrar) {
	f.t.Helper()
	c := &statepb.LDSFound{}
	for _, r := range rs {
		c.Registrars = append(c.Registrars, r.Proto())
	}
	f.propose(&statepb.Command{Op: &statepb.Command_LdsFound{LdsFound: c}})
}

// ids returns the registrars' numbers in an event.
func ids(ev *djinnpb.RemoteDiscoveryEvent) []byte {
	var out []byte
	for _, r := range ev.GetRegistrars() {
		out = append(out, r.GetServiceId()[1])
	}
	return out
}

// TestServiceArguments: the service refuses bad calls before logging
// anything, naming the bad value; one row per rule.
func TestServiceArguments(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := start(t, newMachine(), lds.Config{MaxRegistrations: 2})
		ctx := context.Background()
		_, cookie := f.register(&djinnpb.LDSRegisterRequest{AllGroups: true})
		_, ended := f.register(&djinnpb.LDSRegisterRequest{})
		if errs := f.lessor.Cancel(ctx, []djinn.ID{djinn.ID(ended)}); errs[0] != nil {
			t.Fatal(errs[0])
		}
		other := djinn.NewID()
		if err := f.log.M.Leases.ApplyGrant(other, lease.Owner{Kind: lock.SetLeaseKind, ID: other}, "", time.Now().Add(time.Hour).UnixNano(), 0); err != nil {
			t.Fatal(err)
		}
		reg := func(r *djinnpb.LDSRegisterRequest) func() error {
			return func() error { _, err := f.svc.Register(ctx, r); return err }
		}
		n := len(f.log.Commands())
		for _, tt := range []struct {
			name  string
			call  func() error
			kind  djinn.Kind
			names []string
		}{
			{"LD.3.1 register without a listener", reg(&djinnpb.LDSRegisterRequest{LeaseDurationNanos: 1}), djinn.InvalidArgument, []string{"listener: missing"}},
			{"LD.3.1 register with a listener that cannot be called", reg(&djinnpb.LDSRegisterRequest{Listener: &djinnpb.Ref{Endpoint: "nowhere", ServiceId: make([]byte, 16), ObjectId: make([]byte, 16)}, LeaseDurationNanos: 1}),
				djinn.InvalidArgument, []string{"listener", "nowhere"}},
			{"LD.3.3 a zero lease duration", reg(&djinnpb.LDSRegisterRequest{Listener: listener}), djinn.InvalidArgument, []string{"lease duration 0s"}},
			{"LD.3.3 a negative lease duration", reg(&djinnpb.LDSRegisterRequest{Listener: listener, LeaseDurationNanos: int64(-5 * time.Second)}), djinn.InvalidArgument, []string{"-5s", "positive, Forever or Any"}},
			{"LD.3.1 a bad locator", reg(&djinnpb.LDSRegisterRequest{Listener: listener, LeaseDurationNanos: 1, Locators: []string{"jini://h:99999"}}), djinn.InvalidArgument, []string{"jini://h:99999"}},
			{"all groups and groups", reg(&djinnpb.LDSRegisterRequest{Listener: listener, LeaseDurationNanos: 1, AllGroups: true, Groups: []string{"x"}}), djinn.InvalidArgument, []string{`"x"`}},
			{"LD.4.1 a registration whose lease ended: get", func() error { _, err := f.svc.Get(ended); return err }, djinn.NoSuchObject, []string{"no such registration"}},
			{"LD.4.1 … registrars", func() error { _, err := f.svc.Registrars(ended); return err }, djinn.NoSuchObject, nil},
			{"LD.4.1 … groups", func() error {
				_, err := f.svc.ChangeGroups(ctx, &djinnpb.LDSGroupsRequest{LeaseCookie: ended, Op: djinnpb.SetOp_SET_OP_ADD})
				return err
			}, djinn.NoSuchObject, nil},
			{"LD.4.1 … locators", func() error {
				_, err := f.svc.ChangeLocators(ctx, &djinnpb.LDSLocatorsRequest{LeaseCookie: ended, Op: djinnpb.SetOp_SET_OP_ADD})
				return err
			}, djinn.NoSuchObject, nil},
			{"LD.4.1 … discard", func() error {
				_, err := f.svc.Discard(ctx, &djinnpb.LDSDiscardRequest{LeaseCookie: ended, RegistrarServiceId: make([]byte, 16)})
				return err
			}, djinn.NoSuchObject, nil},
			{"another service's lease names no registration", func() error { _, err := f.svc.Get(other[:]); return err }, djinn.NoSuchObject, nil},
			{"a short cookie", func() error { _, err := f.svc.Get([]byte{1}); return err }, djinn.InvalidArgument, []string{"registration lease cookie", "1 bytes"}},
			{"LD.4.1.1 discard without the lookup service", func() error {
				_, err := f.svc.Discard(ctx, &djinnpb.LDSDiscardRequest{LeaseCookie: cookie})
				return err
			}, djinn.InvalidArgument, []string{"registrar service id: missing"}},
			{"LD.4.1.1 a bad locator to add", func() error {
				_, err := f.svc.ChangeLocators(ctx, &djinnpb.LDSLocatorsRequest{LeaseCookie: cookie, Op: djinnpb.SetOp_SET_OP_ADD, Locators: []string{"jini//x"}})
				return err
			}, djinn.InvalidArgument, []string{"jini//x"}},
		} {
			if err := tt.call(); !errors.Is(err, tt.kind) || !containsAll(err.Error(), tt.names) {
				t.Errorf("%s: %v, want %s naming %q", tt.name, err, tt.kind, tt.names)
			}
		}
		if m := len(f.log.Commands()); m != n {
			t.Errorf("refused calls logged %d commands", m-n)
		}
		// LD.4.1.1: unsupported on a registration of all groups, from the log.
		_, err := f.svc.ChangeGroups(ctx, &djinnpb.LDSGroupsRequest{LeaseCookie: cookie, Op: djinnpb.SetOp_SET_OP_REMOVE, Groups: []string{"a"}})
		wantErr(t, err, djinn.Unsupported, "remove groups")
		// The bound on registrations (two, the one ended no longer counts).
		f.register(&djinnpb.LDSRegisterRequest{})
		_, err = f.svc.Register(ctx, &djinnpb.LDSRegisterRequest{Listener: listener, LeaseDurationNanos: 1})
		wantErr(t, err, djinn.ResourceExhausted, "2 registrations")
		// A node that does not lead serves nothing.
		f.stop()
		_, err = f.svc.Get(cookie)
		wantErr(t, err, djinn.Unavailable, "not ready")
	})
}

// TestEvents: a registration's events carry the service as source, its
// event id, rising sequence numbers, its handback and the lookup services;
// its state answers with its sets.
func TestEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := start(t, newMachine(), lds.Config{})
		f.found(reg(1, "a"), reg(2, "b"))
		r, cookie := f.register(&djinnpb.LDSRegisterRequest{Groups: []string{"b", "a", "b"}, Locators: []string{"jini://10.0.0.3"}, Handback: []byte("hb"), LeaseDurationNanos: int64(djinn.Any)})
		if r.EventID == 0 || time.Duration(r.Lease.GetDurationNanos()) != 10*time.Minute || !slices.Equal(r.Lease.GetLandlord().GetServiceId(), self.Service[:]) {
			t.Fatalf("registration %+v, want an event id and a lease of the default 10m from this server", r)
		}
		synctest.Wait()
		f.found(reg(3, "c"))
		synctest.Wait()
		f.snd.mu.Lock()
		raw := slices.Clone(f.snd.sent)
		f.snd.mu.Unlock()
		evs := f.snd.take(t)
		if len(evs) != 2 || !slices.Equal(ids(evs[0]), []byte{1, 2}) || !slices.Equal(ids(evs[1]), []byte{3}) || evs[0].GetDiscarded() {
			t.Fatalf("events %v, want r1,r2 then r3 discovered", evs)
		}
		for i, ev := range raw {
			if ev.GetEventId() != r.EventID || ev.GetSequence() != int64(i+1) || string(ev.GetHandback()) != "hb" || !slices.Equal(ev.GetSource().GetObjectId(), self.Object[:]) {
				t.Errorf("event %d: %v", i, ev)
			}
		}
		st, err := f.svc.Get(cookie)
		if err != nil || st.GetEventId() != r.EventID || !slices.Equal(st.GetGroups(), []string{"a", "b"}) || !slices.Equal(st.GetLocators(), []string{loc(3)}) || st.GetSequence() != 2 ||
			st.GetLeaseExpiresUnixNanos() != time.Now().Add(10*time.Minute).UnixNano() {
			t.Errorf("state %v %v", st, err)
		}
		rs, err := f.svc.Registrars(cookie)
		if err != nil || len(rs) != 3 || rs[2].GetLocator() != loc(3) {
			t.Errorf("registrars %v %v", rs, err)
		}
		// Changes return the new state.
		st, err = f.svc.ChangeGroups(context.Background(), &djinnpb.LDSGroupsRequest{LeaseCookie: cookie, Op: djinnpb.SetOp_SET_OP_SET, AllGroups: true})
		if err != nil || !st.GetAllGroups() || len(st.GetGroups()) != 0 {
			t.Errorf("set all groups: %v %v", st, err)
		}
		st, err = f.svc.ChangeLocators(context.Background(), &djinnpb.LDSLocatorsRequest{LeaseCookie: cookie, Op: djinnpb.SetOp_SET_OP_REMOVE, Locators: []string{"JINI://10.0.0.3:4160/"}})
		if err != nil || len(st.GetLocators()) != 0 {
			t.Errorf("remove locators: %v %v", st, err)
		}
	})
}

// TestDefiniteFailureCancels (LD.3.1): a listener that answers an event
// with an unknown-event error ends the registration.
func TestDefiniteFailureCancels(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := start(t, newMachine(), lds.Config{})
		f.snd.failWith(djinn.Errorf(djinn.UnknownEvent, "no such event"))
		_, cookie := f.register(&djinnpb.LDSRegisterRequest{Groups: []string{"a"}})
		f.found(reg(1, "a"))
		synctest.Wait()
		_, err := f.svc.Get(cookie)
		wantErr(t, err, djinn.NoSuchObject)
		if n, _ := f.log.st.Len(); n != 0 {
			t.Errorf("%d registrations left", n)
		}
	})
}

// TestIndefiniteFailureRetries (LD.3.1): events a listener cannot take for
// now are sent again until they arrive, or until the registration's lease
// ends.
func TestIndefiniteFailureRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := start(t, newMachine(), lds.Config{})
		f.snd.failWith(djinn.Errorf(djinn.Unavailable, "listener down"))
		_, cookie := f.register(&djinnpb.LDSRegisterRequest{Groups: []string{"a"}, LeaseDurationNanos: int64(time.Minute)})
		f.found(reg(1, "a"))
		time.Sleep(10 * time.Second)
		f.snd.failWith(nil)
		time.Sleep(2 * time.Second)
		if evs := f.snd.take(t); len(evs) != 1 || !slices.Equal(ids(evs[0]), []byte{1}) {
			t.Fatalf("after the listener came back: %v", evs)
		}
		// Failing until the lease ends: the retries stop with it.
		f.snd.failWith(djinn.Errorf(djinn.Unavailable, "listener down"))
		f.found(reg(2, "a"))
		time.Sleep(2 * time.Minute)
		_, err := f.svc.Get(cookie)
		wantErr(t, err, djinn.NoSuchObject)
		f.snd.mu.Lock()
		tries := f.snd.tries
		f.snd.mu.Unlock()
		time.Sleep(time.Minute)
		f.snd.mu.Lock()
		defer f.snd.mu.Unlock()
		if f.snd.tries != tries {
			t.Errorf("%d more tries after the lease ended", f.snd.tries-tries)
		}
	})
}

// TestDeposedLeaderDescribesNoRegistration: a registration's state and its
// discovered lookup services (LD.4.1.1 getRegistrars, what a client reads
// to resynchronise after a gap in the sequence numbers, LD.3.2) are
// confirmed with the leader lease, or a quorum, after they are read: a
// deposed leader that has not heard of its successor (which may have
// changed the registration, or found and lost lookup services for it)
// answers Unavailable, not what it last knew.
func TestDeposedLeaderDescribesNoRegistration(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := start(t, newMachine(), lds.Config{})
		_, cookie := f.register(&djinnpb.LDSRegisterRequest{Locators: []string{loc(1)}})
		f.found(reg(1))
		if rs, err := f.svc.Registrars(cookie); err != nil || len(rs) != 1 {
			t.Fatalf("getRegistrars at the leader: %v, %v; want the one found", rs, err)
		}
		f.log.Deposed.Store(true)
		if rs, err := f.svc.Registrars(cookie); !errors.Is(err, djinn.ErrUnavailable) {
			t.Errorf("getRegistrars at a deposed leader: %v, %v; want Unavailable", rs, err)
		}
		if st, err := f.svc.Get(cookie); !errors.Is(err, djinn.ErrUnavailable) {
			t.Errorf("the registration at a deposed leader: %v, %v; want Unavailable", st, err)
		}
	})
}

// TestDeposedLeaderDeniesNoRegistration: "no such registration" is an
// answer from this node's state too: a deposed leader that has not heard
// of its successor (which may have made the registration) answers
// Unavailable to getRegistrars and the state, not NotFound; a malformed
// cookie is still InvalidArgument.
func TestDeposedLeaderDeniesNoRegistration(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := start(t, newMachine(), lds.Config{})
		f.register(&djinnpb.LDSRegisterRequest{Locators: []string{loc(1)}})
		other := djinn.NewID()
		if _, err := f.svc.Registrars(other[:]); !errors.Is(err, djinn.ErrNoSuchObject) {
			t.Fatalf("getRegistrars of an unknown registration at the leader: %v; want NoSuchObject", err)
		}
		f.log.Deposed.Store(true)
		if _, err := f.svc.Registrars(other[:]); !errors.Is(err, djinn.ErrUnavailable) {
			t.Errorf("getRegistrars of an unknown registration at a deposed leader: %v; want Unavailable", err)
		}
		if _, err := f.svc.Get(other[:]); !errors.Is(err, djinn.ErrUnavailable) {
			t.Errorf("an unknown registration at a deposed leader: %v; want Unavailable", err)
		}
		if _, err := f.svc.Get([]byte{1}); !errors.Is(err, djinn.ErrInvalidArgument) {
			t.Errorf("a malformed cookie at a deposed leader: %v; want InvalidArgument", err)
		}
	})
}
