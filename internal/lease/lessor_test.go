package lease

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/proto/statepb"
)

// memLog applies lease commands straight to a table, recording them.
type memLog struct {
	mu       sync.Mutex
	t        *Table
	ended    chan Owner // told of leases that end, when not nil
	cmds     []*statepb.Command
	fail     error
	notLeads bool
	lapsed   bool // no leader lease: answers need VerifyLeader
	verifies int  // VerifyLeader calls
	noExpiry bool // expiry proposals fail: the lease stays in the table
}

var _ Proposer = (*memLog)(nil)

func (m *memLog) Propose(_ context.Context, c *statepb.Command) (any, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return nil, m.fail
	}
	if _, ok := c.Op.(*statepb.Command_LeaseExpire); ok && m.noExpiry {
		return nil, djinn.Errorf(djinn.Unavailable, "expiry held back by the test")
	}
	m.cmds = append(m.cmds, c)
	switch op := c.Op.(type) {
	case *statepb.Command_LeaseCancel:
		errs, ended := m.t.ApplyCancel(op.LeaseCancel.Cookies)
		m.tell(ended)
		return errs, nil
	case *statepb.Command_LeaseExpire:
		m.tell(m.t.ApplyExpire(op.LeaseExpire.Cookies))
	case *statepb.Command_LeaseHorizon:
		m.t.ApplyHorizon(op.LeaseHorizon.Entries)
	}
	return nil, nil
}

// tell passes the owners of ended leases on, as the state machine does.
func (m *memLog) tell(owners []Owner) {
	for _, o := range owners {
		if m.ended != nil {
			m.ended <- o
		}
	}
}

// LeaderLease holds unless the test let it lapse or deposed the leader
// (a deposed leader's lease has lapsed: that is the lease's guarantee).
func (m *memLog) LeaderLease() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return !m.lapsed && !m.notLeads
}

func (m *memLog) VerifyLeader() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.verifies++
	if m.notLeads {
		return djinn.Errorf(djinn.Unavailable, "not the leader")
	}
	return nil
}

func (m *memLog) count(kind string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, c := range m.cmds {
		switch c.Op.(type) {
		case *statepb.Command_LeaseExpire:
			if kind == "expire" {
				n++
			}
		case *statepb.Command_LeaseHorizon:
			if kind == "horizon" {
				n++
			}
		}
	}
	return n
}

type fixture struct {
	t      *testing.T
	table  *Table
	log    *memLog
	lessor *Lessor
	ended  chan Owner
	cancel context.CancelFunc
	done   chan struct{}
}

const slack = 10 * time.Second

// testKind is the kind of the fixture's leases.
const testKind Kind = 1

// newFixture starts a lessor inside a synctest bubble.
func newFixture(t *testing.T, p Policy) *fixture {
	f := &fixture{t: t, ended: make(chan Owner, 100000)}
	f.table = NewTable()
	if err := f.table.SetPolicy(testKind, p); err != nil {
		t.Fatal(err)
	}
	f.log = &memLog{t: f.table, ended: f.ended}
	f.lessor = NewLessor(f.table, f.log, Config{Slack: slack, Grace: time.Second})
	f.start()
	return f
}

func (f *fixture) start() {
	ctx, cancel := context.WithCancel(context.Background())
	f.cancel, f.done = cancel, make(chan struct{})
	go func() {
		defer close(f.done)
		f.lessor.Run(ctx)
	}()
	synctest.Wait()
}

func (f *fixture) stop() {
	f.cancel()
	<-f.done
}

// grant adds a lease as a service's Apply would, for d from now.
func (f *fixture) grant(d time.Duration) djinn.ID {
	c := djinn.NewID()
	exp := djinn.AddDuration(time.Now(), d)
	if err := f.table.ApplyGrant(c, Owner{Kind: testKind, ID: c}, "", toNanos(exp), f.lessor.Horizon(exp)); err != nil {
		f.t.Fatal(err)
	}
	synctest.Wait()
	return c
}

var policy = Policy{Default: time.Minute, Max: 10 * time.Minute}

