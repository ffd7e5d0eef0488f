package main

import (
	"fmt"
	"io"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
)

type registrationView struct {
	ID       string     `json:"registration"`
	Lease    leaseView  `json:"lease"`
	Listener string     `json:"listener"`
	Target   string     `json:"target,omitempty"`
	Stored   int64      `json:"stored_events"`
	Unknown  []eventKey `json:"unknown_events,omitempty"`
}

type eventKey struct {
	Source string `json:"source"`
	ID     int64  `json:"event_id"`
}

func viewRegistration(r *client.MailboxRegistration) registrationView {
	v := registrationView{ID: r.ID.String(), Lease: viewLease(r.Lease), Listener: r.Listener.String(), Stored: r.Stored}
	if !r.Target.IsZero() {
		v.Target = r.Target.String()
	}
	for _, k := range r.Unknown {
		v.Unknown = append(v.Unknown, eventKey{k.Source.String(), k.ID})
	}
	return v
}

func printRegistration(w io.Writer, v registrationView) {
	fmt.Fprintf(w, "registration %s\nlistener     %s\nlease        %s\nexpires      %s (in %s)\n", v.ID, v.Listener, v.Lease.Token, v.Lease.Expiration, v.Lease.Remaining)
	if v.Target != "" {
		fmt.Fprintf(w, "target       %s\n", v.Target)
	} else {
		fmt.Fprintf(w, "target       (delivery disabled)\n")
	}
	fmt.Fprintf(w, "stored       %d\n", v.Stored)
	for _, k := range v.Unknown {
		fmt.Fprintf(w, "unknown      %s id %d\n", k.Source, k.ID)
	}
}

func (g *globals) mailboxCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "mailbox", Short: "Event mailbox registrations"}
	cmd.AddCommand(g.mailboxRegisterCmd(), g.mailboxShowCmd(), g.mailboxEnableCmd(), g.mailboxDisableCmd(), g.mailboxPullCmd(), g.mailboxAckCmd())
	return cmd
}

func (g *globals) mailboxRegisterCmd() *cobra.Command {
	var d string
	cmd := &cobra.Command{
		Use:   "register --duration D",
		Short: "Create a registration; prints its id, lease token and listener reference",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dur, err := djinn.ParseDuration(d)
			if err != nil {
				return err
			}
			c, err := g.dial(cmd.Context())
			if err != nil {
				return err
			}
			defer c.Close()
			r, err := c.Mailbox().Register(cmd.Context(), dur)
			if err != nil {
				return err
			}
			v := viewRegistration(r)
			return g.print(cmd.OutOrStdout(), v, func(w io.Writer) { printRegistration(w, v) })
		},
	}
	cmd.Flags().StringVar(&d, "duration", "any", "lease duration: a positive Go duration or any")
	return cmd
}

// withRegistration builds a command on registration REG: it parses REG,
// dials, reads the registration and calls run with the arguments after
// REG.
func (g *globals) withRegistration(use, short string, run func(cmd *cobra.Command, r *client.MailboxRegistration, args []string) error) *cobra.Command {
	return &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := djinn.ParseID(args[0])
			if err != nil {
				return fmt.Errorf("registration: %w", err)
			}
			c, err := g.dial(cmd.Context())
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
	return g.withRegistration("show REG", "Show a registration", func(cmd *cobra.Command, r *client.MailboxRegistration, _ []string) error {
		v := viewRegistration(r)
		return g.print(cmd.OutOrStdout(), v, func(w io.Writer) { printRegistration(w, v) })
	})
}

func (g *globals) mailboxEnableCmd() *cobra.Command {
	var target string
	cmd := g.withRegistration("enable REG --target LISTENER", "Deliver stored and future events to a listener", func(cmd *cobra.Command, r *client.MailboxRegistration, _ []string) error {
		t, err := djinn.ParseRef(target)
		if err != nil {
			return fmt.Errorf("--target: %w", err)
		}
		if err := r.EnableDelivery(cmd.Context(), t); err != nil {
			return err
		}
		return g.print(cmd.OutOrStdout(), map[string]string{"target": t.String()}, func(w io.Writer) { fmt.Fprintln(w, "delivering to", t) })
	})
	cmd.Flags().StringVar(&target, "target", "", "listener reference (djinn://host:port/SERVICE/OBJECT)")
	cmd.PreRunE = func(*cobra.Command, []string) error {
		if _, err := djinn.ParseRef(target); err != nil {
			return fmt.Errorf("--target: %w", err)
		}
		return nil
	}
	_ = cmd.MarkFlagRequired("target")
	return cmd
}

func (g *globals) mailboxDisableCmd() *cobra.Command {
	return g.withRegistration("disable REG", "Stop delivery; events are stored meanwhile", func(cmd *cobra.Command, r *client.MailboxRegistration, _ []string) error {
		if err := r.DisableDelivery(cmd.Context()); err != nil {
			return err
		}
		return g.print(cmd.OutOrStdout(), map[string]bool{"disabled": true}, func(w io.Writer) { fmt.Fprintln(w, "delivery disabled") })
	})
}

func (g *globals) mailboxPullCmd() *cobra.Command {
	var (
		after  uint64
		follow bool
		ack    bool
	)
	cmd := g.withRegistration("pull REG", "Print stored events (one line each); --follow waits for more, --ack forgets what was printed", func(cmd *cobra.Command, r *client.MailboxRegistration, _ []string) error {
		ctx := cmd.Context()
		remaining := r.Stored
		var last uint64
		w := cmd.OutOrStdout()
		if !follow && remaining == 0 {
			return nil
		}
		for se, err := range r.Pull(ctx, after) {
			if err != nil {
				return err
			}
			printEvent(g, w, se.Index, se.Event)
			last = se.Index
			remaining--
			if !follow && remaining <= 0 {
				break
			}
		}
		if ack && last > 0 {
			return r.Ack(ctx, last)
		}
		return nil
	})
	cmd.Flags().Uint64Var(&after, "after", 0, "resume after this index")
	cmd.Flags().BoolVar(&follow, "follow", false, "keep waiting for new events")
	cmd.Flags().BoolVar(&ack, "ack", false, "acknowledge (forget) the printed events")
	return cmd
}

func (g *globals) mailboxAckCmd() *cobra.Command {
	return g.withRegistration("ack REG INDEX", "Forget stored events through INDEX", func(cmd *cobra.Command, r *client.MailboxRegistration, args []string) error {
		if len(args) != 1 {
			return fmt.Errorf("ack takes REG and INDEX")
		}
		i, err := strconv.ParseUint(args[0], 10, 64)
		if err != nil {
			return fmt.Errorf("index %q: not a number", args[0])
		}
		return r.Ack(cmd.Context(), i)
	})
}
