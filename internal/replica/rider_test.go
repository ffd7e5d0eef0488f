package replica

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/proto/statepb"
)

// fakeRaft is an applier that keeps each entry appended and answers it
// (with err when set) once hold, when set, is closed.
type fakeRaft struct {
	mu      sync.Mutex
	entries [][]string // each entry's commands, by member node id
	err     error
	hold    chan struct{}
}

func (f *fakeRaft) Apply(data []byte, _ time.Duration) raft.ApplyFuture {
	var cmd statepb.Command
	if err := proto.Unmarshal(data, &cmd); err != nil {
		panic(err)
	}
	cmds := cmd.GetBatch()
	if len(cmds) == 0 {
		cmds = []*statepb.Command{&cmd}
	}
	var ids []string
	var res []any
	for _, c := range cmds {
		ids = append(ids, c.GetMember().GetNodeId())
		res = append(res, c.GetMember().GetNodeId())
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.entries = append(f.entries, ids)
	fut := heldFuture{hold: f.hold, err: f.err, res: res[0]}
	if len(res) > 1 {
		fut.res = res
	}
	return fut
}

func (f *fakeRaft) appended() [][]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([][]string(nil), f.entries...)
}

// heldFuture is a raft future done once hold (if any) is closed.
type heldFuture struct {
	raft.ApplyFuture
	hold chan struct{}
	err  error
	res  any
}

func (f heldFuture) Error() error {
	if f.hold != nil {
		<-f.hold
	}
	return f.err
}
func (f heldFuture) Response() any { return f.res }
func (f heldFuture) Index() uint64 { return 1 }

const testRiderDelay = 5 * time.Millisecond

// riderTest runs body in a bubble of its own with a proposer over f,
// closed when body returns.
func riderTest(t *testing.T, f *fakeRaft, body func(t *testing.T, p *proposer)) {
	synctest.Test(t, func(t *testing.T) {
		p := newProposer(f, func(err error) error { return djinn.Errorf(djinn.Unavailable, "raft: %v", err) }, testRiderDelay)
		defer p.close()
		body(t, p)
	})
}

func member(id string) *statepb.Command {
	return &statepb.Command{NowUnixNanos: 1, Op: &statepb.Command_Member{Member: &statepb.Member{NodeId: id}}}
}

// goPropose proposes id in a goroutine of its own; its outcome comes on
// the channel returned.
func goPropose(ctx context.Context, p *proposer, id string, rider bool) <-chan outcome {
	out := make(chan outcome, 1)
	go func() {
		res, err := p.propose(ctx, member(id), rider)
		out <- outcome{res, err}
	}()
	return out
}

func answered(out <-chan outcome) (outcome, bool) {
	select {
	case o := <-out:
		return o, true
	default:
		return outcome{}, false
	}
}

func wantEntries(t *testing.T, f *fakeRaft, want ...[]string) {
	t.Helper()
	got := f.appended()
	if len(got) != len(want) {
		t.Fatalf("entries appended: %q; want %q", got, want)
	}
	for i := range got {
		if strings.Join(got[i], ",") != strings.Join(want[i], ",") {
			t.Fatalf("entries appended: %q; want %q", got, want)
		}
	}
}

// TestRiderJoinsTheNextEntry: a rider starts no entry; the next proposal's
// entry takes it along, before that proposal (one entry, one append), and
// each gets its own result.
func TestRiderJoinsTheNextEntry(t *testing.T) {
	f := &fakeRaft{}
	riderTest(t, f, func(t *testing.T, p *proposer) {
		rider := goPropose(context.Background(), p, "rider", true)
		synctest.Wait()
		wantEntries(t, f)
		if _, ok := answered(rider); ok {
			t.Fatal("the rider was answered with no entry appended")
		}
		res, err := p.propose(context.Background(), member("other"), false)
		if err != nil || res != "other" {
			t.Fatalf("the other proposal: %v, %v", res, err)
		}
		synctest.Wait()
		if o, ok := answered(rider); !ok || o.err != nil || o.res != "rider" {
			t.Fatalf("the rider: %v (answered %v); want its own result", o, ok)
		}
		wantEntries(t, f, []string{"rider", "other"})
		// No time passed: the rider's timer, stopped, lets nothing go.
		time.Sleep(time.Hour)
		synctest.Wait()
		wantEntries(t, f, []string{"rider", "other"})
	})
}

// TestRiderAloneAfterItsDelay: a rider with no other proposal is
// appended alone once it has waited the delay, and not before; the next
// rider waits a delay of its own.
func TestRiderAloneAfterItsDelay(t *testing.T) {
	f := &fakeRaft{}
	riderTest(t, f, func(t *testing.T, p *proposer) {
		for i, id := range []string{"first", "second"} {
			rider := goPropose(context.Background(), p, id, true)
			time.Sleep(testRiderDelay - time.Nanosecond)
			synctest.Wait()
			if len(f.appended()) != i {
				t.Fatalf("rider %s: appended before its delay: %q", id, f.appended())
			}
			if _, ok := answered(rider); ok {
				t.Fatalf("rider %s answered before its delay", id)
			}
			time.Sleep(time.Nanosecond)
			synctest.Wait()
			if o, ok := answered(rider); !ok || o.err != nil || o.res != id {
				t.Fatalf("rider %s after its delay: %v (answered %v)", id, o, ok)
			}
		}
		wantEntries(t, f, []string{"first"}, []string{"second"})
	})
}