func TestRenewNegotiation(t *testing.T) {
	tests := []struct {
		name      string
		policy    Policy
		initial   time.Duration
		request   time.Duration
		want      time.Duration
		wantKind  djinn.Kind
		wantInErr string
	}{
		{name: "LE.2.2 Any gets the service default", policy: policy, initial: time.Second, request: djinn.Any, want: time.Minute},
		{name: "LE.2.2 a request is granted no more than asked", policy: policy, initial: time.Second, request: 30 * time.Second, want: 30 * time.Second},
		{name: "LE.2.2 requests above the maximum get the maximum", policy: policy, initial: time.Second, request: time.Hour, want: 10 * time.Minute},
		{name: "LE.2.2 Forever is capped by a finite policy", policy: policy, initial: time.Second, request: djinn.Forever, want: 10 * time.Minute},
		{name: "LE.2.2 Forever allowed where the policy says", policy: Policy{Default: time.Minute, Max: djinn.Forever}, initial: time.Second, request: djinn.Forever, want: djinn.Forever},
		{name: "renewal never shortens below remaining time unless asked", policy: policy, initial: 20 * time.Minute, request: time.Hour, want: 20 * time.Minute},
		{name: "renewal with Any keeps a longer remaining time", policy: policy, initial: 5 * time.Minute, request: djinn.Any, want: 5 * time.Minute},
		{name: "renewal may shorten when the holder asks for less", policy: policy, initial: 5 * time.Minute, request: time.Second, want: time.Second},
		{name: "LE.2.1 a renewed lease is like any other: zero is refused as for a grant", policy: policy, initial: time.Minute, request: 0, wantKind: djinn.InvalidArgument, wantInErr: "lease duration 0s: must be positive, Forever or Any"},
		{name: "negative duration other than Any is invalid", policy: policy, initial: time.Minute, request: -5 * time.Second, wantKind: djinn.InvalidArgument, wantInErr: "-5s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFixture(t, tt.policy)
				defer f.stop()
				c := f.grant(tt.initial)
				got, err := f.lessor.Renew(context.Background(), c, tt.request)
				if tt.wantKind != "" {
					if !errors.Is(err, tt.wantKind) || !strings.Contains(err.Error(), tt.wantInErr) {
						t.Fatalf("Renew(%v) = %v, want %s error naming %q", tt.request, err, tt.wantKind, tt.wantInErr)
					}
					return
				}
				if err != nil || got != tt.want {
					t.Fatalf("Renew(%v) = %v, %v; want %v", tt.request, got, err, tt.want)
				}
			})
		})
	}
}

func TestUnknownLease(t *testing.T) {
	tests := []struct {
		name  string
		setup func(f *fixture) djinn.ID
	}{
		{"LE.2.2 a lease never granted is unknown", func(f *fixture) djinn.ID { return djinn.NewID() }},
		{"LE.2.2 an expired lease is unknown", func(f *fixture) djinn.ID {
			c := f.grant(time.Second)
			time.Sleep(2 * time.Second)
			synctest.Wait()
			return c
		}},
		{"LE.2.2 a cancelled lease is unknown", func(f *fixture) djinn.ID {
			c := f.grant(time.Minute)
			if err := f.lessor.Cancel(context.Background(), []djinn.ID{c})[0]; err != nil {
				f.t.Fatal(err)
			}
			return c
		}},
		{"LE.2.2 an expired lease not yet removed is unknown", func(f *fixture) djinn.ID {
			c := f.grant(time.Second)
			f.log.mu.Lock()
			f.log.noExpiry = true // the expiry loop cannot remove it
			f.log.mu.Unlock()
			time.Sleep(2 * time.Second)
			synctest.Wait()
			f.log.mu.Lock()
			f.log.noExpiry = false // the answer may log it
			f.log.mu.Unlock()
			return c
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFixture(t, policy)
				defer f.stop()
				c := tt.setup(f)
				if _, err := f.lessor.Renew(context.Background(), c, time.Minute); !errors.Is(err, djinn.ErrUnknownLease) {
					t.Errorf("Renew = %v, want UnknownLease", err)
				}
				if err := f.lessor.Cancel(context.Background(), []djinn.ID{c})[0]; !errors.Is(err, djinn.ErrUnknownLease) {
					t.Errorf("Cancel = %v, want UnknownLease", err)
				}
			})
		})
	}
}

