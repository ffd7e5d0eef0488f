package client_test

import (
	"context"
	"errors"
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
