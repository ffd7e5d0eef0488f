package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
)

// The event mailbox commands. A registration is named by its id (REG),
// which register prints; its lease by the lease's short name.

type registrationView struct {
	ID       string     `json:"registration"`
	Lease    leaseView  `json:"lease"`
	Listener string     `json:"listener"`
	Target   *string    `json:"target"` // null: delivery disabled
	Stored   int64      `json:"stored_events"`
	Unknown  []eventKey `json:"unknown_events"`
}

type eventKey struct {
	Source string `json:"source"`
	ID     string `json:"event_id"`
}

func viewRegistration(r *client.MailboxRegistration) registrationView {
	v := registrationView{ID: r.ID.String(), Lease: viewLease(r.Lease), Listener: r.Listener.String(), Stored: r.Stored, Unknown: []eventKey{}}
	if !r.Target.IsZero() {
		t := r.Target.String()
		v.Target = &t
	}
	for _, k := range r.Unknown {
		v.Unknown = append(v.Unknown, eventKey{k.Source.String(), jsonInt(k.ID)})
	}
	return v
}

func printRegistration(w io.Writer, v registrationView) {
	fmt.Fprintf(w, "registration %s\nlistener     %s\nlease        %s\nexpires      %s\ntoken        %s\n",
		v.ID, v.Listener, v.Lease.Name, v.Lease.expiresText(), v.Lease.Token)
	if v.Target != nil {
		fmt.Fprintf(w, "target       %s\n", *v.Target)
	} else {
		fmt.Fprintf(w, "target       (delivery disabled)\n")
	}
	fmt.Fprintf(w, "stored       %d\n", v.Stored)
	for _, k := range v.Unknown {
		fmt.Fprintf(w, "unknown      %s id %s\n", k.Source, k.ID)
	}
}

func (g *globals) mailboxCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "mailbox", Short: "Event mailbox registrations: events stored for you, delivered or pulled"}
	cmd.AddCommand(g.mailboxRegisterCmd(), g.mailboxShowCmd(), g.mailboxEnableCmd(), g.mailboxDisableCmd(), g.mailboxPullCmd(), g.mailboxReceiveCmd(), g.mailboxAckCmd())
	return cmd
}

func (g *globals) mailboxRegisterCmd() *cobra.Command {
	var d string
	cmd := &cobra.Command{
		Use:   "register [--lease D]",
		Short: "Create a registration; prints its id REG, its lease and its listener reference",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dur, err := parseLease(d)
			if err != nil {
				return err
			}
			c, err := g.dialReady(cmd)
			if err != nil {
				return err
			}
			defer c.Close()
			r, err := c.Mailbox().Register(cmd.Context(), dur)
			if err != nil {
				return err
			}
			g.noticeClamp(cmd, "registration's lease", "djinn serve --mailbox-max-lease", dur, r.Lease)
			v := viewRegistration(r)
			return g.print(cmd.OutOrStdout(), v, func(w io.Writer) { printRegistration(w, v) })
		},
	}
	leaseFlag(cmd, &d, "the registration")
	return cmd
}

// withRegistration builds a command on registration REG: it parses REG,
// dials, reads the registration and calls run with the arguments after
// REG.
func (g *globals) withRegistration(use, short string, args cobra.PositionalArgs, run func(cmd *cobra.Command, r *client.MailboxRegistration, args []string) error) *cobra.Command {
	return &cobra.Command{
		Use:               use,
		Short:             short,
		Args:              args,
		ValidArgsFunction: g.completeIDs("mailbox"),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := djinn.ParseID(args[0])
			if err != nil {
				return usageError{fmt.Errorf("REG: %w", err)}
			}
			c, err := g.dialReady(cmd)
			if err != nil {
				return err
			}
			defer c.Close()
			r, err := c.Mailbox().Registration(cmd.Context(), id)
			if err != nil {
				return err
			}
			return run(cmd, r, args[1:])
		},
	}
}

