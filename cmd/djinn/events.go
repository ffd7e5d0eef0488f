package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// The remote event commands: host a listener, send an event.

type eventView struct {
	Index    *string `json:"index"` // a mailbox's index of a stored event; null for an event delivered
	Source   string  `json:"source"`
	ID       string  `json:"event_id"`
	Seq      string  `json:"sequence"`
	Handback string  `json:"handback"`
	// Discovery is set for a lookup discovery service's event.
	Discovery *discoveryEventView `json:"discovery,omitempty"`
}

// discoveryEventView is a lookup discovery service's event (LD.4.2) as
// events listen prints it.
type discoveryEventView struct {
	Discarded  bool            `json:"discarded"`
	Registrars []registrarView `json:"registrars"`
}

func viewDiscoveryEvent(ev *client.RemoteEvent) *discoveryEventView {
	if ev.Payload == nil || !ev.Payload.MessageIs(&djinnpb.RemoteDiscoveryEvent{}) {
		return nil
	}
	de, err := client.DiscoveryEventFrom(ev)
	if err != nil {
		return nil
	}
	return &discoveryEventView{Discarded: de.Discarded, Registrars: viewDiscovered(de.Registrars)}
}

// printEvent prints one event on a line; index is its mailbox index, 0
// for an event delivered.
func printEvent(g *globals, w io.Writer, index uint64, ev *client.RemoteEvent) {
	v := eventView{Source: ev.Source.String(), ID: jsonInt(ev.ID), Seq: jsonInt(ev.Seq), Handback: string(ev.Handback), Discovery: viewDiscoveryEvent(ev)}
	if index > 0 {
		i := jsonUint(index)
		v.Index = &i
	}
	g.printLine(w, v, func(w io.Writer) {
		if index > 0 {
			fmt.Fprintf(w, "#%d ", index)
		}
		fmt.Fprintf(w, "source=%s id=%s seq=%s handback=%q", v.Source, v.ID, v.Seq, v.Handback)
		if d := v.Discovery; d != nil {
			what := "discovered"
			if d.Discarded {
				what = "discarded"
			}
			for _, r := range d.Registrars {
				fmt.Fprintf(w, " %s=%s(%s groups=%s)", what, r.ServiceID, r.Endpoint, discoveryGroupsText(r.Groups))
			}
		}
		fmt.Fprintln(w)
	})
}

func (g *globals) eventsCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "events", Short: "Host a remote event listener; send an event"}
	cmd.AddCommand(g.eventsListenCmd(), g.eventsSendCmd())
	return cmd
}