// TestNeverExpiresEarly: a lease never expires before its granted
// expiration, and is ended (its owner told) once it passes.
func TestNeverExpiresEarly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, policy)
		defer f.stop()
		c := f.grant(10 * time.Second)
		time.Sleep(5 * time.Second)
		if _, err := f.lessor.Renew(context.Background(), c, 10*time.Second); err != nil {
			t.Fatal(err)
		}
		// Granted until t=15s.
		time.Sleep(10*time.Second - time.Nanosecond)
		synctest.Wait()
		if !f.table.Alive(c, time.Now()) || len(f.ended) != 0 {
			t.Fatal("lease ended before its granted expiration")
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if o := <-f.ended; o.ID != c {
			t.Fatalf("ended %v, want %v", o.ID, c)
		}
		if f.table.Len() != 0 {
			t.Fatalf("table holds %d leases after expiry", f.table.Len())
		}
	})
}

func TestShortenedLeaseExpiresAtNewTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, policy)
		defer f.stop()
		c := f.grant(5 * time.Minute)
		if _, err := f.lessor.Renew(context.Background(), c, time.Second); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if f.table.Len() != 0 {
			t.Fatal("a lease renewed for less did not expire at its new expiration")
		}
	})
}

func TestExpiryIsBatchedAndRateLimited(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, policy)
		defer f.stop()
		for range 2500 {
			f.grant(time.Second)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if got := f.log.count("expire"); got != 1 {
			t.Fatalf("%d expiry commands at once, want 1 (batch of 1000, then paced)", got)
		}
		if f.table.Len() != 1500 {
			t.Fatalf("%d leases left after first batch, want 1500", f.table.Len())
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if f.table.Len() != 0 || f.log.count("expire") != 3 {
			t.Fatalf("after a second: %d leases, %d expiry commands; want 0 and 3", f.table.Len(), f.log.count("expire"))
		}
	})
}

func TestExpiryWaitsForConfirmedLeadership(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, policy)
		defer f.stop()
		f.log.mu.Lock()
		f.log.notLeads = true
		f.log.mu.Unlock()
		c := f.grant(time.Second)
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if f.table.Len() != 1 {
			t.Fatal("a lessor that could not confirm leadership expired a lease")
		}
		f.log.mu.Lock()
		f.log.notLeads = false
		f.log.mu.Unlock()
		time.Sleep(time.Second)
		synctest.Wait()
		if _, ok := f.table.Principal(c); ok {
			t.Fatal("expiry not retried after leadership was confirmed")
		}
	})
}

// TestRenewPastHorizonLogsFirst: a renewal beyond the logged horizon writes
// a new horizon before it is granted, so a new leader honours it.
func TestRenewPastHorizonLogsFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, policy)
		defer f.stop()
		c := f.grant(time.Minute) // horizon = 60s + slack
		if _, err := f.lessor.Renew(context.Background(), c, time.Minute); err != nil {
			t.Fatal(err)
		}
		if n := f.log.count("horizon"); n != 0 {
			t.Fatalf("renewal within the horizon wrote %d horizons", n)
		}
		if _, err := f.lessor.Renew(context.Background(), c, 10*time.Minute); err != nil {
			t.Fatal(err)
		}
		if n := f.log.count("horizon"); n != 1 {
			t.Fatalf("renewal past the horizon wrote %d horizons, want 1", n)
		}
		info, _ := f.table.Lookup(c, time.Now())
		if want := time.Now().Add(10*time.Minute + slack); !info.Horizon.Equal(want) {
			t.Fatalf("horizon %v, want %v", info.Horizon, want)
		}
	})
}

