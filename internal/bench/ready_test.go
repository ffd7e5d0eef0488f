package bench

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/internal/server"
	"github.com/djinn-go/djinn/internal/server/servertest"
	"github.com/djinn-go/djinn/kv"
)

// noticeWriter takes a bench's progress lines and hands each on, in order.
type noticeWriter struct {
	mu    sync.Mutex
	lines chan string
}

func (w *noticeWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.lines <- string(p) // the test reads every line until the bench is done
	return len(p), nil
}

// startingServer starts a server that waits to be added to first's
// cluster: until then it has no service id and is not ready.
func startingServer(t *testing.T, first *server.Server) *server.Server {
	t.Helper()
	return servertest.OpenWaiting(t, first)
}

// TestTxnWaitsForStartingParticipant: a transaction bench one of whose
// participants' servers is still starting says so, measures nothing
// until that server is ready, and then completes its transactions.
func TestTxnWaitsForStartingParticipant(t *testing.T) {
	mgr := servertest.Start(t, servertest.Config(t))
	p1 := servertest.Start(t, servertest.Config(t))
	p2 := startingServer(t, p1)
	b := &Txn{Levels: []int{2}, Duration: 200 * time.Millisecond, Conns: 1, KV: []string{p1.Addr(), p2.Addr()},
		Lease: time.Minute, Lag: time.Minute}
	if err := b.Check(); err != nil {
		t.Fatal(err)
	}
	w := &noticeWriter{lines: make(chan string, 1)}
	env := txnEnv(mgr.Addr())
	env.Progress, env.ReadyWait = w, servertest.Timeout
	measured := make(chan Result, 1)
	env.Result = func(r Result) { measured <- r }
	type run struct {
		rep Report
		err error
	}
	done := make(chan run, 1)
	go func() {
		rep, err := b.Run(t.Context(), env)
		done <- run{rep, err}
	}()
	for line := range w.lines {
		if strings.Contains(line, "waiting") && strings.Contains(line, p2.Addr()) {
			break
		}
	}
	select {
	case r := <-measured:
		t.Fatalf("measured %+v while a participant's server was still starting", r)
	default:
	}
	op := servertest.Dial(t, p1.Addr(), servertest.Operator(t, p1))
	if err := op.AddMember(t.Context(), client.NewMember{NodeID: p2.NodeID(), RaftAddress: p2.RaftAddr(), Endpoint: p2.Addr()}); err != nil {
		t.Fatal(err)
	}
	go func() {
		for range w.lines { // later progress lines
		}
	}()
	r := <-done
	close(w.lines)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if err := r.rep.Verdict(); err != nil || r.rep.Results[0].Ops == 0 {
		t.Fatalf("once the participant's server was ready: %v, %+v", err, r.rep.Results[0])
	}
}

// TestBenchRefusesStartingServer: with (almost) no time to wait, a bench
// against a server still starting fails before it measures, naming the
// server.
func TestBenchRefusesStartingServer(t *testing.T) {
	s := startingServer(t, servertest.Start(t, servertest.Config(t)))
	b := &Txn{Levels: []int{1}, Duration: time.Second, Conns: 1, KV: []string{s.Addr()}, Lease: time.Minute}
	if err := b.Check(); err != nil {
		t.Fatal(err)
	}
	env := txnEnv(s.Addr())
	env.ReadyWait = time.Nanosecond
	rep, err := b.Run(t.Context(), env)
	if addr, ok := client.NotReadyServer(err); !errors.Is(err, client.ErrNotReady) || !ok || addr != s.Addr() || len(rep.Results) != 0 {
		t.Fatalf("bench of a server still starting: %v, %d results; want not ready, naming %s, nothing measured", err, len(rep.Results), s.Addr())
	}
}

// addedMember starts a server and adds it to first's cluster, as
// `djinn member add` does, and waits until it is ready.
func addedMember(t *testing.T, first *server.Server) *server.Server {
	t.Helper()
	s := startingServer(t, first)
	op := servertest.Dial(t, first.Addr(), servertest.Operator(t, first))
	if err := op.AddMember(t.Context(), client.NewMember{NodeID: s.NodeID(), RaftAddress: s.RaftAddr(), Endpoint: s.Addr()}); err != nil {
		t.Fatal(err)
	}
	servertest.WaitReady(t, s)
	return s
}

// benchKeys lists the keys the bench wrote in the key/value store of the
// server at addr, asked of that server alone.
func benchKeys(t *testing.T, addr string) int {
	t.Helper()
	c := servertest.Dial(t, addr)
	conn, err := c.Conn(addr)
	if err != nil {
		t.Fatal(err)
	}
	entries, err := kv.NewClient(conn).List(t.Context(), nil, "bench/")
	if err != nil {
		t.Fatal(err)
	}
	return len(entries)
}

// TestTxnWritesAtAddedMember: a participant whose server is a follower
// just added to its leader's cluster gets the bench's writes, and its
// read-back finds them there. The key/value store is each node's own:
// the writes and the read-back go to the server named, never through the
// cluster to its leader.
func TestTxnWritesAtAddedMember(t *testing.T) {
	leader := servertest.Start(t, servertest.Config(t))
	follower := addedMember(t, leader)
	b := &Txn{Levels: []int{2}, Duration: 200 * time.Millisecond, Conns: 2, KV: []string{follower.Addr()},
		Lease: time.Minute, Lag: time.Minute}
	if err := b.Check(); err != nil {
		t.Fatal(err)
	}
	env := txnEnv(leader.Addr())
	env.ReadyWait = servertest.Timeout
	rep, err := b.Run(t.Context(), env)
	if err != nil {
		t.Fatal(err)
	}
	if err := rep.Verdict(); err != nil || rep.Results[0].Ops == 0 {
		t.Fatalf("bench with a participant on a member just added: %v, %+v", err, rep.Results[0])
	}
	if n := benchKeys(t, leader.Addr()); n != 0 {
		t.Errorf("the leader's own key/value store holds %d of the bench's keys; want none: they are the follower's", n)
	}
	if n := benchKeys(t, follower.Addr()); n == 0 {
		t.Errorf("the follower's key/value store holds none of the bench's keys")
	}
}
