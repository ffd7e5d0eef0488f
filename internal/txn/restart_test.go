package txn_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/lease"
	"github.com/djinn-go/djinn/internal/state/statetest"
	"github.com/djinn-go/djinn/internal/txn"
	"github.com/djinn-go/djinn/proto/djinnpb"
	"github.com/djinn-go/djinn/proto/statepb"
)

// restart snapshots f's machine, restores it into a fresh one and starts
// a new manager over it, with the same participants: what a restarted
// single node (or a new leader) does.
func (f *fixture) restart() *fixture {
	f.t.Helper()
	return f.restartConfig(nil)
}

// restartConfig is restart with the new manager's configuration changed by
// configure, if not nil.
func (f *fixture) restartConfig(configure func(*txn.Config)) *fixture {
	f.t.Helper()
	f.stop()
	log, err := statetest.Restart(f.log.Log, newTxnState)
	if err != nil {
		f.t.Fatal(err)
	}
	m := log.M
	g := &fixture{t: f.t, log: log, parts: f.parts, managers: f.managers}
	g.lessor = lease.NewLessor(m.Leases, g.log, lease.Config{Slack: 10 * time.Second})
	self := djinn.Ref{Endpoint: "127.0.0.1:4161", Service: m.ServiceID(), Object: djinn.ID{'t'}}
	cfg := txn.Config{
		Participants: remote{f.parts}, VoteTimeout: 5 * time.Second, Abandon: time.Minute, Retention: time.Hour, Managers: f.managers,
	}
	if configure != nil {
		configure(&cfg)
	}
	svc, err := txn.New(log.State, g.lessor, g.log, time.Now, func() djinn.Ref { return self }, cfg)
	if err != nil {
		f.t.Fatal(err)
	}
	g.svc = svc
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); g.lessor.Run(ctx) }()
	go func() { defer wg.Done(); svc.Run(ctx) }()
	g.stop = func() { cancel(); wg.Wait() }
	synctest.Wait()
	return g
}

// TX.2.8: after a restart, ACTIVE transactions are still ACTIVE with their
// participants, and a COMMITTED transaction whose participants were not
// all told goes on telling them.
func TestRestartKeepsTransactions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		f.parts.set("a", txn.Prepared, nil)
		f.parts.set("b", txn.Prepared, nil)
		active := f.create(time.Hour)
		f.join(active.ID, "a")
		done := f.create(time.Hour)
		f.join(done.ID, "a", "b")
		f.parts.failOp("b commit", djinn.Errorf(djinn.Unavailable, "b: down"))
		if err := f.svc.Commit(context.Background(), done.ID, nil); err != nil {
			t.Fatal(err)
		}
		g := f.restart()
		defer g.stop()
		if g.state(active.ID) != txn.Active {
			t.Fatalf("an ACTIVE transaction after restart: %v", g.state(active.ID))
		}
		in, _ := g.log.State.Get(active.ID)
		if len(in.Parts) != 1 {
			t.Fatalf("participants after restart: %d, want 1", len(in.Parts))
		}
		if g.state(done.ID) != txn.Committed {
			t.Fatalf("a COMMITTED transaction after restart: %v", g.state(done.ID))
		}
		g.parts.failOp("b commit", nil)
		time.Sleep(time.Minute)
		synctest.Wait()
		d, _ := g.svc.Describe(context.Background(), done.ID)
		for _, p := range d.Participants {
			if !p.Notified {
				t.Fatal("TX.2.8: after a restart the manager must go on until every PREPARED participant rolled forward")
			}
		}
		// New ids never reuse ones the manager still knows.
		for range 100 {
			if c := g.create(time.Minute); c.ID == done.ID || c.ID == active.ID || c.ID == 0 {
				t.Fatalf("new transaction id %d after restart reuses one in use", c.ID)
			}
		}
	})
}

