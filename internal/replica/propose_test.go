package replica

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/proto/statepb"
)

// gate is a log store whose writes wait while it is shut.
type gate struct {
	raft.LogStore
	mu      sync.Mutex
	shut    chan struct{} // guarded by mu; nil while open
	waiting chan struct{} // a value each time a write starts waiting
}

func newGate() *gate { return &gate{waiting: make(chan struct{}, 16)} }

func (g *gate) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.shut = make(chan struct{})
}

func (g *gate) open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.shut != nil {
		close(g.shut)
		g.shut = nil
	}
}

func (g *gate) pass() {
	g.mu.Lock()
	shut := g.shut
	g.mu.Unlock()
	if shut != nil {
		g.waiting <- struct{}{}
		<-shut
	}
}

func (g *gate) StoreLog(l *raft.Log) error { g.pass(); return g.LogStore.StoreLog(l) }

func (g *gate) StoreLogs(ls []*raft.Log) error { g.pass(); return g.LogStore.StoreLogs(ls) }

// gated opens a single node whose log writes pass g, and waits until it
// leads.
func gated(t *testing.T, dir string, g *gate) (*Node, *counter) {
	t.Helper()
	leading := make(chan struct{}, 1)
	c := newCounter()
	n, err := Open(Config{
		DataDir: dir, RaftAddr: "127.0.0.1:0", Bootstrap: true,
		HeartbeatTimeout: 100 * time.Millisecond, ElectionTimeout: 100 * time.Millisecond,
		OnLeader: func(ctx context.Context) { leading <- struct{}{}; <-ctx.Done() },
		wrapLogs: func(l raft.LogStore) raft.LogStore { g.LogStore = l; return g },
	}, c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.open(); n.Close() })
	<-leading
	return n, c
}

// until waits for the proposer to reach a state: it checks cond, under
// the proposer's lock, each time the scheduler runs it.
func until(t *testing.T, p *proposer, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		p.mu.Lock()
		ok := cond()
		p.mu.Unlock()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the proposer never reached: %s", what)
		}
		runtime.Gosched()
	}
}

type outcome struct {
	res any
	err error
}

// proposeAsync proposes in a goroutine of its own and delivers the outcome.
func proposeAsync(ctx context.Context, n *Node, out chan<- outcome) {
	go func() {
		res, err := propose(ctx, n)
		out <- outcome{res, err}
	}()
}

// TestProposalsShareEntries: what arrives while entries are in flight
// goes into one entry, applied in order, each proposal getting its own
// result.
func TestProposalsShareEntries(t *testing.T) {
	g := newGate()
	n, c := gated(t, t.TempDir(), g)
	p := n.proposer
	ctx := context.Background()
	before := n.LastIndex()

	g.close()
	first, second, rest := make(chan outcome, 1), make(chan outcome, 1), make(chan outcome, 100)
	proposeAsync(ctx, n, first)
	<-g.waiting // the first entry is being written
	proposeAsync(ctx, n, second)
	until(t, p, "two entries in flight", func() bool { return p.inFlight == maxInFlight })
	for range 100 {
		proposeAsync(ctx, n, rest)
	}
	until(t, p, "100 proposals waiting", func() bool { return len(p.queue) == 100 })
	g.open()

	if o := <-first; o.err != nil || o.res != uint64(1) {
		t.Fatalf("first proposal: %v, %v; want 1", o.res, o.err)
	}
	if o := <-second; o.err != nil || o.res != uint64(2) {
		t.Fatalf("second proposal: %v, %v; want 2", o.res, o.err)
	}
	var got []uint64
	for range 100 {
		o := <-rest
		if o.err != nil {
			t.Fatal(o.err)
		}
		got = append(got, o.res.(uint64))
	}
	slices.Sort(got)
	for i, r := range got {
		if r != uint64(i+3) {
			t.Fatalf("results %v: want each of 3 to 102 once", got)
		}
	}
	if entries := n.LastIndex() - before; entries != 3 {
		t.Errorf("102 proposals took %d log entries, want 3 (one, one, then the 100 that waited)", entries)
	}
	if c.get() != 102 {
		t.Errorf("applied %d commands, want 102", c.get())
	}
}

