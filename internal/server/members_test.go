package server_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/internal/server"
	"github.com/djinn-go/djinn/internal/server/servertest"
)

// member returns the member nodeID of ms, failing the test without it.
func member(t *testing.T, ms *client.Members, nodeID string) client.Member {
	t.Helper()
	for _, m := range ms.Members {
		if m.NodeID == nodeID {
			return m
		}
	}
	t.Fatalf("no member %s among %+v", nodeID, ms.Members)
	return client.Member{}
}

// TestMembersWithHealth: the member list names every member with its
// address, role and, asked for health, its applied index and last contact;
// a member that is down is reported unreachable by the others.
func TestMembersWithHealth(t *testing.T) {
	t.Parallel()
	ss := followCluster(t)
	c := servertest.Dial(t, ss[0].Addr())
	ctx := testContext(t)
	var ms *client.Members
	servertest.Eventually(t, "every member healthy", func() bool {
		var err error
		ms, err = c.Members(ctx, true)
		if err != nil || len(ms.Members) != 3 {
			return false
		}
		for _, m := range ms.Members {
			if m.Health != "healthy" {
				return false
			}
		}
		return true
	})
	if ms.ServiceID != c.ServiceID() || ms.ServiceID.IsZero() {
		t.Errorf("member list of service %s, want the cluster's %s", ms.ServiceID, c.ServiceID())
	}
	l := leaderOf(t, ss...)
	for _, s := range ss {
		m := member(t, ms, s.NodeID())
		if m.Endpoint != s.Addr() || m.RaftAddress != s.RaftAddr() || !m.Voter || m.AppliedIndex == 0 {
			t.Errorf("member %s: %+v, want voter at %s (raft %s) with an applied index", s.NodeID(), m, s.Addr(), s.RaftAddr())
		}
		switch {
		case s == l && (m.Role != "leader" || m.LastContact != 0):
			t.Errorf("leader %s: role %q, last contact %v", s.NodeID(), m.Role, m.LastContact)
		case s != l && (m.Role != "follower" || m.LastContact < 0):
			t.Errorf("follower %s: role %q, last contact %v", s.NodeID(), m.Role, m.LastContact)
		}
	}

	var down *server.Server
	for _, s := range ss {
		if s != l {
			down = s
		}
	}
	if err := down.Close(); err != nil {
		t.Fatal(err)
	}
	servertest.Eventually(t, "the closed member reported unreachable", func() bool {
		ms, err := c.Members(ctx, true)
		return err == nil && member(t, ms, down.NodeID()).Health == "unreachable"
	})
}

