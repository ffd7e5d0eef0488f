package renewal_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/event"
	"github.com/djinn-go/djinn/internal/grpcerr"
	"github.com/djinn-go/djinn/internal/lease"
	"github.com/djinn-go/djinn/internal/renewal"
	"github.com/djinn-go/djinn/internal/state/statetest"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// landlord is an in-memory landlord for client leases: it grants at most
// max, and answers each lease with the error its script gives.
type landlord struct {
	mu     sync.Mutex
	ref    djinn.Ref
	max    time.Duration
	exp    map[djinn.ID]time.Time
	calls  int
	asked  []time.Duration // every duration asked for, in order
	fail   func(cookie djinn.ID) error
	down   error // the whole call fails with it
	lapsed int   // renewals of leases that had already expired
}

func newLandlord(name string, max time.Duration) *landlord {
	var svc djinn.ID
	copy(svc[:], name)
	return &landlord{ref: djinn.Ref{Endpoint: "127.0.0.1:9", Service: svc, Object: lease.LandlordID}, max: max, exp: map[djinn.ID]time.Time{}}
}

// grant makes a lease of d and returns its wire form.
func (l *landlord) grant(d time.Duration) (*djinnpb.Lease, djinn.ID) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := djinn.NewID()
	l.exp[c] = djinn.AddDuration(time.Now(), d)
	return lease.Proto(l.ref, c, d), c
}

func (l *landlord) expiration(c djinn.ID) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.exp[c]
}

func (l *landlord) renewAll(_ context.Context, cookies []djinn.ID, durations []time.Duration) ([]time.Duration, []*djinnpb.Error, *djinnpb.Error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls++
	if l.down != nil {
		return nil, nil, grpcerr.ToProto(l.down)
	}
	now := time.Now()
	granted := make([]time.Duration, len(cookies))
	var errs []*djinnpb.Error
	for i, c := range cookies {
		l.asked = append(l.asked, durations[i])
		var err error
		if l.fail != nil {
			err = l.fail(c)
		}
		exp, ok := l.exp[c]
		if err == nil && (!ok || !now.Before(exp)) {
			if ok {
				l.lapsed++
			}
			err = djinn.Errorf(djinn.UnknownLease, "lease %s: unknown", c)
		}
		if err != nil {
			if errs == nil {
				errs = make([]*djinnpb.Error, len(cookies))
			}
			errs[i] = grpcerr.ToProto(err)
			continue
		}
		g := durations[i]
		if g == djinn.Any || g > l.max {
			g = l.max
		}
		granted[i] = g
		l.exp[c] = djinn.AddDuration(now, g)
	}
	return granted, errs, nil
}

// landlords routes renewals to fake landlords by service id.
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
	return l.renewAll(ctx, cookies, durations)
}

// listener records events sent to it and answers with its script.
type listener struct {
	mu     sync.Mutex
	got    map[djinn.Ref][]*djinnpb.RemoteEvent
	answer func(target djinn.Ref, ev *djinnpb.RemoteEvent) error
}

func (s *listener) Send(_ context.Context, target djinn.Ref, events []*djinnpb.RemoteEvent) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, ev := range events {
		if s.answer != nil {
			if err := s.answer(target, ev); err != nil {
				return i, err
			}
		}
		s.got[target] = append(s.got[target], ev)
	}
	return len(events), nil
}

func (s *listener) events(target djinn.Ref) []*djinnpb.RemoteEvent {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*djinnpb.RemoteEvent(nil), s.got[target]...)
}

type fixture struct {
	t         *testing.T
	log       *statetest.Log
	lessor    *lease.Lessor
	svc       *renewal.Service
	landlords *landlords
	listener  *listener
	self      djinn.Ref
	stop      func()
}

func newFixture(t *testing.T, cfg renewal.Config) *fixture {
	f := &fixture{t: t, log: statetest.New(), landlords: &landlords{all: map[djinn.ID]*landlord{}}, listener: &listener{got: map[djinn.Ref][]*djinnpb.RemoteEvent{}}}
	f.self = djinn.Ref{Endpoint: "127.0.0.1:4161", Service: f.log.M.ServiceID(), Object: djinn.ID{'r'}}
	f.lessor = lease.NewLessor(f.log.M.Leases, f.log, lease.Config{Slack: 10 * time.Second})
	cfg.Landlords = f.landlords
	cfg.Delivery = event.Config{Sender: f.listener, MaxBatch: 8, MinBackoff: time.Second, MaxBackoff: 8 * time.Second}
	if cfg.Lease == (lease.Policy{}) {
		cfg.Lease = lease.Policy{Default: time.Hour, Max: 24 * time.Hour}
	}
	svc, err := renewal.New(f.log.M.Renewal, f.lessor, f.log, time.Now, func() djinn.Ref { return f.self }, cfg)
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

func (f *fixture) landlord(name string, max time.Duration) *landlord {
	l := newLandlord(name, max)
	f.landlords.mu.Lock()
	f.landlords.all[l.ref.Service] = l
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
		ll := f.landlord("ll", 10*time.Second)
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
		t.Logf("calls %d lapsed %d asked %v", ll.calls, ll.lapsed, ll.asked)
	})
}
