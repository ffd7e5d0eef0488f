package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/grpcerr"
	"github.com/djinn-go/djinn/internal/testproxy"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// These tests run the real binary: they build it once, start it as its own
// process, kill it with SIGKILL and start it again on the same data.

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// TestMain removes the binary the tests built once they are done: each run
// of the package would otherwise leave a copy in the temporary directory.
func TestMain(m *testing.M) {
	code := m.Run()
	if binPath != "" {
		_ = os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}

func djinnBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the real binary")
	}
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "djinn-bin")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "djinn")
		gobin, err := exec.LookPath("go")
		if err != nil {
			buildErr = fmt.Errorf("the go command is needed to build the binary: %w", err)
			return
		}
		out, err := exec.Command(gobin, "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

func freePort(t *testing.T) string {
	t.Helper()
	return freePorts(t, 1)[0]
}

// proc is a running djinn serve.
type proc struct {
	cmd  *exec.Cmd
	addr string
	out  *strings.Builder
	mu   sync.Mutex
	// exited is closed when the server's output ends: it has exited.
	exited chan struct{}
}

type node struct {
	dir, listen, admin, raft, discovery string
	started                             bool // once: its addresses are its own from then on
}

func newNode(t *testing.T) *node {
	ps := freePorts(t, 4)
	return &node{dir: t.TempDir(), listen: ps[0], admin: ps[1], raft: ps[2], discovery: ps[3]}
}

// freePorts returns n distinct loopback addresses free now.
func freePorts(t *testing.T, n int) []string {
	t.Helper()
	addrs, err := testproxy.FreeAddrs(n)
	if err != nil {
		t.Fatal(err)
	}
	return addrs
}

// start runs djinn serve and waits until it prints that it serves. A
// node's first start that finds one of its ports taken meanwhile (by a
// process that is not this test's) is made again on other ports.
func (n *node) start(t *testing.T, extra ...string) *proc {
	t.Helper()
	for try := 1; ; try++ {
		p, ready := n.launch(t, extra...)
		select {
		case <-ready:
			n.started = true
			return p
		case <-p.exited:
			p.kill()
			if n.started || try == 3 || !strings.Contains(p.output(), "address already in use") {
				t.Fatalf("server did not start:\n%s", p.output())
			}
			t.Logf("a port was taken before the server listened on it; trying others:\n%s", p.output())
			ps := freePorts(t, 4)
			n.listen, n.admin, n.raft, n.discovery = ps[0], ps[1], ps[2], ps[3]
		case <-time.After(60 * time.Second):
			p.kill()
			t.Fatalf("server did not start:\n%s", p.output())
		}
	}
}

// launch runs djinn serve; ready is closed once it prints that it serves.
func (n *node) launch(t *testing.T, extra ...string) (*proc, <-chan struct{}) {
	t.Helper()
	args := append([]string{"serve", "--data-dir", n.dir, "--listen", n.listen, "--admin", n.admin, "--raft", n.raft,
		"--discovery", n.discovery, "--election-timeout", "200ms", "--heartbeat-timeout", "200ms"}, extra...)
	cmd := exec.Command(djinnBinary(t), args...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, addr: n.listen, out: &strings.Builder{}, exited: make(chan struct{})}
	cmd.Stderr = &lockedWriter{p: p}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan struct{})
	go func() {
		defer close(p.exited)
		sc := bufio.NewScanner(stdout)
		once := sync.Once{}
		for sc.Scan() {
			p.mu.Lock()
			p.out.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
			if strings.HasPrefix(sc.Text(), "djinn serving") {
				once.Do(func() { close(ready) })
			}
		}
	}()
	return p, ready
}

type lockedWriter struct{ p *proc }

func (w *lockedWriter) Write(b []byte) (int, error) {
	w.p.mu.Lock()
	defer w.p.mu.Unlock()
	return w.p.out.Write(b)
}

func (p *proc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// kill sends SIGKILL: no shutdown code runs.
func (p *proc) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	_ = p.cmd.Wait()
}

// stop sends SIGTERM and waits for a clean exit.
func (p *proc) stop(t *testing.T) {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	if err := p.cmd.Wait(); err != nil {
		t.Fatalf("server exited with %v after SIGTERM:\n%s", err, p.output())
	}
}

