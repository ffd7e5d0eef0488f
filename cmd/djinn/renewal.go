package main

import (
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
)

type renewalSetView struct {
	ID                string               `json:"set"`
	Ref               string               `json:"reference"`
	Lease             leaseView            `json:"lease"`
	Leases            int64                `json:"leases"`
	ExpirationWarning *renewalListenerView `json:"expiration_warning,omitempty"`
	RenewalFailure    *renewalListenerView `json:"renewal_failure,omitempty"`
}

type renewalListenerView struct {
	Listener   string `json:"listener"`
	Handback   string `json:"handback"`
	MinWarning string `json:"min_warning,omitempty"`
	NextSeq    int64  `json:"next_sequence"`
	Pending    int64  `json:"pending_events"`
}

func viewRenewalSet(s *client.RenewalSet, info *client.RenewalSetInfo) renewalSetView {
	v := renewalSetView{ID: s.ID().String(), Ref: s.Ref().String(), Lease: viewLease(s.Lease())}
	if info == nil {
		return v
	}
	v.Lease, v.Leases = viewLease(info.Lease), info.Leases
	v.ExpirationWarning = viewRenewalListener(info.ExpirationWarning, true)
	v.RenewalFailure = viewRenewalListener(info.RenewalFailure, false)
	return v
}

func viewRenewalListener(l *client.RenewalListener, warning bool) *renewalListenerView {
	if l == nil {
		return nil
	}
	v := &renewalListenerView{Listener: l.Listener.String(), Handback: string(l.Handback), NextSeq: l.NextSeq, Pending: l.Pending}
	if warning {
		v.MinWarning = djinn.FormatDuration(l.MinWarning)
	}
	return v
}

func printRenewalSet(w io.Writer, v renewalSetView, listeners bool) {
	fmt.Fprintf(w, "set        %s\nreference  %s\nlease      %s\nexpires    %s (in %s)\nleases     %d\n",
		v.ID, v.Ref, v.Lease.Token, v.Lease.Expiration, v.Lease.Remaining, v.Leases)
	if !listeners {
		return
	}
	if l := v.ExpirationWarning; l != nil {
		fmt.Fprintf(w, "warning    %s min-warning=%s handback=%q next-seq=%d pending=%d\n", l.Listener, l.MinWarning, l.Handback, l.NextSeq, l.Pending)
	} else {
		fmt.Fprintf(w, "warning    (none)\n")
	}
	if l := v.RenewalFailure; l != nil {
		fmt.Fprintf(w, "failures   %s handback=%q next-seq=%d pending=%d\n", l.Listener, l.Handback, l.NextSeq, l.Pending)
	} else {
		fmt.Fprintf(w, "failures   (none)\n")
	}
}

type clientLeaseView struct {
	Landlord      string `json:"landlord"`
	Expiration    string `json:"expiration"`
	Desired       string `json:"desired_expiration"`
	RenewDuration string `json:"renew_duration"`
	LastError     string `json:"last_error,omitempty"`
	Token         string `json:"token"`
}

func formatTime(t time.Time) string {
	if !t.Before(djinn.EndOfTime) {
		return "never"
	}
	return t.Format(time.RFC3339Nano)
}

func viewClientLease(c client.ClientLease) clientLeaseView {
	v := clientLeaseView{
		Landlord: c.Lease.Landlord().String(), Expiration: formatTime(c.Lease.Expiration()), Desired: formatTime(c.Desired),
		RenewDuration: djinn.FormatDuration(c.RenewDuration), Token: c.Lease.Token(),
	}
	if c.LastError != nil {
		v.LastError = c.LastError.Error()
	}
	return v
}

type eventRegistrationView struct {
	ID     int64     `json:"event_id"`
	Source string    `json:"source"`
	Seq    int64     `json:"sequence"`
	Lease  leaseView `json:"lease"`
}

func printEventRegistration(g *globals, w io.Writer, r *client.EventRegistration) error {
	v := eventRegistrationView{ID: r.ID, Source: r.Source.String(), Seq: r.Seq, Lease: viewLease(r.Lease)}
	return g.print(w, v, func(w io.Writer) {
		fmt.Fprintf(w, "event id   %d\nsource     %s\nsequence   %d\nlease      %s\n", v.ID, v.Source, v.Seq, v.Lease.Token)
	})
}

// parseRef parses a reference flag, naming the flag in the error.
func parseRef(flag, s string) (djinn.Ref, error) {
	r, err := djinn.ParseRef(s)
	if err != nil {
		return r, fmt.Errorf("--%s: %w", flag, err)
	}
	return r, nil
}