// TestRiderAbandonedBeforeTaken: a rider's caller that gives up while it
// waits gets the definite error, and the command is never appended.
func TestRiderAbandonedBeforeTaken(t *testing.T) {
	f := &fakeRaft{}
	riderTest(t, f, func(t *testing.T, p *proposer) {
		ctx, cancel := context.WithCancel(context.Background())
		rider := goPropose(ctx, p, "rider", true)
		synctest.Wait()
		cancel()
		o := <-rider
		if !errors.Is(o.err, context.Canceled) || !errors.Is(o.err, djinn.ErrUnavailable) || !strings.Contains(o.err.Error(), "was not made") {
			t.Fatalf("rider abandoned while waiting: %v; want Canceled and Unavailable, saying the change was not made", o.err)
		}
		time.Sleep(time.Hour)
		synctest.Wait()
		wantEntries(t, f)
		if _, err := p.propose(context.Background(), member("other"), false); err != nil {
			t.Fatal(err)
		}
		wantEntries(t, f, []string{"other"})
	})
}

// TestRiderAnsweredOnLeadershipLoss: a rider appended when the node no
// longer leads gets raft's refusal, as any proposal does.
func TestRiderAnsweredOnLeadershipLoss(t *testing.T) {
	f := &fakeRaft{err: raft.ErrNotLeader}
	riderTest(t, f, func(t *testing.T, p *proposer) {
		rider := goPropose(context.Background(), p, "rider", true)
		time.Sleep(testRiderDelay)
		o := <-rider
		if !errors.Is(o.err, djinn.ErrUnavailable) || !strings.Contains(o.err.Error(), raft.ErrNotLeader.Error()) {
			t.Fatalf("rider on a deposed leader: %v; want raft's not-leader refusal", o.err)
		}
	})
}

// TestRiderAnsweredOnClose: closing the proposer answers a waiting rider:
// shutting down, the change not made.
func TestRiderAnsweredOnClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeRaft{}
		p := newProposer(f, func(err error) error { return err }, testRiderDelay)
		rider := goPropose(context.Background(), p, "rider", true)
		synctest.Wait()
		p.close()
		o := <-rider
		if !errors.Is(o.err, djinn.ErrUnavailable) || !strings.Contains(o.err.Error(), "was not made") {
			t.Fatalf("rider when the node closed: %v; want Unavailable, the change not made", o.err)
		}
		time.Sleep(time.Hour)
		synctest.Wait()
		wantEntries(t, f)
	})
}

// TestRiderLeftOutByAnEntrysBounds: a rider an entry's command bound
// leaves out waits on, from when it was proposed, for another proposal
// or its delay.
func TestRiderLeftOutByAnEntrysBounds(t *testing.T) {
	f := &fakeRaft{}
	riderTest(t, f, func(t *testing.T, p *proposer) {
		hold := make(chan struct{}) // made in the bubble, so waits on it are durable
		f.hold = hold
		var outs []<-chan outcome
		for _, id := range []string{"a", "b"} { // fill the entries in flight
			outs = append(outs, goPropose(context.Background(), p, id, false))
			synctest.Wait()
		}
		for range maxEntryCommands {
			outs = append(outs, goPropose(context.Background(), p, "c", false))
		}
		synctest.Wait()
		rider := goPropose(context.Background(), p, "rider", true)
		synctest.Wait()
		close(hold)
		for _, out := range outs {
			if o := <-out; o.err != nil {
				t.Fatal(o.err)
			}
		}
		synctest.Wait()
		if got := f.appended(); len(got) != 3 || len(got[2]) != maxEntryCommands {
			t.Fatalf("%d entries appended; want 3, the last of %d commands", len(got), maxEntryCommands)
		}
		if _, ok := answered(rider); ok {
			t.Fatal("the rider left out was answered before its delay")
		}
		time.Sleep(testRiderDelay)
		if o := <-rider; o.err != nil || o.res != "rider" {
			t.Fatalf("the rider: %v", o)
		}
		if got := f.appended(); len(got) != 4 || strings.Join(got[3], ",") != "rider" {
			t.Fatalf("entries appended: %d, the last %q; want the rider alone in a fourth", len(got), got[len(got)-1])
		}
	})
}

// TestNodeRiderSharesAnEntry: on a node, a rider and the proposal after
// it are one log entry, each applied; the rider waits for it.
func TestNodeRiderSharesAnEntry(t *testing.T) {
	leading := make(chan struct{}, 1)
	c := newCounter()
	n, err := Open(Config{
		DataDir: t.TempDir(), RaftAddr: "127.0.0.1:0", Bootstrap: true, RiderDelay: time.Hour,
		HeartbeatTimeout: 100 * time.Millisecond, ElectionTimeout: 100 * time.Millisecond,
		OnLeader: func(ctx context.Context) { leading <- struct{}{}; <-ctx.Done() },
	}, c)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	<-leading
	before := n.LastIndex()
	rider := make(chan outcome, 1)
	go func() {
		res, err := n.ProposeRider(context.Background(), member("rider"))
		rider <- outcome{res, err}
	}()
	p := n.proposer
	until(t, p, "the rider waiting", func() bool { return p.riders == 1 })
	if res, err := propose(context.Background(), n); err != nil || res != uint64(2) {
		t.Fatalf("the proposal after the rider: %v, %v; want 2", res, err)
	}
	if o := <-rider; o.err != nil || o.res != uint64(1) {
		t.Fatalf("the rider: %v, %v; want 1", o.res, o.err)
	}
	if entries := n.LastIndex() - before; entries != 1 {
		t.Errorf("a rider and a proposal took %d log entries, want 1", entries)
	}
}
