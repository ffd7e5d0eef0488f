package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"

	"github.com/spf13/cobra"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

type eventView struct {
	Index    uint64 `json:"index,omitempty"`
	Source   string `json:"source"`
	ID       int64  `json:"event_id"`
	Seq      int64  `json:"sequence"`
	Handback string `json:"handback"`
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
	v := &discoveryEventView{Discarded: de.Discarded, Registrars: viewDiscovered(de.Registrars)}
	return v
}

var printMu sync.Mutex

func printEvent(g *globals, w io.Writer, index uint64, ev *client.RemoteEvent) {
	v := eventView{Index: index, Source: ev.Source.String(), ID: ev.ID, Seq: ev.Seq, Handback: string(ev.Handback), Discovery: viewDiscoveryEvent(ev)}
	printMu.Lock()
	defer printMu.Unlock()
	if g.output == "json" {
		b, _ := json.Marshal(v)
		fmt.Fprintln(w, string(b))
		return
	}
	if index > 0 {
		fmt.Fprintf(w, "#%d ", index)
	}
	fmt.Fprintf(w, "source=%s id=%d seq=%d handback=%q", v.Source, v.ID, v.Seq, v.Handback)
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
}

func (g *globals) eventsCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "events", Short: "Host a listener; send an event"}
	cmd.AddCommand(g.eventsListenCmd(), g.eventsSendCmd())
	return cmd
}

func (g *globals) eventsListenCmd() *cobra.Command {
	var addr string
	cmd := &cobra.Command{
		Use:   "listen [--listen ADDR]",
		Short: "Host a listener, print its reference, then one line per event received",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			w := cmd.OutOrStdout()
			l, err := client.Listen(cmd.Context(), addr, func(_ context.Context, ev *client.RemoteEvent) error {
				printEvent(g, w, 0, ev)
				return nil
			})
			if err != nil {
				return err
			}
			defer l.Close()
			if g.output == "json" {
				b, _ := json.Marshal(map[string]string{"listener": l.Ref().String()})
				fmt.Fprintln(w, string(b))
			} else {
				fmt.Fprintln(w, "listener", l.Ref())
			}
			select {
			case <-cmd.Context().Done():
			case <-l.Done():
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&addr, "listen", "127.0.0.1:0", "address to serve the listener on")
	return cmd
}

func (g *globals) eventsSendCmd() *cobra.Command {
	var (
		to, source, handback string
		id, seq              int64
	)
	cmd := &cobra.Command{
		Use:   "send --to LISTENER --source REF --id N --seq N [--handback TEXT]",
		Short: "Send one event to a listener",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			target, err := djinn.ParseRef(to)
			if err != nil {
				return fmt.Errorf("--to: %w", err)
			}
			src, err := djinn.ParseRef(source)
			if err != nil {
				return fmt.Errorf("--source: %w", err)
			}
			c, err := g.dial(cmd.Context())
			if err != nil {
				return err
			}
			defer c.Close()
			ev := &client.RemoteEvent{Source: src, ID: id, Seq: seq, Handback: []byte(handback)}
			if err := client.Notify(cmd.Context(), c, target, ev); err != nil {
				return err
			}
			return g.print(cmd.OutOrStdout(), map[string]bool{"sent": true}, func(w io.Writer) { fmt.Fprintln(w, "sent") })
		},
	}
	f := cmd.Flags()
	f.StringVar(&to, "to", "", "listener reference")
	f.StringVar(&source, "source", "", "the event source's reference")
	f.Int64Var(&id, "id", 0, "event id")
	f.Int64Var(&seq, "seq", 0, "sequence number")
	f.StringVar(&handback, "handback", "", "handback bytes, as text")
	_ = cmd.MarkFlagRequired("to")
	_ = cmd.MarkFlagRequired("source")
	return cmd
}
