package client

import (
	"slices"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
)

// A cluster's map of the members whose connection is up (which tells a
// session whether its leader is reachable) follows failures: a member
// whose connection fails leaves it, and when every member's has failed it
// is empty, never the last map in which some were up.
func TestClusterReadyFollowsFailures(t *testing.T) {
	rows := []struct {
		name string
		stop []int // the members stopped, by index; the leader is 0
	}{
		{"the leader down, another member up", []int{0}},
		{"every member down, the leader last", []int{1, 0}},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			t.Parallel()
			var rec recorder
			members := []*Listener{startListener(t, rec.notify), startListener(t, rec.notify)}
			eps := []string{members[0].Addr(), members[1].Addr()}
			pool := NewPool()
			t.Cleanup(func() { pool.Close() })
			cl, err := pool.newCluster(eps, true) // no refresh loop: the leader is set here
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cl.cc.Close() })
			maps := make(chan map[string]bool, 64)
			cl.onReady = func(m map[string]bool) { maps <- m }
			cl.setLeader(eps[0])
			cl.cc.Connect()
			awaitMap(t, maps, func(m map[string]bool) bool { return m[eps[0]] && m[eps[1]] })

			for n, i := range r.stop { // one at a time: each failure is seen before the next
				members[i].Close()
				if n == len(members)-1 {
					awaitNotReady(t, cl.cc)
				} else {
					awaitMap(t, maps, func(m map[string]bool) bool { return !m[eps[i]] })
				}
			}
			for i, ep := range eps {
				want := !slices.Contains(r.stop, i)
				if got := cl.isReady(ep); got != want {
					t.Errorf("member %d (%s): ready %v, want %v", i, ep, got, want)
				}
			}
			if ep, ready := cl.sessionLeader(); ready {
				t.Errorf("session leader %s read as reachable after its connection failed", ep)
			}
		})
	}
}

// awaitMap waits until the cluster reports a map of members up that ok
// accepts; only the test's deadline bounds it.
func awaitMap(t *testing.T, maps <-chan map[string]bool, ok func(map[string]bool) bool) {
	t.Helper()
	for {
		select {
		case m := <-maps:
			if ok(m) {
				return
			}
		case <-t.Context().Done():
			t.Fatal("the members up never became what was expected")
		}
	}
}

// awaitNotReady waits until cc leaves READY; only the test's deadline
// bounds it.
func awaitNotReady(t *testing.T, cc *grpc.ClientConn) {
	t.Helper()
	for s := cc.GetState(); s == connectivity.Ready; s = cc.GetState() {
		if !cc.WaitForStateChange(t.Context(), s) {
			t.Fatal("the connection never left READY")
		}
	}
}
