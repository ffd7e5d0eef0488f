package client_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/internal/server/servertest"
)

// These tests use the client the way a careless program would: nil options,
// calls after Close, arguments that break the rules. Each must end in a
// clear error of the documented kind, never a panic or a hang.

func ignoreEvents(context.Context, *client.RemoteEvent) error { return nil }

// TestNilOptionsAreIgnored: an option left nil (chosen at run time, say) is
// no option, for every constructor that takes options.
func TestNilOptionsAreIgnored(t *testing.T) {
	srv := servertest.Start(t, servertest.Config(t))
	ctx := t.Context()
	c, err := client.Dial(ctx, srv.Addr(), nil, client.WithDialOptions(nil))
	if err != nil {
		t.Fatalf("Dial with nil options: %v", err)
	}
	defer c.Close()
	if err := c.Ready(ctx); err != nil {
		t.Fatalf("Ready: %v", err)
	}
	ln, err := client.Listen(ctx, "127.0.0.1:0", ignoreEvents, nil, client.WithServerOptions(nil))
	if err != nil {
		t.Fatalf("Listen with nil options: %v", err)
	}
	defer ln.Close()
	r, err := client.NewRenewer(c, nil)
	if err != nil {
		t.Fatalf("NewRenewer with a nil option: %v", err)
	}
	defer r.Close()
	reg, err := c.Mailbox().Register(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	s, err := reg.Deliveries(ctx, nil)
	if err != nil {
		t.Fatalf("Deliveries with a nil option: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("closing the delivery stream: %v", err)
	}
	if _, err := client.Find(ctx, "x", nil); !errors.Is(err, djinn.ErrInvalidArgument) {
		t.Fatalf("Find with only a nil option: %v, want nowhere to look (invalid argument)", err)
	}
	client.NewPool(nil).Close()
}

// TestCallsAfterCloseSayClosed: a call on a closed Client fails Unavailable
// saying the client was closed, not as if the caller's context had ended.
func TestCallsAfterCloseSayClosed(t *testing.T) {
	srv := servertest.Start(t, servertest.Config(t))
	ctx := t.Context()
	c, err := client.Dial(ctx, srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close: %v, want nil", err)
	}
	calls := map[string]func() error{
		"Ready": func() error { return c.Ready(ctx) },
		"TransactionManager": func() error {
			_, err := c.TransactionManager(ctx)
			return err
		},
		"Mailbox.Register": func() error {
			_, err := c.Mailbox().Register(ctx, time.Minute)
			return err
		},
		"Members": func() error {
			_, err := c.Members(ctx, false)
			return err
		},
	}
	for name, call := range calls {
		err := call()
		if !errors.Is(err, djinn.ErrUnavailable) || errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "closed") {
			t.Errorf("%s after Close: %v, want unavailable saying the client was closed (and not context.Canceled)", name, err)
		}
	}
}

// TestStreamsEndWhenClientCloses: Pull and Receive retry a broken stream
// while the cluster may come back, but a closed Client never does: they end
// with its error instead of retrying until their context ends.
func TestStreamsEndWhenClientCloses(t *testing.T) {
	srv := servertest.Start(t, servertest.Config(t))
	ctx, cancel := context.WithTimeout(t.Context(), servertest.Timeout)
	defer cancel()
	c, err := client.Dial(ctx, srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	reg, err := c.Mailbox().Register(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	var pulled error
	for _, err := range reg.Pull(ctx, 0) {
		pulled = err
		break
	}
	received := reg.Receive(ctx, func(context.Context, client.StoredEvent) error { return nil })
	for name, err := range map[string]error{"Pull": pulled, "Receive": received} {
		if !errors.Is(err, djinn.ErrUnavailable) || !strings.Contains(fmt.Sprint(err), "closed") {
			t.Errorf("%s on a closed client: %v (context: %v), want unavailable saying the client was closed", name, err, ctx.Err())
		}
	}
}

// TestListenBadAddress: an address Listen cannot listen on is the caller's
// mistake, named in an invalid-argument error; a port in use is not.
func TestListenBadAddress(t *testing.T) {
	taken, err := client.Listen(t.Context(), "127.0.0.1:0", ignoreEvents)
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	for _, tc := range []struct {
		addr string
		kind error
	}{
		{"nope", djinn.ErrInvalidArgument},
		{"", djinn.ErrInvalidArgument},
		{"127.0.0.1:", djinn.ErrInvalidArgument},
		{"127.0.0.1:99999", djinn.ErrInvalidArgument},
		{"127.0.0.1:notaport", djinn.ErrInvalidArgument},
		{taken.Addr(), djinn.ErrUnavailable},
	} {
		ln, err := client.Listen(t.Context(), tc.addr, ignoreEvents)
		if err == nil {
			ln.Close()
			t.Errorf("Listen(%q) succeeded", tc.addr)
			continue
		}
		if !errors.Is(err, tc.kind) || !strings.Contains(err.Error(), tc.addr) {
			t.Errorf("Listen(%q): %v (kind %s), want kind %s naming the address", tc.addr, err, djinn.KindOf(err), tc.kind)
		}
	}
}

// TestReceiveNilHandler: Receive without a handler is refused at once,
// before the first event would call it.
func TestReceiveNilHandler(t *testing.T) {
	srv := servertest.Start(t, servertest.Config(t))
	c := servertest.Dial(t, srv.Addr())
	reg, err := c.Mailbox().Register(t.Context(), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), servertest.Timeout)
	defer cancel()
	if err := reg.Receive(ctx, nil); !errors.Is(err, djinn.ErrInvalidArgument) {
		t.Fatalf("Receive(nil): %v, want invalid argument", err)
	}
}
