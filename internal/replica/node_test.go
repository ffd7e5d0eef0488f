package replica

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/disk"
	"github.com/djinn-go/djinn/proto/statepb"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// raft's transport and the WAL leave background goroutines that
		// exit shortly after Shutdown.
		goleak.IgnoreTopFunction("github.com/hashicorp/raft.(*NetworkTransport).listen"),
		goleak.IgnoreTopFunction("github.com/hashicorp/raft-wal.(*WAL).runRotate"),
		goleak.IgnoreAnyFunction("github.com/hashicorp/raft.(*netPipeline).decodeResponses"),
		goleak.IgnoreAnyFunction("github.com/hashicorp/raft.(*NetworkTransport).handleConn"),
	)
}

// counter is a tiny deterministic state machine: it counts Member commands.
type counter struct {
	mu sync.Mutex
	n  uint64
	// changed is closed and replaced on every change.
	changed chan struct{}
	// refuse makes Restore fail, as a state machine given data it cannot
	// take does.
	refuse bool
}

func newCounter() *counter { return &counter{changed: make(chan struct{})} }

func (c *counter) Apply(_ uint64, cmd *statepb.Command) any {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cmd.GetMember() == nil {
		return djinn.Errorf(djinn.InvalidArgument, "not a member command")
	}
	c.n++
	c.bumpLocked()
	return c.n
}

func (c *counter) bumpLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// wait blocks until the count reaches n.
func (c *counter) wait(t *testing.T, n uint64) {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		c.mu.Lock()
		got, ch := c.n, c.changed
		c.mu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-ch:
		case <-timeout:
			t.Fatalf("count %d, waited for %d", got, n)
		}
	}
}

func (c *counter) get() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

func (c *counter) Snapshot() (func(io.Writer) error, error) {
	n := c.get()
	return func(w io.Writer) error { return binary.Write(w, binary.BigEndian, n) }, nil
}

func (c *counter) Restore(r io.Reader) error {
	if c.refuse {
		return errors.New("snapshot record 0: unknown record")
	}
	var b bytes.Buffer
	if _, err := io.Copy(&b, r); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	defer c.bumpLocked()
	return binary.Read(&b, binary.BigEndian, &c.n)
}

func open(t *testing.T, dir string, bootstrap bool, onLeader func(context.Context)) (*Node, *counter) {
	t.Helper()
	c := newCounter()
	n, err := Open(Config{
		DataDir: dir, RaftAddr: "127.0.0.1:0", Bootstrap: bootstrap, OnLeader: onLeader,
		HeartbeatTimeout: 100 * time.Millisecond, ElectionTimeout: 100 * time.Millisecond,
	}, c)
	if err != nil {
		t.Fatal(err)
	}
	return n, c
}

// leaderOf waits for a node to report leadership through its hook.
func leaderOf(t *testing.T, leading <-chan *Node) *Node {
	t.Helper()
	select {
	case n := <-leading:
		return n
	case <-time.After(20 * time.Second):
		t.Fatal("no leader elected")
		return nil
	}
}

func propose(ctx context.Context, n *Node) (any, error) {
	return n.Propose(ctx, &statepb.Command{Op: &statepb.Command_Member{Member: &statepb.Member{NodeId: "x"}}})
}

func TestSingleNodeBootstrapsAndRestarts(t *testing.T) {
	dir := t.TempDir()
	leading := make(chan struct{}, 4)
	n, c := open(t, dir, true, func(ctx context.Context) { leading <- struct{}{}; <-ctx.Done() })
	<-leading
	for i := 1; i <= 3; i++ {
		got, err := propose(context.Background(), n)
		if err != nil || got.(uint64) != uint64(i) {
			t.Fatalf("propose %d = %v, %v", i, got, err)
		}
	}
	if _, err := n.Propose(context.Background(), &statepb.Command{}); !errors.Is(err, djinn.ErrInvalidArgument) {
		t.Fatalf("an error result is not returned as the error: %v", err)
	}
	if err := n.Snapshot(); err != nil {
		t.Fatal(err)
	}
	if _, err := propose(context.Background(), n); err != nil {
		t.Fatal(err)
	}
	id := n.ID()
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if c.get() != 4 {
		t.Fatalf("count %d before restart", c.get())
	}

	// Restart: the snapshot plus the log after it rebuild the state, and
	// the node keeps its id and leads again without a new bootstrap.
	n2, c2 := open(t, dir, true, func(ctx context.Context) { leading <- struct{}{}; <-ctx.Done() })
	defer n2.Close()
	<-leading
	if n2.ID() != id {
		t.Fatalf("node id %s after restart, was %s", n2.ID(), id)
	}
	c2.wait(t, 4)
}

func TestNodeIDMismatchRefused(t *testing.T) {
	dir := t.TempDir()
	n, _ := open(t, dir, true, nil)
	n.Close()
	_, err := Open(Config{DataDir: dir, NodeID: "someone-else", RaftAddr: "127.0.0.1:0"}, newCounter())
	if !errors.Is(err, djinn.ErrInvalidArgument) {
		t.Fatalf("opening another node's data directory: %v", err)
	}
}