func (g *globals) mailboxShowCmd() *cobra.Command {
	return g.withRegistration("show REG", "Show a registration: its lease, listener, delivery target and stored events", cobra.ExactArgs(1),
		func(cmd *cobra.Command, r *client.MailboxRegistration, _ []string) error {
			v := viewRegistration(r)
			return g.print(cmd.OutOrStdout(), v, func(w io.Writer) { printRegistration(w, v) })
		})
}

func (g *globals) mailboxEnableCmd() *cobra.Command {
	var listener string
	cmd := g.withRegistration("enable REG --listener REF", "Deliver stored and future events to a listener, in order", cobra.ExactArgs(1),
		func(cmd *cobra.Command, r *client.MailboxRegistration, _ []string) error {
			t, err := parseRef("listener", listener)
			if err != nil {
				return err
			}
			if err := r.EnableDelivery(cmd.Context(), t); err != nil {
				return err
			}
			return g.print(cmd.OutOrStdout(), map[string]string{"registration": r.ID.String(), "target": t.String()},
				func(w io.Writer) { fmt.Fprintln(w, "delivering to", t) })
		})
	cmd.Flags().StringVar(&listener, "listener", "", "the listener's reference (djinn://host:port/SERVICE/OBJECT; djinn events listen prints one)")
	alias(cmd.Flags(), "target", "listener")
	cmd.PreRunE = func(*cobra.Command, []string) error {
		_, err := parseRef("listener", listener)
		return err
	}
	return cmd
}

func (g *globals) mailboxDisableCmd() *cobra.Command {
	return g.withRegistration("disable REG", "Stop delivery; events are stored meanwhile", cobra.ExactArgs(1),
		func(cmd *cobra.Command, r *client.MailboxRegistration, _ []string) error {
			if err := r.DisableDelivery(cmd.Context()); err != nil {
				return err
			}
			return g.print(cmd.OutOrStdout(), map[string]any{"registration": r.ID.String(), "disabled": true},
				func(w io.Writer) { fmt.Fprintln(w, "delivery disabled") })
		})
}

func (g *globals) mailboxPullCmd() *cobra.Command {
	var (
		after  uint64
		follow bool
		ack    bool
	)
	cmd := g.withRegistration("pull REG [--after INDEX] [--follow] [--ack]", "Print stored events (one line each); --follow waits for more, --ack forgets what was printed", cobra.ExactArgs(1),
		func(cmd *cobra.Command, r *client.MailboxRegistration, _ []string) error {
			ctx := cmd.Context()
			remaining := r.Stored
			if !follow && remaining == 0 {
				return nil
			}
			var a *acker
			if ack {
				a = startAcker(ctx, r)
			}
			var pullErr error
			for se, err := range r.Pull(ctx, after) {
				if err != nil {
					pullErr = err
					break
				}
				printEvent(g, cmd.OutOrStdout(), se.Index, se.Event)
				a.printed(se.Index)
				remaining--
				if !follow && remaining <= 0 {
					break
				}
			}
			return errors.Join(pullErr, a.finish())
		})
	cmd.Flags().Uint64Var(&after, "after", 0, "resume after this index")
	cmd.Flags().BoolVar(&follow, "follow", false, "keep waiting for new events")
	cmd.Flags().BoolVar(&ack, "ack", false, "acknowledge (forget) the printed events")
	return cmd
}

