package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
)

// The lease commands: show, renew and cancel a lease by its short name
// (its cookie in hex, for a lease of --server) or its token (the printable
// lease, which names its landlord: what another holder needs).

type leaseView struct {
	Name       string       `json:"name"` // the cookie in hex: a capability, like the token
	Landlord   string       `json:"landlord"`
	Expiration *string      `json:"expiration"` // null: never (a Forever lease)
	Remaining  durationJSON `json:"remaining"`
	Format     string       `json:"serial_format"`
	Token      string       `json:"token"`

	expires time.Time
}

func viewLease(l *client.Lease) leaseView {
	exp := l.Expiration()
	left := djinn.Forever
	if exp.Before(djinn.EndOfTime) {
		left = djinn.Remaining(exp, time.Now()).Round(time.Millisecond)
	}
	return leaseView{Name: l.Cookie().String(), Landlord: l.Landlord().String(), Expiration: jsonInstant(exp),
		Remaining: jsonDuration(left), Format: l.SerialFormat().String(), Token: l.Token(), expires: exp}
}

// expiresText is when the lease expires and how long it has left.
func (v leaseView) expiresText() string {
	if !v.expires.Before(djinn.EndOfTime) {
		return "never"
	}
	return fmt.Sprintf("%s (in %s)", textInstant(v.expires), v.Remaining.Human)
}

func printLease(w io.Writer, v leaseView) {
	fmt.Fprintf(w, "lease       %s\nlandlord    %s\nexpires     %s\nformat      %s\ntoken       %s\n",
		v.Name, v.Landlord, v.expiresText(), v.Format, v.Token)
}

func (g *globals) leaseCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "lease",
		Short: "Show, renew and cancel leases, by short name or token",
		Long: "Show, renew and cancel leases. A lease is named by its short name, the 32 hex digits of its " +
			"cookie, for a lease of --server, or by its token (djinn-lease:…), which also names its landlord. " +
			"Both are capabilities: whoever has one can renew or cancel the lease.",
	}
	cmd.AddCommand(g.leaseShowCmd(), g.leaseRenewCmd(), g.leaseCancelCmd())
	return cmd
}

// leaseArg reads a lease named on the command line: its token, or its
// short name for a lease of c's server, whose expiration it asks the
// landlord (with the error of that, it returns the lease too).
func leaseArg(ctx context.Context, c *client.Client, what, s string) (*client.Lease, error) {
	if l, err := client.ParseToken(s); err == nil {
		return l, nil
	} else if _, idErr := djinn.ParseID(s); idErr != nil {
		return nil, usageError{fmt.Errorf("%s %q: neither a lease's short name (32 hex digits) nor its token (djinn-lease:…)", what, abbrev(s))}
	}
	cookie, _ := djinn.ParseID(s)
	landlord, err := serverLandlord(ctx, c)
	if err != nil {
		return nil, err
	}
	// The short name says nothing of the expiration: ask the landlord.
	l := client.NewLease(landlord, cookie, time.Time{})
	if _, err := l.Refresh(ctx, c); err != nil {
		if strings.Contains(err.Error(), s) {
			return l, fmt.Errorf("%s: %w", what, err) // the landlord named it already
		}
		return l, fmt.Errorf("%s %s: %w", what, s, err)
	}
	return l, nil
}

// checkLeaseArg checks a lease's name before anything is dialled.
func checkLeaseArg(what, s string) error {
	if _, err := client.ParseToken(s); err == nil {
		return nil
	}
	if _, err := djinn.ParseID(s); err != nil {
		return usageError{fmt.Errorf("%s %q: neither a lease's short name (32 hex digits) nor its token (djinn-lease:…)", what, abbrev(s))}
	}
	return nil
}

// abbrev shortens what the user typed, quoted in an error.
func abbrev(s string) string {
	if len(s) > 48 {
		return s[:48] + "…"
	}
	return s
}

// serverLandlord is the reference of the landlord of c's server, at the
// address c reaches it by.
func serverLandlord(ctx context.Context, c *client.Client) (djinn.Ref, error) {
	st, err := adminStatus(ctx, c)
	if err != nil {
		return djinn.Ref{}, err
	}
	ref, err := client.RefFromProto("landlord", st.GetLandlord())
	if err != nil {
		return djinn.Ref{}, fmt.Errorf("%s names no landlord: %w", c.Addr(), err)
	}
	ref.Endpoint = c.Addr()
	return ref, nil
}

// leaseStatusView is what lease show prints: the lease as its landlord
// knows it now.
type leaseStatusView struct {
	leaseView
	Covers string `json:"covers"` // what the lease covers, as the landlord names it
	Gone   bool   `json:"gone"`   // the landlord no longer knows it: expired or cancelled
}

