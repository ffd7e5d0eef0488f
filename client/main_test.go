package client

import (
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client/clienttest"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// The tests that run a real server: raft's transport and the WAL
		// leave background goroutines that exit shortly after Shutdown.
		goleak.IgnoreTopFunction("github.com/hashicorp/raft.(*NetworkTransport).listen"),
		goleak.IgnoreTopFunction("github.com/hashicorp/raft-wal.(*WAL).runRotate"),
		goleak.IgnoreAnyFunction("github.com/hashicorp/raft.(*netPipeline).decodeResponses"),
		goleak.IgnoreAnyFunction("github.com/hashicorp/raft.(*NetworkTransport).handleConn"),
	)
}

// startLandlord serves a test landlord on a loopback port and returns it
// with a pool to reach it; both stop when the test ends.
func startLandlord(t *testing.T, def, max time.Duration) (*clienttest.Landlord, *Pool) {
	t.Helper()
	ll := clienttest.NewLandlord(def, max)
	stop, err := ll.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := NewPool()
	t.Cleanup(func() {
		p.Close()
		stop()
	})
	return ll, p
}

// grant asks ll for a lease for d and holds it as a client would.
func grant(t *testing.T, ll *clienttest.Landlord, d time.Duration) *Lease {
	t.Helper()
	sent := time.Now()
	pb, err := ll.Grant(d)
	if err != nil {
		t.Fatal(err)
	}
	l, err := LeaseFromProto(pb, sent)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// inProcess reaches ll without a network, for tests under testing/synctest.
func inProcess(ll *clienttest.Landlord) landlordDialer {
	return func(djinn.Ref) (djinnpb.LandlordClient, error) { return ll.Client(), nil }
}

// pending returns the calls ll answered that the test has not read yet.
func pending(ll *clienttest.Landlord) []clienttest.Call {
	var out []clienttest.Call
	for {
		select {
		case c := <-ll.Calls():
			out = append(out, c)
		default:
			return out
		}
	}
}

// nextCall waits for ll's next call (outside synctest bubbles).
func nextCall(t *testing.T, ll *clienttest.Landlord) clienttest.Call {
	t.Helper()
	select {
	case c := <-ll.Calls():
		return c
	case <-time.After(10 * time.Second):
		t.Fatal("no call reached the landlord")
		return clienttest.Call{}
	}
}
