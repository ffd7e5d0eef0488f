package renewal_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client/clienttest"
	"github.com/djinn-go/djinn/internal/batch"
	"github.com/djinn-go/djinn/internal/event"
	"github.com/djinn-go/djinn/internal/grpcerr"
	"github.com/djinn-go/djinn/internal/lease"
	"github.com/djinn-go/djinn/internal/renewal"
	"github.com/djinn-go/djinn/internal/state"
	"github.com/djinn-go/djinn/internal/state/statetest"
	"github.com/djinn-go/djinn/proto/djinnpb"
	"github.com/djinn-go/djinn/proto/statepb"
)

// landlord is a landlord of client leases: the one in-memory landlord,
// reached in process, with the renewals it was asked for kept in order.
type landlord struct {
	*clienttest.Landlord

	mu      sync.Mutex
	asked   []time.Duration // guarded by mu: every duration asked for, in order
	askedAt []time.Time     // guarded by mu: when each of asked was asked
}

func newLandlord(max time.Duration) *landlord {
	return &landlord{Landlord: clienttest.NewLandlord(max, max)}
}

// grant makes a lease of d, whatever the landlord's policy, and returns its
// wire form.
func (l *landlord) grant(d time.Duration) (*djinnpb.Lease, djinn.ID) {
	return l.GrantExpiring(djinn.AddDuration(time.Now(), d), djinnpb.SerialFormat_SERIAL_FORMAT_DURATION)
}

// grantAbs makes a lease expiring at exp and returns it in the absolute
// serial format, which can carry an expiration already past.
func (l *landlord) grantAbs(exp time.Time) (*djinnpb.Lease, djinn.ID) {
	return l.GrantExpiring(exp, djinnpb.SerialFormat_SERIAL_FORMAT_ABSOLUTE)
}

func (l *landlord) expiration(c djinn.ID) time.Time {
	exp, _ := l.Expiration(c)
	return exp
}

// holds reports whether the landlord still knows the lease (it was not
// cancelled; it may have lapsed).
func (l *landlord) holds(c djinn.ID) bool { return l.Known(c) }

// stats returns the renewal calls the landlord answered, the leases it
// found lapsed, and every duration asked for with when it was asked.
func (l *landlord) stats() (calls, lapsed int, asked []time.Duration, askedAt []time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for more := true; more; {
		select {
		case c := <-l.Calls():
			for _, d := range c.Durations {
				l.asked = append(l.asked, d)
				l.askedAt = append(l.askedAt, c.At)
			}
		default:
			more = false
		}
	}
	n := l.Counts()
	return int(n.RenewCalls + n.RenewAllCalls), int(n.Lapses), slices.Clone(l.asked), slices.Clone(l.askedAt)
}

// landlords routes renewals to the landlords by service id.
type landlords struct {
	mu  sync.Mutex
	all map[djinn.ID]*landlord
}

func (ls *landlords) RenewAll(ctx context.Context, ref djinn.Ref, cookies []djinn.ID, durations []time.Duration) ([]time.Duration, []*djinnpb.Error, *djinnpb.Error) {
	ls.mu.Lock()
	l := ls.all[ref.Service]
	ls.mu.Unlock()
	if l == nil {
		return nil, nil, grpcerr.ToProto(djinn.Errorf(djinn.Unavailable, "landlord %s: unreachable", ref))
	}
	req := &djinnpb.RenewAllRequest{Cookies: batch.PackCookies(cookies), DurationNanos: make([]int64, len(durations))}
	for i, d := range durations {
		req.DurationNanos[i] = int64(d)
	}
	resp, err := l.Client().RenewAll(ctx, req)
	if err != nil {
		return nil, nil, grpcerr.ToProto(grpcerr.FromStatus(err))
	}
	granted := make([]time.Duration, len(cookies))
	for i, g := range resp.GetGrantedNanos() {
		granted[i] = time.Duration(g)
	}
	var errs []*djinnpb.Error
	for _, ie := range resp.GetErrors() {
		if errs == nil {
			errs = make([]*djinnpb.Error, len(cookies))
		}
		errs[ie.GetIndex()] = ie.GetError()
	}
	return granted, errs, nil
}

// listener records events sent to it and answers with its script.
type listener struct {
	mu     sync.Mutex
	got    map[djinn.Ref][]*djinnpb.RemoteEvent
	at     map[djinn.Ref][]time.Time // when each of got arrived
	sends  map[djinn.Ref]int         // Send calls, accepted or not
	answer func(target djinn.Ref, ev *djinnpb.RemoteEvent) error
}

