package client_test

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/internal/server/servertest"
)

// resetHolder forwards TCP connections to a gRPC server and keeps back the
// HTTP/2 RST_STREAM frames its clients send, forwarding everything else:
// a cancelled call's cancellation then never reaches the server, which is
// the worst case of what a sender's cancellation guarantees (it arrives at
// some later time). Nothing is timed.
type resetHolder struct {
	ln     net.Listener
	mu     sync.Mutex
	target string     // guarded by mu: where connections go
	conns  []net.Conn // guarded by mu
	held   int        // guarded by mu: RST_STREAM frames kept back
	wg     sync.WaitGroup
}

func newResetHolder(t *testing.T) *resetHolder {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &resetHolder{ln: ln}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *resetHolder) accept() {
	defer p.wg.Done()
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		target := p.target
		p.mu.Unlock()
		out, err := net.Dial("tcp", target)
		if err != nil {
			in.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, in, out)
		p.mu.Unlock()
		p.wg.Add(2)
		go func() {
			defer p.wg.Done()
			_, _ = io.Copy(in, out) // ends when either side closes
		}()
		go func() {
			defer p.wg.Done()
			p.forward(out, in)
		}()
	}
}

// forward copies the client's preface and frames to the server, except
// RST_STREAM frames (type 3).
func (p *resetHolder) forward(dst io.Writer, src io.Reader) {
	preface := make([]byte, 24)
	if _, err := io.ReadFull(src, preface); err != nil {
		return
	}
	if _, err := dst.Write(preface); err != nil {
		return
	}
	for {
		hdr := make([]byte, 9)
		if _, err := io.ReadFull(src, hdr); err != nil {
			return
		}
		n := int(binary.BigEndian.Uint32(append([]byte{0}, hdr[:3]...)))
		frame := make([]byte, 9+n)
		copy(frame, hdr)
		if _, err := io.ReadFull(src, frame[9:]); err != nil {
			return
		}
		if hdr[3] == 3 {
			p.mu.Lock()
			p.held++
			p.mu.Unlock()
			continue
		}
		if _, err := dst.Write(frame); err != nil {
			return
		}
	}
}

func (p *resetHolder) resetsHeld() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.held
}

func (p *resetHolder) close() {
	p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// EM.4.1: when DisableDelivery or EnableDelivery(new) returns, no event
// reaches the old target afterwards — even when the client calls it inside
// the target's handler for the first event of a batch, and the mailbox's
// cancellation of the batch never reaches the target's host (the worst
// case). Before the fix, the host handed the batch's events 2 and 3 after
// the call returned.
func TestEM41StopInsideTheHandlerForEvent1(t *testing.T) {
	t.Parallel()
	srv := servertest.Start(t, servertest.Config(t))
	c := servertest.Dial(t, srv.Addr())
	for _, tc := range []struct {
		name string
		stop func(ctx context.Context, reg *client.MailboxRegistration, other djinn.Ref) error
	}{
		{"EM.4.1 disableDelivery", func(ctx context.Context, reg *client.MailboxRegistration, _ djinn.Ref) error {
			return reg.DisableDelivery(ctx)
		}},
		{"EM.4.1 enableDelivery replacing the target", func(ctx context.Context, reg *client.MailboxRegistration, other djinn.Ref) error {
			return reg.EnableDelivery(ctx, other)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stopInsideHandler(t, c, tc.stop)
		})
	}
}

func stopInsideHandler(t *testing.T, c *client.Client, stop func(context.Context, *client.MailboxRegistration, djinn.Ref) error) {
	ctx, cancel := context.WithTimeout(t.Context(), servertest.Timeout)
	defer cancel()
	reg, err := c.Mailbox().Register(ctx, djinn.Any)
	if err != nil {
		t.Fatal(err)
	}
	src := djinn.Ref{Endpoint: "127.0.0.1:1", Service: djinn.NewID(), Object: djinn.NewID()}
	for seq := int64(1); seq <= 3; seq++ {
		if err := client.Notify(ctx, c, reg.Listener, &client.RemoteEvent{Source: src, ID: 7, Seq: seq}); err != nil {
			t.Fatalf("store event %d: %v", seq, err)
		}
	}
	other, err := client.Listen(ctx, "127.0.0.1:0", func(context.Context, *client.RemoteEvent) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()

	proxy := newResetHolder(t)
	var mu sync.Mutex
	var handed []int64
	var stopErr error
	batchDone := make(chan struct{}, 1)
	signal := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		resp, err := h(ctx, req)
		if info.FullMethod == "/djinn.v1.EventListener/NotifyBatch" {
			select {
			case batchDone <- struct{}{}:
			default:
			}
		}
		return resp, err
	}
	l, err := client.Listen(ctx, "127.0.0.1:0", func(ctx context.Context, ev *client.RemoteEvent) error {
		mu.Lock()
		handed = append(handed, ev.Seq)
		mu.Unlock()
		if ev.Seq == 1 {
			// Not the handler's context: it ends as the mailbox stops
			// the batch, before the call returns.
			err := stop(context.WithoutCancel(ctx), reg, other.Ref())
			mu.Lock()
			stopErr = err
			mu.Unlock()
		}
		return nil
	}, client.WithAdvertise(proxy.ln.Addr().String()), client.WithServerOptions(grpc.ChainUnaryInterceptor(signal)))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	proxy.mu.Lock()
	proxy.target = l.Addr()
	proxy.mu.Unlock()

	if err := reg.EnableDelivery(ctx, l.Ref()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-batchDone:
	case <-ctx.Done():
		t.Fatal("the batch was never handed to the target")
	}
	mu.Lock()
	defer mu.Unlock()
	if stopErr != nil {
		t.Fatalf("called inside the handler: %v", stopErr)
	}
	if len(handed) != 1 || handed[0] != 1 {
		t.Fatalf("the old target was handed %v; want only event 1, handed before the call", handed)
	}
	if proxy.resetsHeld() == 0 {
		t.Fatal("the mailbox never cancelled its batch: the test did not exercise a batch in flight")
	}
}

// A Pull whose context ends ends with nil, as its doc says — also at the
// deadline itself, when the server may end the stream before the
// client's own deadline timer has fired (gRPC then reports
// DEADLINE_EXCEEDED with the context not yet done). Before the fix, a few
// in a hundred pulls with short deadlines ended with that error.
func TestPullEndsWithNilWhenTheContextEnds(t *testing.T) {
	t.Parallel()
	srv := servertest.Start(t, servertest.Config(t))
	c := servertest.Dial(t, srv.Addr())
	ctx, cancel := context.WithTimeout(t.Context(), servertest.Timeout)
	defer cancel()
	reg, err := c.Mailbox().Register(ctx, djinn.Any)
	if err != nil {
		t.Fatal(err)
	}
	src := djinn.Ref{Endpoint: "127.0.0.1:1", Service: djinn.NewID(), Object: djinn.NewID()}
	if err := client.Notify(ctx, c, reg.Listener, &client.RemoteEvent{Source: src, ID: 1, Seq: 1}); err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		pctx, pcancel := context.WithTimeout(ctx, time.Duration(1+i%5)*time.Millisecond)
		for _, err := range reg.Pull(pctx, 0) {
			if err != nil {
				t.Fatalf("pull %d: the sequence ended with %v once its context ended; want nil", i, err)
			}
		}
		pcancel()
	}
}