// TestJoinCatchesUpBeforeVoting: a joining server is a non-voter until the
// leader has seen it caught up. One whose catch-up cannot be confirmed (its
// recorded address answers nothing) receives the log but stays a staged
// non-voter; recorded at its real address it is promoted.
func TestJoinCatchesUpBeforeVoting(t *testing.T) {
	t.Parallel()
	first := servertest.Start(t, servertest.Config(t))
	c := servertest.Dial(t, first.Addr(), servertest.Operator(t, first))
	ctx := testContext(t)
	for range 50 {
		if _, err := c.Mailbox().Register(ctx, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	cfg := servertest.JoinConfig(t, first)
	cfg.Advertise = "127.0.0.1:1" // the leader cannot ask it how far it is
	joiner := servertest.Open(t, cfg)
	servertest.Eventually(t, "the joiner to apply the log", func() bool {
		return joiner.Node().AppliedIndex() >= first.Node().AppliedIndex()
	})
	ms, err := c.Members(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	if m := member(t, ms, joiner.NodeID()); m.Voter || !m.Staged || m.Role != "nonvoter" {
		t.Fatalf("joiner whose catch-up is unconfirmed: %+v, want a staged non-voter", m)
	}
	err = c.AddMember(ctx, client.NewMember{NodeID: joiner.NodeID(), RaftAddress: joiner.RaftAddr(), Endpoint: joiner.Addr()})
	if err != nil {
		t.Fatal(err)
	}
	servertest.Eventually(t, "the caught-up joiner promoted to voter", func() bool {
		ms, err := c.Members(ctx, false)
		return err == nil && member(t, ms, joiner.NodeID()).Voter
	})
}

// TestNonvoterStaysNonvoter: a member added as a non-voter receives the
// log and is never promoted.
func TestNonvoterStaysNonvoter(t *testing.T) {
	t.Parallel()
	first := servertest.Start(t, servertest.Config(t))
	c := servertest.Dial(t, first.Addr(), servertest.Operator(t, first))
	ctx := testContext(t)
	replica := servertest.OpenWaiting(t, first) // no service id until a member adds it
	err := c.AddMember(ctx, client.NewMember{NodeID: replica.NodeID(), RaftAddress: replica.RaftAddr(), Endpoint: replica.Addr(), Nonvoter: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Mailbox().Register(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	servertest.Eventually(t, "the non-voter to apply the log", func() bool {
		return replica.Node().AppliedIndex() >= first.Node().AppliedIndex()
	})
	// Promotion rounds run every heartbeat timeout; several pass here.
	mark := time.Now()
	servertest.Eventually(t, "several promotion rounds", func() bool { return time.Since(mark) > 10*100*time.Millisecond })
	ms, err := c.Members(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	if m := member(t, ms, replica.NodeID()); m.Voter || m.Staged || m.Role != "nonvoter" || m.Health != "healthy" {
		t.Errorf("non-voter after catching up: %+v, want a healthy non-voter, not staged", m)
	}
}

// TestRemoveMember: a removed member leaves the configuration and the
// member list; a member that is not there, and the last voter, are refused.
func TestRemoveMember(t *testing.T) {
	t.Parallel()
	ss := followCluster(t)
	c := servertest.Dial(t, ss[0].Addr(), servertest.Operator(t, ss[0]))
	ctx := testContext(t)
	l := leaderOf(t, ss...)
	var gone *server.Server
	for _, s := range ss {
		if s != l {
			gone = s
		}
	}
	retryUnavailable(t, "remove a follower", func(ctx context.Context) error { return c.RemoveMember(ctx, gone.NodeID()) })
	servertest.Eventually(t, "two members listed", func() bool {
		ms, err := c.Members(ctx, false)
		return err == nil && len(ms.Members) == 2 && !slices.ContainsFunc(ms.Members, func(m client.Member) bool { return m.NodeID == gone.NodeID() })
	})
	if err := c.RemoveMember(ctx, "no-such-node"); !errors.Is(err, djinn.ErrNoSuchObject) || !strings.Contains(err.Error(), "no-such-node") {
		t.Errorf("remove a node that is no member: %v, want no such object naming it", err)
	}

	single := servertest.Start(t, servertest.Config(t))
	sc := servertest.Dial(t, single.Addr(), servertest.Operator(t, single))
	if err := sc.RemoveMember(ctx, single.NodeID()); !errors.Is(err, djinn.ErrInvalidArgument) || !strings.Contains(err.Error(), "last voter") {
		t.Errorf("remove the last voter: %v, want invalid argument", err)
	}
}

// TestLeaderLeaves: a leader asked to leave hands its leadership on, is
// removed, and says it left; the others go on serving.
func TestLeaderLeaves(t *testing.T) {
	t.Parallel()
	ss := followCluster(t)
	l := leaderOf(t, ss...)
	c := servertest.Dial(t, strings.Join([]string{ss[0].Addr(), ss[1].Addr(), ss[2].Addr()}, ","), servertest.Operator(t, ss[0]))
	ctx := testContext(t)
	if err := c.Leave(ctx, l.Addr()); err != nil {
		t.Fatalf("leave: %v", err)
	}
	select {
	case <-l.Left():
	default:
		t.Fatal("the leader answered its leave but does not say it left")
	}
	servertest.Eventually(t, "the others to list two members and a leader", func() bool {
		ms, err := c.Members(ctx, false)
		return err == nil && len(ms.Members) == 2 && ms.LeaderID != "" && ms.LeaderID != l.NodeID()
	})
	retryUnavailable(t, "register after the leader left", func(ctx context.Context) error {
		_, err := c.Mailbox().Register(ctx, time.Minute)
		return err
	})
}

// TestTransferLeadership: leadership moves to the voter named, or to some
// other voter; a node that is no member is refused.
func TestTransferLeadership(t *testing.T) {
	t.Parallel()
	ss := followCluster(t)
	c := servertest.Dial(t, ss[0].Addr(), servertest.Operator(t, ss[0]))
	l := leaderOf(t, ss...)
	var to *server.Server
	for _, s := range ss {
		if s != l {
			to = s
		}
	}
	retryUnavailable(t, "transfer leadership", func(ctx context.Context) error {
		_, err := c.TransferLeadership(ctx, to.NodeID())
		return err
	})
	servertest.Eventually(t, "the named voter to lead", func() bool { return to.Node().IsLeader() })
	retryUnavailable(t, "transfer leadership to anyone", func(ctx context.Context) error {
		_, err := c.TransferLeadership(ctx, "")
		return err
	})
	servertest.Eventually(t, "another voter to lead", func() bool { return servertest.Leader(ss...) != nil && !to.Node().IsLeader() })
	var err error
	retryUnavailable(t, "refuse a transfer to a node that is no member", func(ctx context.Context) error {
		_, err = c.TransferLeadership(ctx, "no-such-node")
		if errors.Is(err, djinn.ErrNoSuchObject) {
			return nil
		}
		return err
	})
}