func (g *globals) leaseShowCmd() *cobra.Command {
	return &cobra.Command{
		Use:               "show LEASE",
		ValidArgsFunction: g.completeIDs("lease"),
		Short:             "Ask the landlord about a lease: how long it has left and what it covers; exits 1 when it is gone",
		Args:              cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkLeaseArg("LEASE", args[0]); err != nil {
				return err
			}
			var covers string
			l, err := g.withLease(cmd, args[0], func(ctx context.Context, l *client.Lease, c *client.Client) (err error) {
				covers, err = l.Refresh(ctx, c)
				return err
			})
			if l == nil {
				return err
			}
			v := leaseStatusView{leaseView: viewLease(l), Covers: covers}
			if errors.Is(err, djinn.ErrUnknownLease) {
				return g.leaseGone(cmd, v)
			}
			if err != nil {
				return err
			}
			return g.print(cmd.OutOrStdout(), v, func(w io.Writer) {
				printLease(w, v.leaseView)
				fmt.Fprintf(w, "covers      %s\n", covers)
			})
		},
	}
}

// leaseGone prints that a lease is gone and answers no.
func (g *globals) leaseGone(cmd *cobra.Command, v leaseStatusView) error {
	v.Gone, v.Expiration, v.Remaining = true, nil, durationJSON{Seconds: new(float64), Human: "0s"}
	if err := g.print(cmd.OutOrStdout(), v, func(w io.Writer) {
		fmt.Fprintf(w, "lease       %s\nlandlord    %s\ngone        expired or cancelled: its landlord no longer knows it\n", v.Name, v.Landlord)
	}); err != nil {
		return err
	}
	return negative{fmt.Sprintf("lease %s: gone: expired or cancelled (its landlord no longer knows it)", v.Name)}
}

func (g *globals) leaseRenewCmd() *cobra.Command {
	var d string
	cmd := &cobra.Command{
		Use:               "renew LEASE [--lease D]",
		ValidArgsFunction: g.completeIDs("lease"),
		Short:             "Renew a lease for D from now (a Go duration, forever or any); prints the renewed lease",
		Args:              cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dur, err := parseLease(d)
			if err != nil {
				return err
			}
			if err := checkLeaseArg("LEASE", args[0]); err != nil {
				return err
			}
			l, err := g.withLease(cmd, args[0], func(ctx context.Context, l *client.Lease, c *client.Client) error {
				return l.Renew(ctx, c, dur)
			})
			if err != nil {
				return err
			}
			g.noticeClamp(cmd, "renewal", "", dur, l)
			v := viewLease(l)
			return g.print(cmd.OutOrStdout(), v, func(w io.Writer) { printLease(w, v) })
		},
	}
	leaseFlag(cmd, &d, "the renewed lease")
	cmd.Flags().Lookup("lease").Usage = "renew for this long: a positive Go duration, forever or any (the landlord may grant less)"
	return cmd
}

func (g *globals) leaseCancelCmd() *cobra.Command {
	return &cobra.Command{
		Use:               "cancel LEASE",
		ValidArgsFunction: g.completeIDs("lease"),
		Short:             "Cancel a lease: what it covers ends now",
		Args:              cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkLeaseArg("LEASE", args[0]); err != nil {
				return err
			}
			l, err := g.withLease(cmd, args[0], func(ctx context.Context, l *client.Lease, c *client.Client) error {
				return l.Cancel(ctx, c)
			})
			if err != nil {
				return err
			}
			v := map[string]any{"lease": l.Cookie().String(), "cancelled": true}
			return g.print(cmd.OutOrStdout(), v, func(w io.Writer) { fmt.Fprintln(w, "cancelled") })
		},
	}
}

// withLease dials the server, reads the lease named by arg and calls fn.
func (g *globals) withLease(cmd *cobra.Command, arg string, fn func(context.Context, *client.Lease, *client.Client) error) (*client.Lease, error) {
	ctx := cmd.Context()
	c, err := g.dialReady(cmd)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	l, err := leaseArg(ctx, c, "LEASE", arg)
	if err != nil {
		return l, err
	}
	return l, fn(ctx, l, c)
}

// noticeClamp tells, on stderr, that a grant was shorter than asked, and
// what sets the most the server grants: limit ("" when the kind of lease,
// and so the setting, is not known).
func (g *globals) noticeClamp(cmd *cobra.Command, what, limit string, asked time.Duration, l *client.Lease) {
	got, ok := l.Granted()
	if !ok || asked == djinn.Any || got >= asked || (asked == djinn.Forever && got == djinn.Forever) {
		return
	}
	why := "the landlord's most for that kind of lease"
	if limit != "" {
		why = "the server's most for it (" + limit + ")"
	}
	g.notice(cmd.ErrOrStderr(), map[string]any{"lease": l.Cookie().String(), "asked": jsonDuration(asked), "granted": jsonDuration(got)},
		fmt.Sprintf("the %s was granted for %s, not the %s asked: %s",
			what, djinn.FormatDuration(got), djinn.FormatDuration(asked), why))
}