// A transaction VOTING when the manager stopped is voted again by the
// next one, and decided.
func TestRestartResumesVoting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		f.parts.set("a", txn.Prepared, nil)
		c := f.create(time.Hour)
		f.join(c.ID, "a", "b")
		if _, err := f.log.Propose(context.Background(), &statepb.Command{Op: &statepb.Command_TxnVoting{TxnVoting: &statepb.TxnVoting{Id: c.ID}}}); err != nil {
			t.Fatal(err)
		}
		f.parts.set("b", txn.Prepared, nil)
		g := f.restart()
		defer g.stop()
		time.Sleep(time.Second)
		synctest.Wait()
		if s := g.state(c.ID); s != txn.Committed {
			t.Fatalf("a VOTING transaction after restart: %v, want it voted again and COMMITTED", s)
		}
	})
}

// TestRestartKeepsTheTree: snapshot records come in any order; a restore
// links every nested transaction to its parent and children the same,
// whichever came first.
func TestRestartKeepsTheTree(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		ctx := context.Background()
		top := f.create(time.Hour)
		ids := []uint64{top.ID}
		for i := range 12 {
			c, err := f.svc.CreateNested(ctx, ids[i/3], txn.SecretOf(f.svc, ids[i/3]), time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, c.ID)
		}
		describe := func(f *fixture) map[uint64]string {
			out := map[uint64]string{}
			for _, id := range ids {
				d, err := f.svc.Describe(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				out[id] = fmt.Sprint(d.GetParentId(), d.GetChildren())
			}
			return out
		}
		want := describe(f)
		for range 5 {
			f = f.restart()
			if got := describe(f); !maps.Equal(got, want) {
				t.Fatalf("after a restart: %v, want %v", got, want)
			}
		}
		f.stop()
	})
}

// fakeManagers is another manager, as a transaction nested in its
// transactions sees it.
type fakeManagers struct {
	mu       sync.Mutex
	joins    []string
	promoted [][]*djinnpb.Ref
}

func (m *fakeManagers) Join(_ context.Context, mgr djinn.Ref, id uint64, _ djinn.ID, p *djinnpb.Ref, crash int64) (*djinnpb.JoinTransactionResponse, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.joins = append(m.joins, fmt.Sprintf("%d %x %d", id, p.GetObjectId(), crash))
	if id == 404 {
		return nil, djinn.Errorf(djinn.UnknownTransaction, "transaction 404: unknown")
	}
	return &djinnpb.JoinTransactionResponse{Ancestors: []uint64{7}}, nil
}

func (m *fakeManagers) Promote(_ context.Context, mgr djinn.Ref, id uint64, _ djinn.ID, parts []*djinnpb.Ref, crashes []int64, drop *djinnpb.Ref) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.promoted = append(m.promoted, parts)
	return nil
}

// TestRemoteParentSurvivesRestart: a transaction nested in another
// manager's keeps its parent and ancestry across a restart, and commits
// into it by promotion.
func TestRemoteParentSurvivesRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		other := &fakeManagers{}
		f := newFixtureWith(t, other)
		ctx := context.Background()
		them := djinn.Ref{Endpoint: "127.0.0.9:4161", Service: djinn.ID{9}, Object: djinn.ID{'t'}}
		_, err := f.svc.CreateUnder(ctx, them, 404, djinn.ID{}, time.Hour)
		wantKind(t, "nesting in a transaction the other manager does not know", err, djinn.UnknownTransaction)
		c, err := f.svc.CreateUnder(ctx, them, 5, djinn.ID{}, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if got := other.joins; len(got) != 2 || got[1] != fmt.Sprintf("5 %x 1", txn.NestID[:]) {
			t.Fatalf("joins at the other manager %q: want the nest participant, crash count 1", got)
		}
		f.join(c.ID, "a")
		f.parts.set("a", txn.Prepared, nil)
		g := f.restart()
		ids, mgrs, err := g.svc.Ancestors(c.ID)
		if err != nil || !slices.Equal(ids, []uint64{5, 7}) || len(mgrs) != 2 || string(mgrs[0].GetServiceId()) != string(them.Service[:]) {
			t.Fatalf("ancestors after a restart: %v %v %v, want 5 and 7 of the other manager", ids, mgrs, err)
		}
		if err := g.svc.Commit(ctx, c.ID, nil); err != nil {
			t.Fatal(err)
		}
		if len(other.promoted) != 1 || len(other.promoted[0]) != 1 || name(other.promoted[0][0]) != "a" {
			t.Fatalf("promoted %v, want participant a into the parent", other.promoted)
		}
		g.stop()
	})
}