func (g *globals) eventsListenCmd() *cobra.Command {
	var addr, runFor string
	cmd := &cobra.Command{
		Use:   "listen [--listen ADDR] [--for D]",
		Short: "Host a listener: print its reference, then one line per event received, until interrupted or --for passes",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			d, err := parseFor(runFor)
			if err != nil {
				return err
			}
			ctx, cancel := withTimeout(cmd.Context(), d)
			defer cancel()
			w := cmd.OutOrStdout()
			l, err := client.Listen(ctx, addr, func(_ context.Context, ev *client.RemoteEvent) error {
				printEvent(g, w, 0, ev)
				return nil
			})
			if err != nil {
				return listenError(addr, err)
			}
			defer l.Close()
			g.printLine(w, map[string]string{"listener": l.Ref().String()}, func(w io.Writer) { fmt.Fprintln(w, "listener", l.Ref()) })
			select {
			case <-ctx.Done():
			case <-l.Done():
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&addr, "listen", "127.0.0.1:0", "address to serve the listener on (port 0: any free port); event senders must reach it")
	forFlag(cmd, &runFor, "listen")
	return cmd
}

// listenError is the error of --listen ADDR that could not be listened on:
// a usage error when ADDR is not an address.
func listenError(addr string, err error) error {
	err = fmt.Errorf("--listen %s: %w", addr, err)
	if djinn.KindOf(err) == djinn.InvalidArgument {
		return usageError{err}
	}
	return err
}

// forFlag registers --for D: how long to run.
func forFlag(cmd *cobra.Command, d *string, what string) {
	cmd.Flags().StringVar(d, "for", "forever", "how long to "+what+": a positive Go duration, or forever (until interrupted)")
}

// parseFor parses a --for value; 0 is forever.
func parseFor(s string) (time.Duration, error) {
	d, err := djinn.ParseDuration(s)
	if err != nil || d == djinn.Any || d == 0 || (d < 0 && d != djinn.Forever) {
		return 0, usageError{fmt.Errorf("--for %q: want a positive Go duration, or forever", s)}
	}
	if d == djinn.Forever {
		return 0, nil
	}
	return d, nil
}

func (g *globals) eventsSendCmd() *cobra.Command {
	var (
		listener, source, handback string
		id, seq                    int64
	)
	cmd := &cobra.Command{
		Use:   "send --listener REF --source REF --id N --seq N [--handback TEXT]",
		Short: "Send one event to a listener",
		Long: `Send one event to the listener --listener names, at the endpoint its reference names: no server
is needed. A djinn mailbox's listener is reached through its cluster: at any member, the leader
first, so a member down (the one the reference names included) is no matter; when the member
the reference names cannot be asked for its cluster's members, a member --server names is.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			target, err := parseRef("listener", listener)
			if err != nil {
				return err
			}
			src, err := parseRef("source", source)
			if err != nil {
				return err
			}
			// The listener is reached where its reference points, or
			// through its cluster: no server is needed.
			p, err := g.pool()
			if err != nil {
				return err
			}
			defer p.Close()
			g.followListener(cmd.Context(), p, target)
			ev := &client.RemoteEvent{Source: src, ID: id, Seq: seq, Handback: []byte(handback)}
			if err := client.Notify(cmd.Context(), p, target, ev); err != nil {
				if djinn.KindOf(err) == djinn.Unavailable {
					return fmt.Errorf("listener %s cannot be reached: %s (%w)", target, unreachedHint(p, target), err)
				}
				return err
			}
			return g.print(cmd.OutOrStdout(), map[string]any{"listener": target.String(), "sent": true}, func(w io.Writer) { fmt.Fprintln(w, "sent") })
		},
	}
	f := cmd.Flags()
	f.StringVar(&listener, "listener", "", "the listener's reference (a mailbox registration's listener, or djinn events listen's)")
	alias(f, "to", "listener")
	f.StringVar(&source, "source", "", "the event source's reference")
	f.Int64Var(&id, "id", 0, "event id")
	f.Int64Var(&seq, "seq", 0, "sequence number")
	f.StringVar(&handback, "handback", "", "handback bytes, as text")
	return cmd
}

// followListener makes p follow the djinn cluster whose service target
// names (a mailbox's listener), so that the event reaches any member up,
// not only the one target's endpoint names. That member is asked for the
// cluster's members; when it cannot answer (it is down), the --server
// endpoints are, as a member of the cluster may be among them. Neither is
// needed: without an answer naming target's service, the event goes to
// target's endpoint.
func (g *globals) followListener(ctx context.Context, p *client.Pool, target djinn.Ref) {
	if target.Service.IsZero() || p.Learn(ctx, target) == nil {
		return // a listener of no cluster (djinn events listen's), or one followed
	}
	eps, err := client.SplitEndpoints(g.server)
	if err != nil {
		return // --server is not needed here: a bad one is not used
	}
	for _, ep := range eps {
		at := target
		at.Endpoint = ep
		if p.Learn(ctx, at) == nil && p.Follows(target.Service) {
			return
		}
	}
}

// unreachedHint says what to check when target's listener could not be
// reached.
func unreachedHint(p *client.Pool, target djinn.Ref) string {
	if !target.Service.IsZero() && !p.Follows(target.Service) {
		return "is it still running? For a djinn mailbox's listener, give --server a member of its cluster that is up"
	}
	return "is it still running?"
}