func (g *globals) mailboxReceiveCmd() *cobra.Command {
	var (
		after  uint64
		window int
		count  int
	)
	cmd := g.withRegistration("receive REG [--after INDEX] [--count N]", "Print events as they are stored (one line each) over one stream, forgetting each once printed", cobra.ExactArgs(1),
		func(cmd *cobra.Command, r *client.MailboxRegistration, _ []string) error {
			n := 0
			return r.Receive(cmd.Context(), func(_ context.Context, e client.StoredEvent) error {
				printEvent(g, cmd.OutOrStdout(), e.Index, e.Event)
				if n++; count > 0 && n == count {
					return client.ErrStopReceiving
				}
				return nil
			}, client.DeliverAfter(after), client.DeliveryWindow(window))
		})
	cmd.Flags().Uint64Var(&after, "after", 0, "start after this index (the events through it count as processed, and are forgotten)")
	cmd.Flags().IntVar(&window, "window", 0, "most events sent and not yet acknowledged (default 1024)")
	cmd.Flags().IntVar(&count, "count", 0, "stop after this many events (default: until interrupted)")
	cmd.PreRunE = func(*cobra.Command, []string) error {
		if count < 0 {
			return usageError{fmt.Errorf("--count %d: want 0 (no limit) or more", count)}
		}
		if window < 0 || window > 65536 {
			return usageError{fmt.Errorf("--window %d: want between 1 and 65536 (0 for the default)", window)}
		}
		return nil
	}
	return cmd
}

func (g *globals) mailboxAckCmd() *cobra.Command {
	return g.withRegistration("ack REG INDEX", "Forget stored events through INDEX", cobra.ExactArgs(2),
		func(cmd *cobra.Command, r *client.MailboxRegistration, args []string) error {
			i, err := strconv.ParseUint(args[0], 10, 64)
			if err != nil {
				return usageError{fmt.Errorf("INDEX %q: not a number (pull prints each event's index after #)", args[0])}
			}
			if err := r.Ack(cmd.Context(), i); err != nil {
				return err
			}
			return g.print(cmd.OutOrStdout(), map[string]any{"registration": r.ID.String(), "acknowledged_through": jsonUint(i)},
				func(w io.Writer) { fmt.Fprintf(w, "forgot the events through #%d\n", i) })
		})
}

// ackTimeout bounds one acknowledgement of what pull printed.
const ackTimeout = 10 * time.Second

// acker forgets what pull --ack printed as it goes, one acknowledgement at
// a time through the last index printed, so a long follow does not fill
// the registration's store; finish acknowledges the rest. Acknowledgements
// run under a context that outlives the command's, so an interrupt (the
// way a follow ends) still forgets what was printed. A nil acker does
// nothing.
type acker struct {
	ctx  context.Context // the command's, without its cancellation
	r    *client.MailboxRegistration
	next chan uint64 // the last index printed and not yet taken
	stop chan struct{}
	done chan struct{}
	// acked and err are written by run and read once done is closed.
	acked uint64
	err   error
	last  uint64 // the last index printed
}

func startAcker(ctx context.Context, r *client.MailboxRegistration) *acker {
	a := &acker{ctx: context.WithoutCancel(ctx), r: r, next: make(chan uint64, 1),
		stop: make(chan struct{}), done: make(chan struct{})}
	go a.run()
	return a
}

// printed hands index to the acknowledging goroutine, replacing an index
// it has not taken yet. Only one goroutine calls it.
func (a *acker) printed(index uint64) {
	if a == nil {
		return
	}
	a.last = index
	select {
	case <-a.next:
	default:
	}
	a.next <- index
}

func (a *acker) run() {
	defer close(a.done)
	for {
		select {
		case <-a.stop:
			return
		case i := <-a.next:
			if a.err = a.ack(i); a.err != nil {
				return
			}
			a.acked = i
		}
	}
}

func (a *acker) ack(through uint64) error {
	ctx, cancel := context.WithTimeout(a.ctx, ackTimeout)
	defer cancel()
	if err := a.r.Ack(ctx, through); err != nil {
		return fmt.Errorf("acknowledging the events through #%d: %w (they stay stored; djinn mailbox ack forgets them)", through, err)
	}
	return nil
}

// finish stops acknowledging as it goes and acknowledges what is left.
func (a *acker) finish() error {
	if a == nil {
		return nil
	}
	close(a.stop)
	<-a.done
	if a.err != nil || a.last <= a.acked {
		return a.err
	}
	return a.ack(a.last)
}
