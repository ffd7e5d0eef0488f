package replica

import (
	"context"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"
)

// secretNode opens a node whose peer port wants secret, logging to recs.
func secretNode(t *testing.T, secret string, bootstrap bool, recs *strangerLog, onLeader func(context.Context)) (*Node, *counter) {
	t.Helper()
	c := newCounter()
	n, err := Open(Config{
		DataDir: t.TempDir(), RaftAddr: "127.0.0.1:0", Bootstrap: bootstrap, OnLeader: onLeader,
		Secret: []byte(secret), Logger: slog.New(recs),
		HeartbeatTimeout: 500 * time.Millisecond, ElectionTimeout: 500 * time.Millisecond,
	}, c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n, c
}

// TestRaftPortWantsTheJoinSecret (DESIGN.md 7: Raft peers authenticate as
// peers): without TLS a node's peer port takes a connection for a member's
// only when its dialer proves it holds the cluster's join secret. A
// connection that answers the challenge wrongly is closed before Raft
// reads it and said as a stranger; a node with another secret receives
// nothing of the cluster's log (its port refuses the leader); a node with
// the secret replicates it. Before, anyone who reached the port could
// speak Raft to the node: append to its log, win its vote.
func TestRaftPortWantsTheJoinSecret(t *testing.T) {
	const secret = "the cluster's join secret"
	leading := make(chan struct{}, 1)
	leader, _ := secretNode(t, secret, true, newStrangerLog(), func(ctx context.Context) {
		select {
		case leading <- struct{}{}:
		default:
		}
		<-ctx.Done()
	})
	recs := newStrangerLog()
	select {
	case <-leading:
	case <-time.After(20 * time.Second):
		t.Fatal("no leader elected")
	}

	// A stranger: it reads the challenge, answers it without the secret.
	c, err := net.Dial("tcp", leader.RaftAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(20 * time.Second)); err != nil {
		t.Fatal(err)
	}
	challenge := make([]byte, challengeSize)
	if _, err := io.ReadFull(c, challenge); err != nil {
		t.Fatalf("no challenge from the raft port: %v", err)
	}
	if _, err := c.Write(proof([]byte("a guess"), challenge)); err != nil {
		t.Fatal(err)
	}
	if n, err := io.Copy(io.Discard, c); n != 0 || err != nil {
		t.Errorf("the port answered a stranger %d bytes (%v); want it closed", n, err)
	}

	// A node with another secret: the leader's appends are refused at its
	// port, which says so.
	wrong, wrongCount := secretNode(t, "another cluster's", false, recs, nil)
	untilLeading(t, "add the node with another secret", func(ctx context.Context) error {
		return leader.AddNonvoter(ctx, wrong.ID(), wrong.RaftAddr())
	})
	select {
	case <-recs.said:
	case <-time.After(20 * time.Second):
		t.Fatal("the node with another secret said no stranger at its raft port")
	}
	for _, rec := range recs.all() {
		if rec.Message == strangerMsg && !strings.Contains(attr(rec, "sent"), "join secret") {
			t.Errorf("stranger sent %q, want no proof of the join secret", attr(rec, "sent"))
		}
	}

	// A node with the secret replicates the log.
	right, rightCount := secretNode(t, secret, false, newStrangerLog(), nil)
	untilLeading(t, "add the node with the secret", func(ctx context.Context) error {
		return leader.AddNonvoter(ctx, right.ID(), right.RaftAddr())
	})
	untilLeading(t, "write through the leader", func(ctx context.Context) error { _, err := propose(ctx, leader); return err })
	rightCount.wait(t, 1)
	if n := wrongCount.get(); n != 0 {
		t.Errorf("the node with another secret applied %d commands of the cluster's", n)
	}
	if !leader.IsLeader() {
		t.Error("the leader stopped leading")
	}
}