// Push and pull are exclusive (River's MailboxPullRegistration), through
// the client: EnableDelivery ends a Pull with djinn.ErrInvalidIterator and
// a message that says what to do; a Pull disables delivery.
func TestMailboxPullAndPushAreExclusive(t *testing.T) {
	t.Parallel()
	srv := servertest.Start(t, servertest.Config(t))
	c := servertest.Dial(t, srv.Addr())
	ctx, cancel := context.WithTimeout(t.Context(), servertest.Timeout)
	defer cancel()
	reg, err := c.Mailbox().Register(ctx, djinn.Any)
	if err != nil {
		t.Fatal(err)
	}
	src := djinn.Ref{Endpoint: "127.0.0.1:1", Service: djinn.NewID(), Object: djinn.NewID()}
	notify := func(seq int64) {
		t.Helper()
		if err := client.Notify(ctx, c, reg.Listener, &client.RemoteEvent{Source: src, ID: 1, Seq: seq}); err != nil {
			t.Fatal(err)
		}
	}
	got := make(chan int64, 10)
	l, err := client.Listen(ctx, "127.0.0.1:0", func(_ context.Context, ev *client.RemoteEvent) error {
		got <- ev.Seq
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()

	t.Run("pull then enableDelivery: the pull ends with invalid iterator", func(t *testing.T) {
		notify(1)
		var pullErr error
		for se, err := range reg.Pull(ctx, 0) {
			if err != nil {
				pullErr = err
				break
			}
			if se.Event.Seq == 1 {
				if err := reg.EnableDelivery(ctx, l.Ref()); err != nil {
					t.Fatal(err)
				}
			}
		}
		if !errors.Is(pullErr, djinn.ErrInvalidIterator) || !strings.Contains(pullErr.Error(), "pull again") {
			t.Fatalf("pull after enable ended with %v; want invalid iterator telling what to do", pullErr)
		}
		if seq := <-got; seq != 1 {
			t.Fatalf("target got %d, want the unacknowledged event 1", seq)
		}
	})
	t.Run("enableDelivery then pull: delivery is disabled", func(t *testing.T) {
		pctx, pcancel := context.WithCancel(ctx)
		pulled, done := make(chan int64, 10), make(chan error, 1)
		go func() {
			for se, err := range reg.Pull(pctx, 0) {
				if err != nil {
					done <- err
					return
				}
				pulled <- se.Event.Seq
			}
			done <- nil
		}()
		servertest.Eventually(t, "the pull to disable delivery", func() bool {
			r, err := c.Mailbox().Registration(ctx, reg.ID)
			return err == nil && r.Target.IsZero()
		})
		notify(2)
		for seq := range pulled {
			if seq == 2 {
				break
			}
		}
		pcancel()
		if err := <-done; err != nil {
			t.Fatalf("pull ended with %v", err)
		}
		select {
		case seq := <-got:
			t.Fatalf("the target got %d after the pull began", seq)
		default:
		}
	})
}
