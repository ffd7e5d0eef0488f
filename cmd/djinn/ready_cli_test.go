package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/internal/server/servertest"
)

// TestCLIWaitsForStartingServer: a command that needs a server's
// services, run while the server is still starting (started with
// --bootstrap=false: no cluster service id until a member adds it), says
// once on stderr what it waits for, and succeeds once the server is
// added: those that find their service through its status (txn) and those
// that only its serving leader answers (mailbox, renewal), and a bench,
// which measures only once it is ready. Its status says, meanwhile, what
// it waits for; status --wait and --wait-timeout are shown on it too
// (statusWaitRows, waitTimeoutRows).
func TestCLIWaitsForStartingServer(t *testing.T) {
	a, b := newNode(t), newNode(t)
	pa := a.start(t)
	defer pa.stop(t)
	sec := filepath.Join(a.dir, "join-secret")
	pb := b.start(t, "--bootstrap=false", "--join-secret-file", sec)
	defer pb.stop(t)
	addLine := regexp.MustCompile(`djinn member add (\S+) --raft (\S+) --grpc (\S+) `)
	var m []string
	if !poll(10*time.Second, func() bool { m = addLine.FindStringSubmatch(pb.output()); return m != nil }) {
		t.Fatalf("a server waiting to be added does not say how:\n%s", pb.output())
	}
	// Its status says what it lacks, and names no service by a reference
	// that names no object.
	st, errs, ok := runAt(t, b.listen, "status")
	if !ok || !strings.Contains(st, "service   none yet") || !strings.Contains(st, "leader    none known yet") || strings.Contains(st, "landlord  ") {
		t.Errorf("status of a server waiting to be added: %s%s; want no service id and no leader yet, and no references", st, errs)
	}
	waitTimeoutRows(t, b.listen)
	statusAnswered := statusWaitRows(t, b.listen)
	type waiter struct {
		cmd   *exec.Cmd
		out   strings.Builder
		lines *bufio.Scanner
	}
	var ws []*waiter
	for _, args := range [][]string{
		{"txn", "create", "--lease", "1m"},
		{"mailbox", "register", "--lease", "1m"},
		{"renewal", "create", "--lease", "1m"},
		{"bench", "--ops", "empty", "--clients", "1", "--for", "100ms", "--conns", "1"},
	} {
		w := &waiter{cmd: exec.Command(djinnBinary(t), append(args, "-o", "json", "--server", b.listen)...)}
		w.cmd.Stdout = &w.out
		stderr, err := w.cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := w.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer w.cmd.Process.Kill()
		w.lines = bufio.NewScanner(stderr)
		var said []string
		for w.lines.Scan() && !strings.Contains(w.lines.Text(), "waiting") {
			said = append(said, w.lines.Text()) // a bench's progress
		}
		if !strings.Contains(w.lines.Text(), b.listen) {
			t.Fatalf("%v: stderr %q then %q: want what it waits for, naming the server", args, said, w.lines.Text())
		}
		ws = append(ws, w)
	}
	if o, errs, ok := runAt(t, a.listen, "member", "add", m[1], "--raft", m[2], "--grpc", m[3], "--join-secret-file", sec); !ok {
		t.Fatalf("member add: %s%s", o, errs)
	}
	statusAnswered()
	for _, w := range ws {
		var rest []string
		for w.lines.Scan() {
			rest = append(rest, w.lines.Text())
		}
		if err := w.cmd.Wait(); err != nil || strings.Contains(strings.Join(rest, "\n"), "waiting") || !json.Valid([]byte(w.out.String())) {
			t.Errorf("%v once the server was added: %v, stdout %q, more stderr %q; want its JSON, and one notice", w.cmd.Args[1:3], err, w.out.String(), rest)
		}
	}
}

// statusWaitRows: status --wait gives up on a server waiting to be added,
// saying what it lacks and how to see it; started again, it waits. Once
// the server is added, answered checks that it answered, ready.
func statusWaitRows(t *testing.T, addr string) (answered func()) {
	t.Helper()
	if _, errs, ok := runAt(t, addr, "status", "--wait", "1s"); ok || !strings.Contains(errs, addr+" answers but is not ready: its cluster has no service id yet") ||
		!strings.Contains(errs, "gave up after waiting 1s") || !strings.Contains(errs, "djinn status --server "+addr+", without --wait, shows what it lacks") {
		t.Errorf("status --wait 1s of a server waiting to be added: %q; want it gave up, naming the server, what it lacks and how to see it", errs)
	}
	status := exec.Command(djinnBinary(t), "status", "--wait", "60s", "-o", "json", "--server", addr)
	var out strings.Builder
	status.Stdout = &out
	if err := status.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = status.Process.Kill() })
	return func() {
		t.Helper()
		var v statusView
		if err := status.Wait(); err != nil || json.Unmarshal([]byte(out.String()), &v) != nil || v.Mailbox == "" {
			t.Errorf("status --wait once the server was added: %v, %q; want its status, ready", err, out.String())
		}
	}
}