func dial(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestKillAndRestart: registrations and stored events acknowledged before a
// SIGKILL survive it; a lease that expired while the server was down stays
// expired; a live lease still renews.
func TestKillAndRestart(t *testing.T) {
	n := newNode(t)
	p := n.start(t, "--lease-checkpoint", "1s")
	mb := djinnpb.NewEventMailboxClient(dial(t, p.addr))
	ls := djinnpb.NewEventListenerClient(dial(t, p.addr))
	ctx := ctxT(t)

	long, err := mb.Register(ctx, &djinnpb.MailboxRegisterRequest{LeaseDurationNanos: int64(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	short, err := mb.Register(ctx, &djinnpb.MailboxRegisterRequest{LeaseDurationNanos: int64(time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	src := &djinnpb.Ref{Endpoint: "127.0.0.1:1", ServiceId: []byte("bench-generator-"), ObjectId: []byte("source-object-id")}
	const events = 200
	for i := range events {
		_, err := ls.Notify(ctx, &djinnpb.NotifyRequest{ListenerId: long.Listener.ObjectId,
			Event: &djinnpb.RemoteEvent{Source: src, EventId: 1, Sequence: int64(i + 1), Handback: []byte("hb")}})
		if err != nil {
			t.Fatalf("notify %d: %v", i, err)
		}
	}
	// EM.4.1: the unknown-event list is persistent too.
	if _, err := mb.AddUnknownEvents(ctx, &djinnpb.AddUnknownEventsRequest{RegistrationId: long.RegistrationId,
		Events: []*djinnpb.EventKey{{Source: src, EventId: 99}}}); err != nil {
		t.Fatal(err)
	}
	p.kill()

	// Down long enough for the short lease, and its horizon (1s lease +
	// 1s checkpoint slack), to pass.
	<-time.After(3 * time.Second)

	p = n.start(t, "--lease-checkpoint", "1s")
	defer p.stop(t)
	mb = djinnpb.NewEventMailboxClient(dial(t, p.addr))
	got, err := mb.GetRegistration(ctx, &djinnpb.MailboxRegistrationRequest{RegistrationId: long.RegistrationId})
	if err != nil {
		t.Fatalf("registration lost across kill -9: %v\n%s", err, p.output())
	}
	if got.StoredEvents != events {
		t.Fatalf("%d stored events after kill -9, want %d", got.StoredEvents, events)
	}
	_, err = mb.GetRegistration(ctx, &djinnpb.MailboxRegistrationRequest{RegistrationId: short.RegistrationId})
	if !errors.Is(grpcerr.FromStatus(err), djinn.ErrNoSuchObject) {
		t.Fatalf("a registration whose lease expired while down: %v, want NoSuchObject", err)
	}
	// EM.4.1: the mailbox listener is still valid, and still refuses the
	// kinds on the persistent unknown-event list.
	ls = djinnpb.NewEventListenerClient(dial(t, p.addr))
	_, err = ls.Notify(ctx, &djinnpb.NotifyRequest{ListenerId: long.Listener.ObjectId,
		Event: &djinnpb.RemoteEvent{Source: src, EventId: 99, Sequence: 1}})
	if !errors.Is(grpcerr.FromStatus(err), djinn.ErrUnknownEvent) {
		t.Fatalf("notify of an unknown kind after restart: %v, want UnknownEvent", err)
	}
	if _, err := ls.Notify(ctx, &djinnpb.NotifyRequest{ListenerId: long.Listener.ObjectId,
		Event: &djinnpb.RemoteEvent{Source: src, EventId: 1, Sequence: events + 1}}); err != nil {
		t.Fatalf("the mailbox listener did not survive the restart: %v", err)
	}
	ll := djinnpb.NewLandlordClient(dial(t, p.addr))
	if _, err := ll.Renew(ctx, &djinnpb.RenewRequest{Cookie: short.Lease.Cookie, DurationNanos: int64(time.Minute)}); !errors.Is(grpcerr.FromStatus(err), djinn.ErrUnknownLease) {
		t.Fatalf("renewing a lease that expired while down: %v, want UnknownLease", err)
	}
	if _, err := ll.Renew(ctx, &djinnpb.RenewRequest{Cookie: long.Lease.Cookie, DurationNanos: int64(time.Minute)}); err != nil {
		t.Fatalf("renewing a live lease after restart: %v", err)
	}

	// Pull everything back in order.
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := mb.Pull(pctx, &djinnpb.PullRequest{RegistrationId: long.RegistrationId})
	if err != nil {
		t.Fatal(err)
	}
	var next int64 = 1
	for next <= events+1 {
		msg, err := stream.Recv()
		if err == io.EOF || err != nil {
			t.Fatalf("pull: %v", err)
		}
		for _, e := range msg.Events {
			if e.Event.Sequence != next {
				t.Fatalf("pulled sequence %d, want %d", e.Event.Sequence, next)
			}
			next++
		}
	}
}

// TestRenewalSurvivesKill: a renewal set, its client leases with their
// desired expirations and its listener survive a SIGKILL of the renewal
// service, which goes on renewing after the restart, so the leases never
// lapse at their landlord (LR.2: persistent sets).
func TestRenewalSurvivesKill(t *testing.T) {
	landlord := newNode(t).start(t, "--mailbox-default-lease", "10s", "--mailbox-max-lease", "10s")
	defer landlord.stop(t)
	n := newNode(t)
	p := n.start(t)
	ctx := ctxT(t)
	mb := djinnpb.NewEventMailboxClient(dial(t, landlord.addr))
	reg, err := mb.Register(ctx, &djinnpb.MailboxRegisterRequest{LeaseDurationNanos: int64(djinn.Any)})
	if err != nil {
		t.Fatal(err)
	}
	rs := djinnpb.NewLeaseRenewalServiceClient(dial(t, p.addr))
	set, err := rs.CreateSet(ctx, &djinnpb.CreateSetRequest{LeaseDurationNanos: int64(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	setID := set.GetSet().GetObjectId()
	listener := &djinnpb.Ref{Endpoint: "127.0.0.1:1", ServiceId: []byte("test-listener-sv"), ObjectId: []byte("test-listener-ob")}
	if _, err := rs.SetRenewalFailureListener(ctx, &djinnpb.SetRenewalFailureListenerRequest{SetId: setID, Listener: listener, Handback: []byte("hb")}); err != nil {
		t.Fatal(err)
	}
	const desired = 2 * time.Hour
	if _, err := rs.RenewFor(ctx, &djinnpb.RenewForRequest{SetId: setID, Lease: reg.GetLease(),
		DesiredDurationNanos: int64(desired), RenewDurationNanos: int64(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	// Note the recorded expiration, then kill.
	var before int64
	if !poll(20*time.Second, func() bool {
		ls, err := rs.GetLeases(ctx, &djinnpb.GetLeasesRequest{SetId: setID})
		if err != nil || len(ls.GetLeases()) != 1 {
			return false
		}
		before = time.Now().UnixNano() + ls.GetLeases()[0].GetLease().GetDurationNanos()
		return time.Duration(ls.GetLeases()[0].GetLease().GetDurationNanos()) > 8*time.Second
	}) {
		t.Fatalf("no renewal recorded:\n%s", p.output())
	}
	p.kill()
	p = n.start(t)
	defer p.stop(t)
	rs = djinnpb.NewLeaseRenewalServiceClient(dial(t, p.addr))
	got, err := rs.GetSet(ctx, &djinnpb.SetRequest{SetId: setID})
	if err != nil {
		t.Fatalf("set lost across kill -9: %v\n%s", err, p.output())
	}
	if got.GetLeases() != 1 || got.GetRenewalFailure() == nil || string(got.GetRenewalFailure().GetHandback()) != "hb" {
		t.Fatalf("set after kill -9: %v; want its lease and its failure listener", got)
	}
	ls, err := rs.GetLeases(ctx, &djinnpb.GetLeasesRequest{SetId: setID})
	if err != nil || len(ls.GetLeases()) != 1 {
		t.Fatalf("leases after kill -9: %v %v", ls, err)
	}
	cl := ls.GetLeases()[0]
	if cl.GetRenewDurationNanos() != int64(time.Minute) || time.Until(time.Unix(0, cl.GetDesiredExpirationUnixNanos())) < desired-time.Minute {
		t.Fatalf("client lease after kill -9: renew %v desired %v", time.Duration(cl.GetRenewDurationNanos()), time.Unix(0, cl.GetDesiredExpirationUnixNanos()))
	}
	// The restarted service renews the lease past its pre-crash expiration,
	// and the landlord never lost it.
	if !poll(30*time.Second, func() bool {
		ls, err := rs.GetLeases(ctx, &djinnpb.GetLeasesRequest{SetId: setID})
		if err != nil || len(ls.GetLeases()) != 1 {
			return false
		}
		return time.Now().UnixNano()+ls.GetLeases()[0].GetLease().GetDurationNanos() > before+int64(time.Second)
	}) {
		t.Fatalf("no renewal after restart:\n%s", p.output())
	}
	if _, err := mb.GetRegistration(ctx, &djinnpb.MailboxRegistrationRequest{RegistrationId: reg.GetRegistrationId()}); err != nil {
		t.Fatalf("the client lease lapsed at its landlord across the renewal service's crash: %v", err)
	}
}

// poll checks cond every 50ms until it holds or d passes.
func poll(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		<-time.After(50 * time.Millisecond)
	}
}

// TestStartMovesOffATakenPort: a node whose port another process took
// before its first start is started on other ports, not given up on.
func TestStartMovesOffATakenPort(t *testing.T) {
	n := newNode(t)
	taken := n.raft
	l, err := net.Listen("tcp", taken)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	p := n.start(t)
	defer p.stop(t)
	if n.raft == taken {
		t.Fatalf("started with raft address %s, which was taken", taken)
	}
	if _, errs, ok := runAt(t, n.listen, "status"); !ok {
		t.Fatalf("status of the moved server: %s", errs)
	}
}