// TestAbandonedProposals: a caller that gives up before its command is in
// an entry gets a definite error and the command is never applied; one
// that gives up after gets an indefinite error, and the command applies.
func TestAbandonedProposals(t *testing.T) {
	g := newGate()
	n, c := gated(t, t.TempDir(), g)
	p := n.proposer

	g.close()
	inEntry, stopInEntry := context.WithCancel(context.Background())
	taken := make(chan outcome, 1)
	proposeAsync(inEntry, n, taken)
	<-g.waiting
	filler := make(chan outcome, 1)
	proposeAsync(context.Background(), n, filler)
	until(t, p, "two entries in flight", func() bool { return p.inFlight == maxInFlight })
	waiting, stopWaiting := context.WithCancel(context.Background())
	queued := make(chan outcome, 1)
	proposeAsync(waiting, n, queued)
	until(t, p, "one proposal waiting", func() bool { return len(p.queue) == 1 })

	stopWaiting()
	o := <-queued
	if !errors.Is(o.err, context.Canceled) || !errors.Is(o.err, djinn.ErrUnavailable) || !strings.Contains(o.err.Error(), "was not made") {
		t.Errorf("abandoned while waiting: %v; want Canceled and Unavailable, saying the change was not made", o.err)
	}
	stopInEntry()
	o = <-taken
	if !errors.Is(o.err, context.Canceled) || !strings.Contains(o.err.Error(), "may or may not") {
		t.Errorf("abandoned in an entry on its way: %v; want Canceled, saying the change may or may not have been made", o.err)
	}
	g.open()
	if o := <-filler; o.err != nil {
		t.Fatal(o.err)
	}
	// The abandoned-while-waiting command never applies: the next
	// proposal is the third command applied.
	if res, err := propose(context.Background(), n); err != nil || res != uint64(3) {
		t.Errorf("next proposal: %v, %v; want 3 (the one abandoned in its entry applied, the waiting one not)", res, err)
	}
	if c.get() != 3 {
		t.Errorf("applied %d, want 3", c.get())
	}
}

// TestBatchedEntriesReplay: entries of several commands, decoded on a
// restart, apply as the leader applied them from the commands it held.
func TestBatchedEntriesReplay(t *testing.T) {
	dir := t.TempDir()
	g := newGate()
	n, c := gated(t, dir, g)
	g.close()
	out := make(chan outcome, 50)
	proposeAsync(context.Background(), n, out)
	<-g.waiting
	proposeAsync(context.Background(), n, out)
	p := n.proposer
	until(t, p, "two entries in flight", func() bool { return p.inFlight == maxInFlight })
	for range 48 {
		proposeAsync(context.Background(), n, out)
	}
	until(t, p, "48 proposals waiting", func() bool { return len(p.queue) == 48 })
	g.open()
	for range 50 {
		if o := <-out; o.err != nil {
			t.Fatal(o.err)
		}
	}
	if c.get() != 50 {
		t.Fatalf("applied %d, want 50", c.get())
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	n2, c2 := open(t, dir, false, nil)
	defer n2.Close()
	c2.wait(t, 50)
	if got := c2.get(); got != 50 {
		t.Errorf("replayed %d commands, want 50", got)
	}
}

// TestCloseAnswersEveryProposal: closing a node answers every proposal,
// waiting or in flight, and later ones.
func TestCloseAnswersEveryProposal(t *testing.T) {
	g := newGate()
	n, _ := gated(t, t.TempDir(), g)
	g.close()
	out := make(chan outcome, 10)
	for range 10 {
		proposeAsync(context.Background(), n, out)
	}
	<-g.waiting
	closed := make(chan error, 1)
	go func() { closed <- n.Close() }()
	g.open() // the write in flight finishes; raft answers the rest
	for i := range 10 {
		if o := <-out; o.err != nil && !errors.Is(o.err, djinn.ErrUnavailable) {
			t.Errorf("proposal %d: %v; want success or Unavailable", i, o.err)
		}
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if _, err := propose(context.Background(), n); !errors.Is(err, djinn.ErrUnavailable) {
		t.Errorf("propose after Close: %v, want Unavailable", err)
	}
}

// FuzzApplyEntry: whatever a log entry holds, the fsm applies it without
// panicking: a command, a batch of them, or an error.
func FuzzApplyEntry(f *testing.F) {
	member := func(id string) *statepb.Command {
		return &statepb.Command{NowUnixNanos: 7, Op: &statepb.Command_Member{Member: &statepb.Member{NodeId: id}}}
	}
	for _, cmd := range []*statepb.Command{
		member("a"),
		{Batch: []*statepb.Command{member("a"), member("b")}},
		{Batch: []*statepb.Command{{Batch: []*statepb.Command{member("a")}}}},
		{NowUnixNanos: 1, Batch: []*statepb.Command{member("a")}},
	} {
		b, err := proto.Marshal(cmd)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{0xa2, 0x06, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		c := newCounter()
		fs := &fsm{sm: c}
		out := fs.ApplyBatch([]*raft.Log{{Index: 1, Type: raft.LogCommand, Data: b}})
		if len(out) != 1 {
			t.Fatalf("%d results for one entry", len(out))
		}
		if rs, ok := out[0].([]any); ok && uint64(len(rs)) != c.get()+uint64(errorsIn(rs)) {
			t.Fatalf("a batch of %d results applied %d commands", len(rs), c.get())
		}
	})
}

func errorsIn(rs []any) int {
	n := 0
	for _, r := range rs {
		if _, ok := r.(error); ok {
			n++
		}
	}
	return n
}

// BenchmarkProposeEntries reports how many commands share a log entry when
// proposers outnumber what one fsync takes.
func BenchmarkProposeEntries(b *testing.B) {
	for _, par := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("proposers=%d", par), func(b *testing.B) {
			leading := make(chan struct{}, 1)
			n, err := Open(Config{
				DataDir: b.TempDir(), RaftAddr: "127.0.0.1:0", Bootstrap: true,
				HeartbeatTimeout: 100 * time.Millisecond, ElectionTimeout: 100 * time.Millisecond,
				OnLeader: func(ctx context.Context) { leading <- struct{}{}; <-ctx.Done() },
			}, newCounter())
			if err != nil {
				b.Fatal(err)
			}
			defer n.Close()
			<-leading
			before := n.LastIndex()
			b.SetParallelism(par)
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := propose(context.Background(), n); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/float64(max(n.LastIndex()-before, 1)), "cmds/entry")
		})
	}
}

