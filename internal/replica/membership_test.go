package replica

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/djinn-go/djinn"
)

// steady opens a node with timeouts long enough that leadership stays
// put under the race detector on a loaded machine.
func steady(t *testing.T, bootstrap bool, onLeader func(context.Context)) (*Node, *counter) {
	t.Helper()
	c := newCounter()
	n, err := Open(Config{
		DataDir: t.TempDir(), RaftAddr: "127.0.0.1:0", Bootstrap: bootstrap, OnLeader: onLeader,
		HeartbeatTimeout: 500 * time.Millisecond, ElectionTimeout: 500 * time.Millisecond,
	}, c)
	if err != nil {
		t.Fatal(err)
	}
	return n, c
}

// twoNodes starts a leader n0 (its hook reported on leading) and a
// follower n1 voting beside it, and closes them when the test ends.
func twoNodes(t *testing.T) (leader, follower *Node, fsm *counter) {
	t.Helper()
	leading := make(chan *Node, 4)
	var n0 *Node
	ready := make(chan struct{})
	n0, _ = steady(t, true, func(ctx context.Context) {
		<-ready
		leading <- n0
		<-ctx.Done()
	})
	close(ready)
	t.Cleanup(func() { n0.Close() })
	leaderOf(t, leading)
	n1, c1 := steady(t, false, nil)
	t.Cleanup(func() { n1.Close() })
	// Under load n0 may lose its leadership for a moment while n1 catches
	// up: a refusal it retries until n0 leads again and the change is made.
	untilLeading(t, "add the follower", func(ctx context.Context) error { return n0.AddVoter(ctx, n1.ID(), n1.RaftAddr()) })
	untilLeading(t, "write through the leader", func(ctx context.Context) error { _, err := propose(ctx, n0); return err })
	c1.wait(t, 1)
	return n0, n1, c1
}