func (g *globals) renewalCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "renewal", Short: "Lease renewal sets: leases the service renews for you"}
	cmd.AddCommand(g.renewalCreateCmd(), g.renewalShowCmd(), g.renewalAddCmd(), g.renewalRemoveCmd(), g.renewalLsCmd(),
		g.renewalWarnCmd(), g.renewalFailuresCmd(), g.renewalClearWarnCmd(), g.renewalClearFailuresCmd())
	return cmd
}

func (g *globals) renewalCreateCmd() *cobra.Command {
	var d string
	cmd := &cobra.Command{
		Use:   "create --duration D",
		Short: "Create a renewal set; prints its id and lease token",
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
			s, err := c.RenewalService().CreateSet(cmd.Context(), dur)
			if err != nil {
				return err
			}
			v := viewRenewalSet(s, nil)
			return g.print(cmd.OutOrStdout(), v, func(w io.Writer) { printRenewalSet(w, v, false) })
		},
	}
	cmd.Flags().StringVar(&d, "duration", "any", "set lease duration: a positive Go duration, forever or any")
	return cmd
}

// withSet builds a command on renewal set SET: it parses SET, dials, reads
// the set and calls run with the arguments after SET (n of them).
func (g *globals) withSet(use, short string, n int, run func(cmd *cobra.Command, s *client.RenewalSet, args []string) error) *cobra.Command {
	return &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.ExactArgs(1 + n),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := djinn.ParseID(args[0])
			if err != nil {
				return fmt.Errorf("set: %w", err)
			}
			c, err := g.dial(cmd.Context())
			if err != nil {
				return err
			}
			defer c.Close()
			s, err := c.RenewalService().Set(cmd.Context(), id)
			if err != nil {
				return err
			}
			return run(cmd, s, args[1:])
		},
	}
}

func (g *globals) renewalShowCmd() *cobra.Command {
	return g.withSet("show SET", "Show a set: its lease, number of leases and listeners with their sequence numbers", 0,
		func(cmd *cobra.Command, s *client.RenewalSet, _ []string) error {
			info, err := s.Info(cmd.Context())
			if err != nil {
				return err
			}
			v := viewRenewalSet(s, info)
			return g.print(cmd.OutOrStdout(), v, func(w io.Writer) { printRenewalSet(w, v, true) })
		})
}

func (g *globals) renewalAddCmd() *cobra.Command {
	var desired, renew string
	cmd := g.withSet("add SET TOKEN --desired D [--renew D]", "Have the set renew a lease until --desired from now, --renew at a time (default forever)", 1,
		func(cmd *cobra.Command, s *client.RenewalSet, args []string) error {
			l, err := client.ParseToken(args[0])
			if err != nil {
				return err
			}
			want, err := djinn.ParseDuration(desired)
			if err != nil {
				return fmt.Errorf("--desired: %w", err)
			}
			each := djinn.Forever
			if cmd.Flags().Changed("renew") {
				if each, err = djinn.ParseDuration(renew); err != nil {
					return fmt.Errorf("--renew: %w", err)
				}
				err = s.RenewFor(cmd.Context(), l, want, each)
			} else {
				err = s.RenewForDesired(cmd.Context(), l, want)
			}
			if err != nil {
				return err
			}
			out := map[string]string{"set": s.ID().String(), "desired": djinn.FormatDuration(want), "renew": djinn.FormatDuration(each)}
			return g.print(cmd.OutOrStdout(), out, func(w io.Writer) {
				fmt.Fprintf(w, "set %s renews %v: desired %s, renew %s\n", out["set"], l, out["desired"], out["renew"])
			})
		})
	cmd.Flags().StringVar(&desired, "desired", "", "how long to keep the lease: a Go duration or forever (negative: drop it)")
	cmd.Flags().StringVar(&renew, "renew", "forever", "duration of each renewal: a positive Go duration, or any with --desired forever")
	_ = cmd.MarkFlagRequired("desired")
	return cmd
}

func (g *globals) renewalRemoveCmd() *cobra.Command {
	return g.withSet("remove SET TOKEN", "Take a lease out of a set without cancelling it", 1,
		func(cmd *cobra.Command, s *client.RenewalSet, args []string) error {
			l, err := client.ParseToken(args[0])
			if err != nil {
				return err
			}
			removed, err := s.Remove(cmd.Context(), l)
			if err != nil {
				return err
			}
			if removed == nil {
				return g.print(cmd.OutOrStdout(), map[string]bool{"removed": false}, func(w io.Writer) { fmt.Fprintln(w, "not in the set") })
			}
			v := struct {
				Removed bool      `json:"removed"`
				Lease   leaseView `json:"lease"`
			}{true, viewLease(removed)}
			return g.print(cmd.OutOrStdout(), v, func(w io.Writer) {
				fmt.Fprintln(w, "removed")
				printLease(w, v.Lease)
			})
		})
}

