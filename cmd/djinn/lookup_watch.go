package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
)

// lookup watch: service events of the items matching a template, one line
// each.

// lookupEventView is a service event as watch prints it.
type lookupEventView struct {
	Seq        string          `json:"sequence"`
	Transition string          `json:"transition"`
	ID         string          `json:"id"`
	Item       *lookupItemView `json:"item"` // null: the item went
}

func printLookupEvent(g *globals, w io.Writer, se *client.ServiceEvent) {
	v := lookupEventView{Seq: jsonInt(se.Seq), Transition: se.Transition.String(), ID: se.ServiceID.String()}
	if se.Item != nil {
		iv := viewLookupItem(*se.Item)
		v.Item = &iv
	}
	g.printLine(w, v, func(w io.Writer) {
		if v.Item == nil {
			fmt.Fprintf(w, "seq=%s %s %s (removed)\n", v.Seq, v.Transition, v.ID)
			return
		}
		fmt.Fprintf(w, "seq=%s %s %s\n", v.Seq, v.Transition, lookupItemText(*v.Item))
	})
}

func (g *globals) lookupWatchCmd() *cobra.Command {
	var (
		f                             lookupFlags
		transitions, addr, runFor, hb string
	)
	cmd := &cobra.Command{
		Use:   "watch [--type T]… [--attr Type.field=value]… [--id ID] [--transitions LIST] [--listen ADDR] [--for D]",
		Short: "Print one line per service event: services matching a template come, go and change",
		Long: "Host a listener (as `djinn events listen` does), register it with the lookup service for the " +
			"items matching the template, print what was registered, then one line per service event until " +
			"interrupted or --for passes; the registration's lease is renewed meanwhile and cancelled at the end.\n\n" +
			"Transitions: match-nomatch (an item stopped matching, or went: printed as (removed)), nomatch-match (one " +
			"started matching, or came), match-match (a matching item changed).\n\n--attr: " + attrSyntax + ".",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			tmpl, err := f.template()
			if err != nil {
				return err
			}
			tr, err := client.ParseTransitions(transitions)
			if err != nil {
				return usageError{fmt.Errorf("--transitions: %w", err)}
			}
			d, err := parseFor(runFor)
			if err != nil {
				return err
			}
			return g.withRegistrar(cmd, func(ctx context.Context, c *client.Client, r *client.Registrar) error {
				return runLookupWatch(ctx, g, cmd.OutOrStdout(), cmd.ErrOrStderr(), c, r, tmpl, tr, addr, []byte(hb), d)
			})
		},
	}
	f.register(cmd, "match the")
	cmd.Flags().StringVar(&transitions, "transitions", "match-nomatch,nomatch-match,match-match", "the transitions to report, comma-separated (or all)")
	_ = cmd.RegisterFlagCompletionFunc("transitions", completeWords("all", "match-nomatch", "nomatch-match", "match-match"))
	cmd.Flags().StringVar(&addr, "listen", "127.0.0.1:0", "address to serve the listener on (the registrar must reach it)")
	forFlag(cmd, &runFor, "watch")
	alias(cmd.Flags(), "duration", "for")
	cmd.Flags().StringVar(&hb, "handback", "", "handback bytes the events carry, as text")
	return cmd
}

// runLookupWatch hosts the listener, registers it and prints events until ctx ends,
// d passes or the registration's lease cannot be renewed.
func runLookupWatch(ctx context.Context, g *globals, w, errw io.Writer, c *client.Client, r *client.Registrar, tmpl client.ServiceTemplate,
	tr client.Transition, addr string, handback []byte, d time.Duration) error {
	ctx, cancel := withTimeout(ctx, d)
	defer cancel()
	l, err := client.Listen(ctx, addr, func(_ context.Context, ev *client.RemoteEvent) error {
		se, err := client.ServiceEventFrom(ev)
		if err != nil {
			printMu.Lock()
			fmt.Fprintln(errw, "djinn: ignored an event:", err)
			printMu.Unlock()
			return nil
		}
		printLookupEvent(g, w, se)
		return nil
	})
	if err != nil {
		return listenError(addr, err)
	}
	defer l.Close()
	failed := make(chan error, 1)
	renewer, err := client.NewRenewer(c, client.WithFailureHandler(func(f client.Failure) {
		select {
		case failed <- f.Err:
		default:
		}
	}))
	if err != nil {
		return err
	}
	defer renewer.Close()
	reg, err := r.Notify(ctx, tmpl, tr, l.Ref(), handback, djinn.Any)
	if err != nil {
		return err
	}
	if err := renewer.Renew(reg.Lease, djinn.EndOfTime); err != nil {
		return err
	}
	printWatching(g, w, reg, l.Ref(), tr)
	end := waitWatch(ctx, l, failed)
	// Best effort: a lease left behind ends by itself.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = renewer.Cancel(cctx, reg.Lease)
	return end
}

// watchView is what a watch registered.
type watchView struct {
	EventID     string    `json:"event_id"`
	Source      string    `json:"source"`
	Seq         string    `json:"sequence"`
	Listener    string    `json:"listener"`
	Transitions string    `json:"transitions"`
	Lease       leaseView `json:"lease"`
}

// printWatching prints what a watch registered.
func printWatching(g *globals, w io.Writer, reg *client.EventRegistration, listener djinn.Ref, tr client.Transition) {
	v := watchView{EventID: jsonInt(reg.ID), Source: reg.Source.String(), Seq: jsonInt(reg.Seq), Listener: listener.String(),
		Transitions: tr.String(), Lease: viewLease(reg.Lease)}
	g.printLine(w, v, func(w io.Writer) {
		fmt.Fprintf(w, "watching %s: event id %s, listener %s, lease %s\n", tr, v.EventID, listener, v.Lease.Name)
	})
}

// waitWatch waits until the watch ends: ctx ends (nil), the listener
// stops, or the registration's lease cannot be renewed.
func waitWatch(ctx context.Context, l *client.Listener, failed <-chan error) error {
	select {
	case <-ctx.Done():
		return nil
	case <-l.Done():
		if ctx.Err() == nil {
			return errors.New("the listener stopped")
		}
		return nil
	case err := <-failed:
		return fmt.Errorf("the watch's lease could not be renewed: %w", err)
	}
}
