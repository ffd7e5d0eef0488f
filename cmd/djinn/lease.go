package main

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
)

// The lease commands: show, renew and cancel a lease by its printable
// token.

type leaseView struct {
	Landlord   string `json:"landlord"`
	Expiration string `json:"expiration"`
	Remaining  string `json:"remaining"`
	Format     string `json:"serial_format"`
	Token      string `json:"token"`
}

func viewLease(l *client.Lease) leaseView {
	exp := l.Expiration()
	v := leaseView{Landlord: l.Landlord().String(), Format: l.SerialFormat().String(), Token: l.Token()}
	if !exp.Before(djinn.EndOfTime) {
		v.Expiration, v.Remaining = "never", "forever"
	} else {
		v.Expiration = exp.Format(time.RFC3339Nano)
		v.Remaining = djinn.Remaining(exp, time.Now()).Round(time.Millisecond).String()
	}
	return v
}

func printLease(w io.Writer, v leaseView) {
	fmt.Fprintf(w, "landlord    %s\nexpires     %s (in %s)\nformat      %s\ntoken       %s\n", v.Landlord, v.Expiration, v.Remaining, v.Format, v.Token)
}

func (g *globals) leaseCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "lease", Short: "Show, renew and cancel leases (by their printable token)"}
	cmd.AddCommand(g.leaseShowCmd(), g.leaseRenewCmd(), g.leaseCancelCmd())
	return cmd
}

func (g *globals) leaseShowCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "show TOKEN",
		Short: "Show what a lease token holds",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			l, err := client.ParseToken(args[0])
			if err != nil {
				return err
			}
			v := viewLease(l)
			return g.print(cmd.OutOrStdout(), v, func(w io.Writer) { printLease(w, v) })
		},
	}
}

func (g *globals) leaseRenewCmd() *cobra.Command {
	var d string
	cmd := &cobra.Command{
		Use:   "renew TOKEN --duration D",
		Short: "Renew a lease (D: a Go duration, forever or any); prints the renewed lease",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dur, err := djinn.ParseDuration(d)
			if err != nil {
				return err
			}
			l, err := g.withLease(cmd, args[0], func(l *client.Lease, c *client.Client) error {
				return l.Renew(cmd.Context(), c, dur)
			})
			if err != nil {
				return err
			}
			v := viewLease(l)
			return g.print(cmd.OutOrStdout(), v, func(w io.Writer) { printLease(w, v) })
		},
	}
	cmd.Flags().StringVar(&d, "duration", "any", "requested duration: a Go duration, forever or any")
	return cmd
}

func (g *globals) leaseCancelCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "cancel TOKEN",
		Short: "Cancel a lease",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if _, err := g.withLease(cmd, args[0], func(l *client.Lease, c *client.Client) error {
				return l.Cancel(cmd.Context(), c)
			}); err != nil {
				return err
			}
			return g.print(cmd.OutOrStdout(), map[string]bool{"cancelled": true}, func(w io.Writer) { fmt.Fprintln(w, "cancelled") })
		},
	}
}

// withLease parses a lease token, dials the server and calls fn.
func (g *globals) withLease(cmd *cobra.Command, token string, fn func(*client.Lease, *client.Client) error) (*client.Lease, error) {
	l, err := client.ParseToken(token)
	if err != nil {
		return nil, err
	}
	c, err := g.dial(cmd.Context())
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return l, fn(l, c)
}