// untilLeading runs op until it succeeds, retrying it while it is refused
// as unavailable (leadership lost or not yet regained), for at most 20s.
func untilLeading(t *testing.T, what string, op func(context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		err := op(ctx)
		if err == nil {
			return
		}
		if !errors.Is(err, djinn.ErrUnavailable) || ctx.Err() != nil {
			t.Fatalf("%s: %v", what, err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// TestReadBarrier: the leader's barrier returns once it has applied what
// was committed; a follower's refuses, naming the leader's node.
func TestReadBarrier(t *testing.T) {
	l, f, _ := twoNodes(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// A leadership lost under load is a refusal the caller retries.
	for err := l.ReadBarrier(ctx); err != nil; err = l.ReadBarrier(ctx) {
		if !errors.Is(err, djinn.ErrUnavailable) || ctx.Err() != nil {
			t.Fatalf("leader's read barrier: %v", err)
		}
	}
	if l.AppliedIndex() < l.CommitIndex() {
		t.Errorf("after the barrier applied %d < committed %d", l.AppliedIndex(), l.CommitIndex())
	}
	var nl *NotLeaderError
	if err := f.ReadBarrier(ctx); !errors.As(err, &nl) {
		t.Errorf("follower's read barrier: %v, want not the leader", err)
	}
	short, cancel2 := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel2()
	if err := l.WaitApplied(short, l.AppliedIndex()+1000); !errors.Is(err, djinn.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("waiting for an index never written: %v, want unavailable once ctx ends", err)
	}
}

// TestStaleness: a follower answers reads within a staleness bound while
// it hears from the leader, and, the leader gone, only within the bound.
func TestStaleness(t *testing.T) {
	l, f, _ := twoNodes(t)
	if err := l.Staleness(time.Nanosecond, 0); err != nil {
		t.Errorf("the leader refuses a stale read: %v", err)
	}
	if err := f.Staleness(time.Hour, 1<<20); err != nil {
		t.Errorf("a follower in touch refuses a read an hour stale: %v", err)
	}
	if c := f.LastContact(); c < 0 {
		t.Errorf("a follower in touch says it never heard from a leader (%v)", c)
	}
	l.Close()
	deadline := time.Now().Add(20 * time.Second)
	for f.LastContact() <= 300*time.Millisecond {
		if time.Now().After(deadline) {
			t.Fatal("the follower's last contact did not age")
		}
		<-time.After(20 * time.Millisecond)
	}
	var nl *NotLeaderError
	if err := f.Staleness(300*time.Millisecond, 1<<20); !errors.As(err, &nl) {
		t.Errorf("a follower cut off for %v answers reads at most 300ms stale: %v", f.LastContact(), err)
	}
	if err := f.Staleness(time.Hour, 1<<20); err != nil {
		t.Errorf("without a leader, a follower refuses reads an hour stale: %v", err)
	}
}

// TestTransferWithoutAnotherVoter: a leader alone has no one to hand
// leadership to, and says so; it keeps leading.
func TestTransferWithoutAnotherVoter(t *testing.T) {
	leading := make(chan struct{}, 4)
	n, _ := open(t, t.TempDir(), true, func(ctx context.Context) { leading <- struct{}{}; <-ctx.Done() })
	defer n.Close()
	<-leading
	err := n.TransferLeadership(context.Background(), "")
	if !errors.Is(err, djinn.ErrInvalidArgument) || !strings.Contains(err.Error(), "no other voter") {
		t.Fatalf("transfer with no other voter: %v, want InvalidArgument saying there is no other voter", err)
	}
	if !n.IsLeader() {
		t.Fatal("the leader stopped leading after a refused transfer")
	}
}

// TestMemberArguments: a member added (Join, AddMember, AddVoter) is
// refused with InvalidArgument naming the bad value — DESIGN.md 8: a
// clear error for every bad input, never a member the cluster cannot
// reach — when its raft address is no host:port with a DNS name, an IPv4
// address or a bracketed IPv6 address and a port from 1 to 65535, or
// its node id is empty, too long or carries characters a peer
// certificate's djinn-peer://NODE-ID and the node-id file cannot.
func TestMemberArguments(t *testing.T) {
	long := strings.Repeat("n", maxNodeID+1)
	for _, tt := range []struct {
		name, id, addr, want string // want: "" accepted, else in the error
	}{
		{"a node id and an address", "n2", "127.0.0.1:4163", ""},
		{"a host name and dashes, dots, underscores", "node-2.a_b", "raft.example:4163", ""},
		{"no node id", "", "127.0.0.1:4163", "node id: missing"},
		{"a node id too long", long, "127.0.0.1:4163", "longer than 128"},
		{"a node id with a space", "n 2", "127.0.0.1:4163", `node id "n 2"`},
		{"a node id with a newline", "n2\n", "127.0.0.1:4163", `node id "n2\n"`},
		{"a node id with a slash", "../n2", "127.0.0.1:4163", `node id "../n2"`},
		{"a port that is no number", "n2", "host:raft", `"host:raft": port is not a number`},
		{"a port out of range", "n2", "127.0.0.1:70000", "port out of range"},
		{"no port", "n2", "127.0.0.1", `"127.0.0.1": want host:port`},
		{"no host", "n2", ":4163", `":4163": want host:port`},
		{"a host with a space", "n2", "raft host:4163", `host "raft host": want a DNS name`},
		{"a host with a user name", "n2", "me@raft.example:4163", `host "me@raft.example": want a DNS name`},
		{"a name in brackets", "n2", "[raft.example]:4163", `"raft.example" in brackets: want an IPv6 address`},
		{"port 0", "n2", "127.0.0.1:0", "port out of range: want 1 to 65535"},
		{"an IPv6 address", "n2", "[::1]:4163", ""},
	} {
		err := checkServer(tt.id, tt.addr)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: checkServer(%q, %q) = %v, want accepted", tt.name, tt.id, tt.addr, err)
		case tt.want != "" && (!errors.Is(err, djinn.ErrInvalidArgument) || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s: checkServer(%q, %q) = %v, want InvalidArgument naming %s", tt.name, tt.id, tt.addr, err, tt.want)
		}
	}
}