func TestRenewFailsWhenHorizonCannotBeLogged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, policy)
		defer f.stop()
		c := f.grant(time.Minute)
		before, _ := f.table.Lookup(c, time.Now())
		f.log.mu.Lock()
		f.log.fail = djinn.Errorf(djinn.Unavailable, "log down")
		f.log.mu.Unlock()
		if _, err := f.lessor.Renew(context.Background(), c, 10*time.Minute); !errors.Is(err, djinn.ErrUnavailable) {
			t.Fatalf("Renew = %v, want Unavailable", err)
		}
		after, _ := f.table.Lookup(c, time.Now())
		if !after.Expires.Equal(before.Expires) {
			t.Fatalf("LE.2.2: a failed renewal changed the expiration from %v to %v", before.Expires, after.Expires)
		}
	})
}

func TestCheckpointRaisesBusyHorizons(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, policy)
		defer f.stop()
		c := f.grant(time.Minute)
		for range 8 {
			time.Sleep(time.Second)
			if _, err := f.lessor.Renew(context.Background(), c, time.Minute); err != nil {
				t.Fatal(err)
			}
		}
		synctest.Wait()
		if f.lessor.HorizonSyncs.Load() != 0 {
			t.Fatalf("%d renewals waited for the log; the checkpoint should have raised the horizon first", f.lessor.HorizonSyncs.Load())
		}
		if f.lessor.Checkpoints.Load() == 0 {
			t.Fatal("no checkpoint raised the horizon of a busy lease")
		}
	})
}

// TestPromotion models a restart or failover: a new leader sees only the
// logged horizons.
func TestPromotion(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, policy)
		renewed := f.grant(time.Minute)
		short := f.grant(time.Second)
		if _, err := f.lessor.Renew(context.Background(), renewed, 5*time.Minute); err != nil {
			t.Fatal(err)
		}
		granted := time.Now().Add(5 * time.Minute)
		f.stop()

		// Down for 20s: the short lease's horizon (1s + slack) passes.
		time.Sleep(20 * time.Second)
		f.start()
		defer f.stop()
		info, ok := f.table.Lookup(renewed, time.Now())
		if !ok || info.Expires.Before(granted) {
			t.Fatalf("after promotion the renewed lease expires %v, before its granted %v", info.Expires, granted)
		}
		if info.Expires.After(granted.Add(slack)) {
			t.Fatalf("after promotion the lease lives to %v, more than slack past %v", info.Expires, granted)
		}
		synctest.Wait()
		if f.table.Alive(short, time.Now()) {
			t.Fatal("a lease whose horizon passed while no leader ran came back to life")
		}
	})
}

func TestPromotionGrace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, policy)
		c := f.grant(time.Minute) // horizon at 70s
		f.stop()
		time.Sleep(70*time.Second - 100*time.Millisecond)
		f.start()
		defer f.stop()
		info, ok := f.table.Lookup(c, time.Now())
		if !ok || info.Expires.Before(time.Now().Add(time.Second)) {
			t.Fatalf("a new leader did not extend a live lease by the grace period: %v %v", info.Expires, ok)
		}
	})
}

func TestInactiveLessorRefuses(t *testing.T) {
	table := NewTable()
	l := NewLessor(table, &memLog{t: table}, Config{})
	if _, err := l.Renew(context.Background(), djinn.NewID(), time.Second); !errors.Is(err, djinn.ErrUnavailable) {
		t.Fatalf("Renew on a follower = %v, want Unavailable", err)
	}
	if err := l.Cancel(context.Background(), []djinn.ID{djinn.NewID()})[0]; !errors.Is(err, djinn.ErrUnavailable) {
		t.Fatalf("Cancel on a follower = %v, want Unavailable", err)
	}
}

func TestPolicyCheck(t *testing.T) {
	for _, p := range []Policy{{}, {Default: time.Minute}, {Default: time.Hour, Max: time.Minute}, {Default: -1, Max: time.Minute}} {
		if err := p.Check(); !errors.Is(err, djinn.ErrInvalidArgument) {
			t.Errorf("Policy%+v.Check() = %v, want invalid argument", p, err)
		}
	}
}