// answeredFuture is a raft future that is done, with err or res.
type answeredFuture struct {
	raft.ApplyFuture
	err error
	res any
}

func (f answeredFuture) Error() error  { return f.err }
func (f answeredFuture) Response() any { return f.res }
func (f answeredFuture) Index() uint64 { return 1 }

// TestOwnEntryAnsweredByItsApply: an entry the leader applies from the
// commands it holds answers each of its proposals from the apply itself,
// with that command's result, before raft's future is done; complete,
// once it is, answers none of them again — whatever the future says.
func TestOwnEntryAnsweredByItsApply(t *testing.T) {
	for _, n := range []int{1, 3} {
		t.Run(fmt.Sprintf("%d commands", n), func(t *testing.T) {
			c := newCounter()
			p := &proposer{own: map[*byte]*entry{}, fail: func(err error) error { return err }}
			f := &fsm{sm: c}
			f.proposer.Store(p)
			e := &entry{data: []byte{1}, future: answeredFuture{err: raft.ErrLeadershipLost}}
			for range n {
				pr := &proposal{done: make(chan struct{}, 1), cmd: &statepb.Command{Op: &statepb.Command_Member{Member: &statepb.Member{NodeId: "x"}}}}
				e.props = append(e.props, pr)
				e.cmds = append(e.cmds, pr.cmd)
			}
			p.own[&e.data[0]] = e
			p.inFlight = 1
			f.ApplyBatch([]*raft.Log{{Index: 1, Type: raft.LogCommand, Data: e.data}})
			for i, pr := range e.props {
				select {
				case <-pr.done:
				default:
					t.Fatalf("proposal %d: not answered when its entry applied", i)
				}
				if pr.err != nil || pr.res != uint64(i+1) {
					t.Fatalf("proposal %d: answered %v, %v; want %d", i, pr.res, pr.err, i+1)
				}
			}
			p.finish(e) // the future's error is not theirs: they were applied
			for i, pr := range e.props {
				select {
				case <-pr.done:
					t.Fatalf("proposal %d: answered twice", i)
				default:
				}
				if pr.err != nil {
					t.Fatalf("proposal %d: applied, then given the future's error %v", i, pr.err)
				}
			}
			if p.inFlight != 0 || len(p.own) != 0 {
				t.Fatalf("after finish: %d entries in flight, %d held, want none", p.inFlight, len(p.own))
			}
		})
	}
}