// TestNodeIDLostRefused: a data directory holding a log whose node-id
// file is gone or empty is refused with the file named and how to recover,
// not started under a new id its log's configuration does not know (a
// node that would never lead, serving nothing acknowledged); started with
// --node-id the id it had, it takes that id back (README, Disk damage).
func TestNodeIDLostRefused(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(path string) error
	}{
		{"removed", os.Remove},
		{"emptied", func(path string) error { return os.WriteFile(path, nil, 0o600) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			n, _ := open(t, dir, true, nil)
			id := n.ID()
			n.Close()
			path := filepath.Join(dir, "node-id")
			if err := tc.damage(path); err != nil {
				t.Fatal(err)
			}
			_, err := Open(Config{DataDir: dir, RaftAddr: "127.0.0.1:0"}, newCounter())
			for _, want := range []string{path, "to recover", "--node-id"} {
				if !errors.Is(err, disk.ErrDamaged) || !strings.Contains(fmt.Sprint(err), want) {
					t.Fatalf("opening with node-id %s: %v, want damage naming %q", tc.name, err, want)
				}
			}
			n2, err := Open(Config{DataDir: dir, NodeID: id, RaftAddr: "127.0.0.1:0"}, newCounter())
			if err != nil {
				t.Fatalf("opening with --node-id %s: %v", id, err)
			}
			n2.Close()
		})
	}
}

// TestWALMetaLostRefused: a log whose metadata file is gone, its segments
// still there, is refused as damage naming the file and how to recover,
// not an error of the log library's without a next step (README, Disk
// damage).
func TestWALMetaLostRefused(t *testing.T) {
	dir := t.TempDir()
	n, _ := open(t, dir, true, nil)
	n.Close()
	meta := filepath.Join(dir, "raft", "wal", "wal-meta.db")
	if err := os.Remove(meta); err != nil {
		t.Fatal(err)
	}
	_, err := Open(Config{DataDir: dir, RaftAddr: "127.0.0.1:0"}, newCounter())
	for _, want := range []string{meta + ": the log's metadata file is gone", "to recover"} {
		if !errors.Is(err, disk.ErrDamaged) || !strings.Contains(fmt.Sprint(err), want) {
			t.Fatalf("opening without the log's metadata: %v, want damage naming %q", err, want)
		}
	}
}

// TestThreeNodeCluster: one bootstrapped node, two that join; a leader is
// elected, commands replicate to all, followers refuse writes with a leader
// hint, and after the leader stops the others elect a new one and serve.
func TestThreeNodeCluster(t *testing.T) {
	var nodes []*Node
	var sms []*counter
	endpoints := map[string]string{}
	var mu sync.Mutex
	// changed is signalled whenever a node begins to lead. Under load
	// (100 ms election timeouts) leadership may move at any point of the
	// test, so each step goes through whoever leads at the time.
	changed := make(chan struct{}, 1)
	for i := range 3 {
		c := newCounter()
		n, err := Open(Config{
			DataDir: t.TempDir(), NodeID: fmt.Sprintf("n%d", i), RaftAddr: "127.0.0.1:0", Bootstrap: i == 0,
			HeartbeatTimeout: 100 * time.Millisecond, ElectionTimeout: 100 * time.Millisecond,
			Endpoint: func(id string) string { mu.Lock(); defer mu.Unlock(); return endpoints[id] },
			OnLeader: func(ctx context.Context) {
				select {
				case changed <- struct{}{}:
				default:
				}
				<-ctx.Done()
			},
		}, c)
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		endpoints[n.ID()] = "grpc-of-" + n.ID()
		mu.Unlock()
		nodes = append(nodes, n)
		sms = append(sms, c)
	}
	open := slices.Clone(nodes)
	defer func() {
		for _, n := range open {
			n.Close()
		}
	}()
	// onLeader runs fn on the node of open that leads, again on the next
	// leader while fn fails because leadership moved, and returns that node.
	onLeader := func(what string, fn func(*Node) error) *Node {
		t.Helper()
		deadline := time.After(20 * time.Second)
		for {
			for _, n := range open {
				if !n.IsLeader() {
					continue
				}
				err := fn(n)
				if err == nil {
					return n
				}
				if !errors.Is(err, djinn.ErrUnavailable) {
					t.Fatalf("%s at the leader %s: %v", what, n.ID(), err)
				}
			}
			select {
			case <-changed:
			case <-deadline:
				t.Fatalf("%s: no leader did it in 20 s", what)
			}
		}
	}
	onLeader("bootstrap", func(*Node) error { return nil })
	for _, n := range nodes[1:] {
		onLeader("add "+n.ID(), func(l *Node) error { return l.AddVoter(context.Background(), n.ID(), n.RaftAddr()) })
	}
	onLeader("propose", func(l *Node) error { _, err := propose(context.Background(), l); return err })
	for _, c := range sms {
		c.wait(t, 1)
	}
	// A follower that knows the leader refuses a proposal, naming the
	// leader's endpoint (asked again if leadership moved meanwhile).
	onLeader("a follower's refusal", func(l *Node) error {
		f := nodes[0]
		if f == l {
			f = nodes[1]
		}
		if id, _ := f.Leader(); id != l.ID() {
			return djinn.ErrUnavailable // the follower does not know it yet
		}
		_, err := propose(context.Background(), f)
		var nl *NotLeaderError
		if !errors.As(err, &nl) || !errors.Is(err, djinn.ErrUnavailable) {
			t.Fatalf("follower propose = %v, want NotLeaderError", err)
		}
		if id, _ := f.Leader(); nl.Leader != "grpc-of-"+l.ID() || id != l.ID() {
			return djinn.ErrUnavailable // leadership moved during the call
		}
		return nil
	})
	members, err := nodes[0].Members()
	if err != nil || len(members) != 3 {
		t.Fatalf("members %v, %v", members, err)
	}

	// The leader goes away; the other two elect a leader and serve.
	gone := onLeader("find the leader", func(*Node) error { return nil })
	open = slices.DeleteFunc(open, func(n *Node) bool { return n == gone })
	gone.Close()
	onLeader("propose after the leader left", func(l *Node) error { _, err := propose(context.Background(), l); return err })
	for i, c := range sms {
		if nodes[i] != gone {
			c.wait(t, 2)
		}
	}
}