// waitTimeoutRows: against a server that does not become ready, a
// service command with --wait-timeout 0 (or DJINN_WAIT_TIMEOUT=0) asks
// once and fails without waiting; with a short one, it says it waits,
// then gives up once it passed; either way the error names the server and
// how to see what it waits for. A timeout that is not one is a usage
// error naming it.
func waitTimeoutRows(t *testing.T, addr string) {
	t.Helper()
	hint := "djinn status --server " + addr + " says what it waits for"
	for _, tc := range []struct {
		name   string
		args   []string
		env    string
		code   int
		stderr []string // each in stderr
		waits  bool     // stderr says it waits
	}{
		{"--wait-timeout 0", []string{"txn", "create", "--wait-timeout", "0"}, "", 1, []string{"server at " + addr + " is still starting", hint}, false},
		{"DJINN_WAIT_TIMEOUT=0", []string{"mailbox", "register", "--lease", "1m"}, "0", 1, []string{"server at " + addr + " is still starting", hint}, false},
		{"bench, --wait-timeout 0", []string{"bench", "--ops", "empty", "--clients", "1", "--for", "100ms", "--conns", "1", "--wait-timeout", "0"}, "", 1, []string{hint}, false},
		{"--wait-timeout 1s", []string{"lock", "create", "--wait-timeout", "1s"}, "", 1, []string{"waiting up to 1s (--wait-timeout)", "gave up after waiting 1s", hint}, true},
		{"DJINN_WAIT_TIMEOUT=1s", []string{"renewal", "create", "--lease", "1m"}, "1s", 1, []string{"waiting up to 1s (--wait-timeout)", "gave up after waiting 1s", hint}, true},
		{"not a duration", []string{"txn", "create", "--wait-timeout", "soon"}, "", 2, []string{`--wait-timeout "soon" (or DJINN_WAIT_TIMEOUT): not a duration`}, false},
		{"negative", []string{"txn", "create", "--wait-timeout", "-1s"}, "", 2, []string{"--wait-timeout -1s (or DJINN_WAIT_TIMEOUT): must be 0 (do not wait) or positive"}, false},
	} {
		cmd := exec.Command(djinnBinary(t), append(tc.args, "--server", addr)...)
		cmd.Env = os.Environ()
		if tc.env != "" {
			cmd.Env = append(cmd.Env, "DJINN_WAIT_TIMEOUT="+tc.env)
		}
		var errb strings.Builder
		cmd.Stderr = &errb
		err := cmd.Run()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != tc.code || strings.Contains(errb.String(), "waiting up to") != tc.waits {
			t.Errorf("%s: %v, stderr %q; want exit status %d, a notice that it waits: %v", tc.name, err, errb.String(), tc.code, tc.waits)
			continue
		}
		for _, want := range tc.stderr {
			if !strings.Contains(errb.String(), want) {
				t.Errorf("%s: stderr %q lacks %q", tc.name, errb.String(), want)
			}
		}
	}
}

// TestNotReadyHint: when the wait runs out, the error names the server and
// how to see what it waits for, and stays unavailable; other errors are
// left alone.
func TestNotReadyHint(t *testing.T) {
	other := djinn.Errorf(djinn.Unavailable, "connection refused")
	if got := notReadyHint(other); got != other {
		t.Errorf("notReadyHint(%v) = %v, want it unchanged", other, got)
	}
	first := servertest.Start(t, servertest.Config(t))
	s := servertest.OpenWaiting(t, first) // no service id until a member adds it
	err := notReadyHint(servertest.Dial(t, s.Addr()).Ready(t.Context()))
	if !errors.Is(err, client.ErrNotReady) || djinn.KindOf(err) != djinn.Unavailable {
		t.Fatalf("hinted error %v: want still not ready, unavailable", err)
	}
	if want := "djinn status --server " + s.Addr(); !strings.Contains(err.Error(), want) {
		t.Errorf("hinted error %q: want %q", err, want)
	}
}

// TestServingAsksStatusOnce: serving finds a service with one Status call
// per try — readiness and the reference come from one answer — whether
// the server is ready (the service found) or still starting (not ready,
// naming the server).
func TestServingAsksStatusOnce(t *testing.T) {
	first := servertest.Start(t, servertest.Config(t))
	starting := servertest.OpenWaiting(t, first) // no service id until a member adds it
	for _, tc := range []struct {
		name string
		addr string
		want error
	}{
		{"ready", first.Addr(), nil},
		{"still starting", starting.Addr(), client.ErrNotReady},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var calls atomic.Int32
			count := grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoke grpc.UnaryInvoker, opts ...grpc.CallOption) error {
				if strings.HasSuffix(method, "/Status") {
					calls.Add(1)
				}
				return invoke(ctx, method, req, reply, cc, opts...)
			})
			c := servertest.Dial(t, tc.addr, client.WithDialOptions(count))
			calls.Store(0)
			m, err := serving(c, (*client.Status).TransactionManager)(t.Context())
			if !errors.Is(err, tc.want) || (err == nil && m.Ref().Service.IsZero()) {
				t.Fatalf("serving: %v, %v; want %v", m, err, tc.want)
			}
			if n := calls.Load(); n != 1 {
				t.Errorf("%d Status calls for one try, want 1", n)
			}
		})
	}
}