func (g *globals) renewalLsCmd() *cobra.Command {
	return g.withSet("ls SET", "List a set's leases: landlord, expiration, desired expiration, renew duration, last error", 0,
		func(cmd *cobra.Command, s *client.RenewalSet, _ []string) error {
			leases, err := s.Leases(cmd.Context())
			if err != nil {
				return err
			}
			slices.SortFunc(leases, func(a, b client.ClientLease) int {
				if c := a.Desired.Compare(b.Desired); c != 0 {
					return c
				}
				return a.Lease.Expiration().Compare(b.Lease.Expiration())
			})
			vs := make([]clientLeaseView, len(leases))
			for i, l := range leases {
				vs[i] = viewClientLease(l)
			}
			return g.print(cmd.OutOrStdout(), vs, func(w io.Writer) { printClientLeases(w, vs) })
		})
}

func printClientLeases(w io.Writer, vs []clientLeaseView) {
	for _, v := range vs {
		fmt.Fprintf(w, "landlord=%s expires=%s desired=%s renew=%s", v.Landlord, v.Expiration, v.Desired, v.RenewDuration)
		if v.LastError != "" {
			fmt.Fprintf(w, " last-error=%q", v.LastError)
		}
		fmt.Fprintf(w, " token=%s\n", v.Token)
	}
}

func (g *globals) renewalWarnCmd() *cobra.Command {
	var listener, minWarning, handback string
	cmd := g.withSet("warn SET --listener REF --min-warning D [--handback S]", "Send an expiration warning event to a listener D before the set's lease expires", 0,
		func(cmd *cobra.Command, s *client.RenewalSet, _ []string) error {
			ref, err := parseRef("listener", listener)
			if err != nil {
				return err
			}
			mw, err := djinn.ParseDuration(minWarning)
			if err != nil {
				return fmt.Errorf("--min-warning: %w", err)
			}
			reg, err := s.SetExpirationWarningListener(cmd.Context(), ref, mw, handbackBytes(handback))
			if err != nil {
				return err
			}
			return printEventRegistration(g, cmd.OutOrStdout(), reg)
		})
	cmd.Flags().StringVar(&listener, "listener", "", "listener reference (djinn://host:port/SERVICE/OBJECT)")
	cmd.Flags().StringVar(&minWarning, "min-warning", "", "how long before the set's lease expires: a Go duration, zero or more")
	cmd.Flags().StringVar(&handback, "handback", "", "handback returned in the events")
	_ = cmd.MarkFlagRequired("listener")
	_ = cmd.MarkFlagRequired("min-warning")
	return cmd
}

func (g *globals) renewalFailuresCmd() *cobra.Command {
	var listener, handback string
	cmd := g.withSet("failures SET --listener REF [--handback S]", "Send a renewal failure event to a listener for each lease the set cannot renew", 0,
		func(cmd *cobra.Command, s *client.RenewalSet, _ []string) error {
			ref, err := parseRef("listener", listener)
			if err != nil {
				return err
			}
			reg, err := s.SetRenewalFailureListener(cmd.Context(), ref, handbackBytes(handback))
			if err != nil {
				return err
			}
			return printEventRegistration(g, cmd.OutOrStdout(), reg)
		})
	cmd.Flags().StringVar(&listener, "listener", "", "listener reference (djinn://host:port/SERVICE/OBJECT)")
	cmd.Flags().StringVar(&handback, "handback", "", "handback returned in the events")
	_ = cmd.MarkFlagRequired("listener")
	return cmd
}

func (g *globals) renewalClearWarnCmd() *cobra.Command {
	return g.withSet("clear-warn SET", "Remove the expiration warning listener", 0,
		func(cmd *cobra.Command, s *client.RenewalSet, _ []string) error {
			if err := s.ClearExpirationWarningListener(cmd.Context()); err != nil {
				return err
			}
			return g.print(cmd.OutOrStdout(), map[string]string{"cleared": "expiration_warning"}, func(w io.Writer) {
				fmt.Fprintln(w, "expiration warning listener cleared")
			})
		})
}

func (g *globals) renewalClearFailuresCmd() *cobra.Command {
	return g.withSet("clear-failures SET", "Remove the renewal failure listener", 0,
		func(cmd *cobra.Command, s *client.RenewalSet, _ []string) error {
			if err := s.ClearRenewalFailureListener(cmd.Context()); err != nil {
				return err
			}
			return g.print(cmd.OutOrStdout(), map[string]string{"cleared": "renewal_failure"}, func(w io.Writer) {
				fmt.Fprintln(w, "renewal failure listener cleared")
			})
		})
}

// handbackBytes is the handback of a flag: none when empty.
func handbackBytes(s string) []byte {
	if s == "" {
		return nil
	}
	return []byte(s)
}
