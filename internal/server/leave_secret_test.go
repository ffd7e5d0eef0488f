package server_test

import (
	"strings"
	"testing"

	"github.com/djinn-go/djinn/internal/server/servertest"
)

// TestFollowerLeavesWithTheJoinSecret: without mutual TLS, a follower
// asked to leave asks the leader to remove it over its peers' pool, which
// presents the join secret to the cluster's members: the leader takes
// it as the operator's and the follower leaves.
func TestFollowerLeavesWithTheJoinSecret(t *testing.T) {
	t.Parallel()
	ss := followCluster(t)
	l := leaderOf(t, ss...)
	f := ss[0]
	if f == l {
		f = ss[1]
	}
	c := servertest.Dial(t, strings.Join([]string{ss[0].Addr(), ss[1].Addr(), ss[2].Addr()}, ","), servertest.Operator(t, ss[0]))
	if err := c.Leave(testContext(t), f.Addr()); err != nil {
		t.Fatalf("a follower's leave: %v", err)
	}
	select {
	case <-f.Left():
	default:
		t.Fatal("the follower answered its leave but does not say it left")
	}
}