func TestRenewAllMixed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, policy)
		defer f.stop()
		a, b := f.grant(time.Minute), f.grant(time.Minute)
		res := f.lessor.RenewAll(context.Background(), []djinn.ID{a, djinn.NewID(), b}, []time.Duration{time.Minute, time.Minute, -7})
		if res[0].Err != nil || res[0].Granted != time.Minute {
			t.Errorf("first = %+v", res[0])
		}
		if !errors.Is(res[1].Err, djinn.ErrUnknownLease) {
			t.Errorf("unknown = %v", res[1].Err)
		}
		if !errors.Is(res[2].Err, djinn.ErrInvalidArgument) {
			t.Errorf("negative = %v", res[2].Err)
		}
	})
}

// gatedLog blocks horizon writes until released, then fails or passes
// them.
type gatedLog struct {
	*memLog
	gate chan error
}

func (g *gatedLog) Propose(ctx context.Context, c *statepb.Command) (any, error) {
	if c.GetLeaseHorizon() != nil {
		if err := <-g.gate; err != nil {
			return nil, err
		}
	}
	return g.memLog.Propose(ctx, c)
}

// TestFailedRenewalStillExpires: a renewal whose horizon write fails while
// the lease's old expiration passes leaves the lease to expire then — not
// alive-looking-dead until the failed renewal's expiration.
func TestFailedRenewalStillExpires(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, policy)
		f.stop()
		g := &gatedLog{memLog: f.log, gate: make(chan error)}
		f.lessor = NewLessor(f.table, g, Config{Slack: slack, Grace: time.Second})
		f.start()
		defer f.stop()
		c := f.grant(time.Second)
		done := make(chan error)
		go func() {
			_, err := f.lessor.Renew(context.Background(), c, 10*time.Minute)
			done <- err
		}()
		synctest.Wait()
		time.Sleep(2 * time.Second) // the old expiration passes while the write waits
		synctest.Wait()
		g.gate <- djinn.Errorf(djinn.Unavailable, "log down")
		if err := <-done; !errors.Is(err, djinn.ErrUnavailable) {
			t.Fatalf("Renew = %v, want Unavailable", err)
		}
		synctest.Wait()
		if f.table.Len() != 0 {
			t.Fatal("a lease whose renewal failed after its expiration was never expired")
		}
	})
}

// TestFailedRenewalDoesNotUndoAnother: a renewal that succeeded after a
// failing one is kept, even when both granted the same expiration.
func TestFailedRenewalDoesNotUndoAnother(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, policy)
		f.stop()
		g := &gatedLog{memLog: f.log, gate: make(chan error)}
		f.lessor = NewLessor(f.table, g, Config{Slack: slack, Grace: time.Second})
		f.start()
		defer f.stop()
		c := f.grant(time.Second)
		first, second := make(chan error), make(chan error)
		go func() {
			_, err := f.lessor.Renew(context.Background(), c, 10*time.Minute)
			first <- err
		}()
		synctest.Wait()
		go func() {
			// Any keeps the time left: the same expiration as the first.
			_, err := f.lessor.Renew(context.Background(), c, djinn.Any)
			second <- err
		}()
		synctest.Wait()
		g.gate <- djinn.Errorf(djinn.Unavailable, "log down") // the first write fails
		if err := <-first; err == nil {
			t.Fatal("first renewal succeeded")
		}
		g.gate <- nil // the second goes through
		if err := <-second; err != nil {
			t.Fatal(err)
		}
		info, ok := f.table.Lookup(c, time.Now())
		if !ok || info.Expires.Before(time.Now().Add(9*time.Minute)) {
			t.Fatalf("the successful renewal was undone: %v %v", info.Expires, ok)
		}
	})
}