func (s *listener) Send(_ context.Context, target djinn.Ref, events []*djinnpb.RemoteEvent) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sends == nil {
		s.sends = map[djinn.Ref]int{}
	}
	if s.at == nil {
		s.at = map[djinn.Ref][]time.Time{}
	}
	s.sends[target]++
	for i, ev := range events {
		if s.answer != nil {
			if err := s.answer(target, ev); err != nil {
				return i, err
			}
		}
		s.got[target] = append(s.got[target], ev)
		s.at[target] = append(s.at[target], time.Now())
	}
	return len(events), nil
}

func (s *listener) events(target djinn.Ref) []*djinnpb.RemoteEvent {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*djinnpb.RemoteEvent(nil), s.got[target]...)
}

// gate is the renewal service's log: the fixture's, unless closed, when
// every proposal fails (a log that does not take commands for a while).
type gate struct {
	log *statetest.Log

	mu       sync.Mutex
	closed   error
	refused  int // proposals refused while closed
	proposed int
}

func (g *gate) Propose(ctx context.Context, cmd *statepb.Command) (any, error) {
	g.mu.Lock()
	g.proposed++
	err := g.closed
	if err != nil {
		g.refused++
	}
	g.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return g.log.Propose(ctx, cmd)
}

func (g *gate) close(err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closed = err
}

func (g *gate) refusals() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.refused
}

type fixture struct {
	t         *testing.T
	log       statetest.Service[*renewal.State]
	gate      *gate // the renewal service's way to log
	lessor    *lease.Lessor
	svc       *renewal.Service
	landlords *landlords
	listener  *listener
	self      djinn.Ref
	stop      func()
}

func newRenewalState(m *state.Machine) *renewal.State { return renewal.NewState(m.Leases, m.ServiceID) }

func newFixture(t *testing.T, cfg renewal.Config) *fixture {
	return newFixtureOver(t, statetest.For(newRenewalState), &landlords{all: map[djinn.ID]*landlord{}}, &listener{got: map[djinn.Ref][]*djinnpb.RemoteEvent{}}, cfg)
}

// newFixtureOver starts a service over log's machine with the given fake
// landlords and listener: a restart over a restored machine shares them with
// the fixture it replaces.
func newFixtureOver(t *testing.T, log statetest.Service[*renewal.State], ls *landlords, lis *listener, cfg renewal.Config) *fixture {
	f := &fixture{t: t, log: log, landlords: ls, listener: lis}
	f.self = djinn.Ref{Endpoint: "127.0.0.1:4161", Service: f.log.M.ServiceID(), Object: djinn.ID{'r'}}
	f.lessor = lease.NewLessor(f.log.M.Leases, f.log, lease.Config{Slack: 10 * time.Second})
	cfg.Landlords = f.landlords
	cfg.Delivery = event.Config{Sender: f.listener, MaxBatch: 8, MinBackoff: time.Second, MaxBackoff: 8 * time.Second}
	if cfg.Lease == (lease.Policy{}) {
		cfg.Lease = lease.Policy{Default: time.Hour, Max: 24 * time.Hour}
	}
	f.gate = &gate{log: log.Log}
	svc, err := renewal.New(f.log.State, f.lessor, f.gate, time.Now, func() djinn.Ref { return f.self }, cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.svc = svc
	f.start()
	return f
}

func (f *fixture) start() {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); f.lessor.Run(ctx) }()
	go func() { defer wg.Done(); f.svc.Run(ctx) }()
	f.stop = func() { cancel(); wg.Wait() }
	synctest.Wait()
}

func (f *fixture) landlord(max time.Duration) *landlord {
	l := newLandlord(max)
	f.landlords.mu.Lock()
	f.landlords.all[l.Ref().Service] = l
	f.landlords.mu.Unlock()
	return l
}

func (f *fixture) create(d time.Duration) renewal.Set {
	f.t.Helper()
	s, err := f.svc.Create(context.Background(), d)
	if err != nil {
		f.t.Fatal(err)
	}
	return s
}

func target(name string) (*djinnpb.Ref, djinn.Ref) {
	var obj djinn.ID
	copy(obj[:], name)
	r := djinn.Ref{Endpoint: "127.0.0.1:7777", Service: djinn.ID{'l', 's', 'n'}, Object: obj}
	return &djinnpb.Ref{Endpoint: r.Endpoint, ServiceId: r.Service[:], ObjectId: r.Object[:]}, r
}

