package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/djinn-go/djinn/client"
)

// defaultWaitTimeout is how long a service command waits, unless
// --wait-timeout says otherwise, for a server that answers but is still
// starting (its cluster has no service id yet, or its leader's services do
// not serve yet) to be ready. Ctrl-C ends the wait sooner.
const defaultWaitTimeout = 30 * time.Second

// whenReady finds a service of a server through find, asking again while
// the server is still starting: for at most limit (--wait-timeout; 0: ask
// once), saying once on w what it waits for. When the time runs out, the
// error names the server and how to see what it waits for.
func whenReady[T any](ctx context.Context, w io.Writer, limit time.Duration, find func(context.Context) (T, error)) (T, error) {
	say := func(err error) {
		fmt.Fprintf(w, "djinn: waiting up to %s (--wait-timeout) for the server to be ready: %v\n", limit, err)
	}
	v, err := client.WaitReady(ctx, limit, say, find)
	return v, notReadyHint(err)
}

// notReadyHint adds to an error of a server still starting how to see
// what it waits for.
func notReadyHint(err error) error {
	addr, ok := client.NotReadyServer(err)
	if !ok {
		return err
	}
	return fmt.Errorf("%w; djinn status --server %s says what it waits for (a server started with --bootstrap=false waits until djinn member add, at a member of its cluster, adds it)", err, addr)
}

// dialReady dials --server and waits, as whenReady does, until it is
// ready: for the services only a serving leader answers (the mailbox, the
// renewal service, the landlord), whose commands would otherwise be
// refused in a fresh server's first second.
func (g *globals) dialReady(cmd *cobra.Command) (*client.Client, error) {
	ctx := cmd.Context()
	c, err := g.dial(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := whenReady(ctx, cmd.ErrOrStderr(), g.waitTimeout, func(ctx context.Context) (struct{}, error) { return struct{}{}, c.Ready(ctx) }); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// serving finds a service of c's server once the server is ready, from
// one status per try: for a service only a serving leader answers, whose
// reference a server's status has a moment before its leader serves.
func serving[T any](c *client.Client, find func(*client.Status) (T, error)) func(context.Context) (T, error) {
	return func(ctx context.Context) (T, error) {
		st, err := c.Status(ctx)
		if err == nil {
			err = st.Ready()
		}
		if err != nil {
			var zero T
			return zero, err
		}
		return find(st)
	}
}