// A deposed leader that has not yet heard of its successor denies no
// lease: Renew, Cancel and Remaining of a lease it does not know answer
// Unavailable once a quorum no longer confirms it leads (the successor may
// have granted the lease), and Remaining of one it knows does too (the
// successor may have cancelled it).
func TestDeposedLeaderDeniesNoLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, policy)
		defer f.stop()
		known := f.grant(time.Minute)
		f.log.mu.Lock()
		f.log.notLeads = true
		f.log.mu.Unlock()
		unknown := djinn.NewID()
		if _, err := f.lessor.Renew(context.Background(), unknown, time.Minute); !errors.Is(err, djinn.ErrUnavailable) {
			t.Errorf("Renew of a lease it does not know = %v, want Unavailable", err)
		}
		if err := f.lessor.Cancel(context.Background(), []djinn.ID{unknown})[0]; !errors.Is(err, djinn.ErrUnavailable) {
			t.Errorf("Cancel of a lease it does not know = %v, want Unavailable", err)
		}
		for _, c := range []djinn.ID{unknown, known} {
			if _, _, err := f.lessor.Remaining(c); !errors.Is(err, djinn.ErrUnavailable) {
				t.Errorf("Remaining(%s) = %v, want Unavailable", c, err)
			}
		}
	})
}

// A lease this leader found expired before its expiry loop logged the
// expiry is expired in the log before the UnknownLease answer leaves: a
// successor promotes every lease still in the log to its horizon, so a
// denial known only to the old leader's clock would come back to life
// after a failover (found by the robustness suite: a lease said gone at
// one member, alive at the next leader). When the expiry cannot be
// logged, the answer is Unavailable, and nobody was told the lease is gone.
func TestFoundExpiredStaysExpiredAfterFailover(t *testing.T) {
	type call func(f *fixture, c djinn.ID) error
	renew := func(f *fixture, c djinn.ID) error {
		_, err := f.lessor.Renew(context.Background(), c, time.Minute)
		return err
	}
	cancel := func(f *fixture, c djinn.ID) error {
		return f.lessor.Cancel(context.Background(), []djinn.ID{c})[0]
	}
	remaining := func(f *fixture, c djinn.ID) error {
		_, _, err := f.lessor.Remaining(c)
		return err
	}
	tests := []struct {
		name      string
		call      call
		logFails  bool
		want      djinn.Kind
		aliveNext bool // alive after the next leader's promotion
	}{
		{"LE.2.2 Renew's UnknownLease for a lapsed lease is logged first", renew, false, djinn.UnknownLease, false},
		{"LE.2.2 Cancel's UnknownLease for a lapsed lease is logged first", cancel, false, djinn.UnknownLease, false},
		{"Remaining's UnknownLease for a lapsed lease is logged first", remaining, false, djinn.UnknownLease, false},
		{"LE.2.2 a lapsed lease whose expiry cannot be logged is not denied", renew, true, djinn.Unavailable, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFixture(t, policy)
				c := f.grant(time.Second)
				// The expiry loop confirms leadership first and fails:
				// the lease lapses in memory, its expiry unlogged.
				f.log.mu.Lock()
				f.log.notLeads = true
				f.log.mu.Unlock()
				time.Sleep(2 * time.Second)
				synctest.Wait()
				if !f.table.Lapsed(c, time.Now()) {
					t.Fatal("the lease's expiry was logged before the call: the test proves nothing")
				}
				f.log.mu.Lock()
				f.log.noExpiry = tt.logFails
				f.log.mu.Unlock()
				if err := tt.call(f, c); !errors.Is(err, tt.want) {
					t.Fatalf("answer = %v, want %s", err, tt.want)
				}
				if got, want := f.log.count("expire"), map[bool]int{false: 1, true: 0}[tt.logFails]; got != want {
					t.Errorf("%d expiry entries logged by the answer, want %d", got, want)
				}
				// Failover: a successor promotes what the log holds.
				f.stop()
				f.log.mu.Lock()
				f.log.notLeads, f.log.noExpiry = false, false
				f.log.mu.Unlock()
				f.table.Promote(time.Now(), time.Second)
				if got := f.table.Alive(c, time.Now()); got != tt.aliveNext {
					t.Errorf("after a failover the lease is alive = %v, want %v", got, tt.aliveNext)
				}
			})
		})
	}
}