func TestSmokeRenewsUntilDesired(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, renewal.Config{})
		defer f.stop()
		ll := f.landlord(10 * time.Second)
		st := f.create(time.Hour)
		tpb, tref := target("fail")
		if _, err := f.svc.Listen(context.Background(), st.Info.ID, renewal.FailureEventID, tpb, 0, []byte("hb")); err != nil {
			t.Fatal(err)
		}
		l, c := ll.grant(10 * time.Second)
		if err := f.svc.RenewFor(context.Background(), st.Info.ID, l, 5*time.Minute, djinn.Forever); err != nil {
			t.Fatal(err)
		}
		time.Sleep(4 * time.Minute)
		synctest.Wait()
		if !ll.expiration(c).After(time.Now()) {
			t.Fatalf("lease lapsed: expires %v, now %v", ll.expiration(c), time.Now())
		}
		ls, err := f.svc.Leases(context.Background(), st.Info.ID)
		if err != nil || len(ls) != 1 {
			t.Fatalf("leases %v %v", ls, err)
		}
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		ls, _ = f.svc.Leases(context.Background(), st.Info.ID)
		if len(ls) != 0 {
			t.Fatalf("lease still in set after desired expiration: %v", ls)
		}
		if got := f.listener.events(tref); len(got) != 0 {
			t.Fatalf("failure events %v", got)
		}
		calls, lapsed, asked, _ := ll.stats()
		t.Logf("calls %d lapsed %d asked %v", calls, lapsed, asked)
	})
}

func (s *listener) setAnswer(answer func(djinn.Ref, *djinnpb.RemoteEvent) error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.answer = answer
}

func (s *listener) arrivals(target djinn.Ref) []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Time(nil), s.at[target]...)
}

func (s *listener) sendsTo(target djinn.Ref) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sends[target]
}

func (f *fixture) renewFor(st renewal.Set, l *djinnpb.Lease, desired, renew time.Duration) error {
	return f.svc.RenewFor(context.Background(), st.Info.ID, l, desired, renew)
}

func (f *fixture) mustRenewFor(st renewal.Set, l *djinnpb.Lease, desired, renew time.Duration) {
	f.t.Helper()
	if err := f.renewFor(st, l, desired, renew); err != nil {
		f.t.Fatalf("renewFor: %v", err)
	}
}

func (f *fixture) leases(st renewal.Set) []*djinnpb.ClientLease {
	f.t.Helper()
	ls, err := f.svc.Leases(context.Background(), st.Info.ID)
	if err != nil {
		f.t.Fatalf("getLeases: %v", err)
	}
	return ls
}

// leaseOf returns the set's client lease with cookie c, or nil.
func (f *fixture) leaseOf(st renewal.Set, c djinn.ID) *djinnpb.ClientLease {
	f.t.Helper()
	for _, cl := range f.leases(st) {
		if djinn.ID(cl.GetLease().GetCookie()) == c {
			return cl
		}
	}
	return nil
}

// listen registers the listener name for eventID on the set.
func (f *fixture) listen(st renewal.Set, eventID int64, name string, minWarning time.Duration) (*djinnpb.EventRegistration, djinn.Ref) {
	f.t.Helper()
	tpb, tref := target(name)
	reg, err := f.svc.Listen(context.Background(), st.Info.ID, eventID, tpb, minWarning, []byte("hb-"+name))
	if err != nil {
		f.t.Fatalf("listen: %v", err)
	}
	return reg, tref
}

func (f *fixture) info(st renewal.Set) renewal.SetInfo {
	f.t.Helper()
	in, err := f.log.State.Get(st.Info.ID)
	if err != nil {
		f.t.Fatalf("set %s: %v", st.Info.ID, err)
	}
	return in
}

// advance moves the bubble's clock on by d and lets everything settle.
func advance(d time.Duration) {
	time.Sleep(d)
	synctest.Wait()
}

func failureOf(t *testing.T, ev *djinnpb.RemoteEvent) *djinnpb.RenewalFailure {
	t.Helper()
	var p djinnpb.RenewalFailure
	if err := ev.GetPayload().UnmarshalTo(&p); err != nil {
		t.Fatalf("failure event payload: %v", err)
	}
	return &p
}

func warningOf(t *testing.T, ev *djinnpb.RemoteEvent) *djinnpb.ExpirationWarning {
	t.Helper()
	var p djinnpb.ExpirationWarning
	if err := ev.GetPayload().UnmarshalTo(&p); err != nil {
		t.Fatalf("warning event payload: %v", err)
	}
	return &p
}

func cookieOf(l *djinnpb.Lease) djinn.ID { return djinn.ID(l.GetCookie()) }

func wantKind(t *testing.T, err error, k djinn.Kind) {
	t.Helper()
	if k == "" {
		if err != nil {
			t.Fatalf("err %v, want none", err)
		}
		return
	}
	if !errors.Is(err, k) {
		t.Fatalf("err %v (kind %q), want kind %s", err, djinn.KindOf(err), k)
	}
}
