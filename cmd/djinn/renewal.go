package main

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
)

// The lease renewal service's commands. A set is named by its id (SET);
// the leases it renews by their short names or tokens.

func (g *globals) renewalCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "renewal", Short: "Lease renewal sets: leases the service renews for you"}
	cmd.AddCommand(g.renewalCreateCmd(), g.renewalShowCmd(), g.renewalAddCmd(), g.renewalRemoveCmd(), g.renewalLsCmd(),
		g.renewalWarnCmd(), g.renewalFailuresCmd(), g.renewalClearWarnCmd(), g.renewalClearFailuresCmd())
	return cmd
}

func (g *globals) renewalCreateCmd() *cobra.Command {
	var d string
	cmd := &cobra.Command{
		Use:   "create [--lease D]",
		Short: "Create a renewal set; prints its id SET and its lease",
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
			s, err := c.RenewalService().CreateSet(cmd.Context(), dur)
			if err != nil {
				return err
			}
			g.noticeClamp(cmd, "set's lease", "djinn serve --renewal-max-lease", dur, s.Lease())
			v := viewRenewalSet(s, nil)
			return g.print(cmd.OutOrStdout(), v, func(w io.Writer) { printRenewalSet(w, v, false) })
		},
	}
	leaseFlag(cmd, &d, "the set")
	return cmd
}

// withSet builds a command on renewal set SET: it parses SET, dials, reads
// the set and calls run with the arguments after SET (n of them).
func (g *globals) withSet(use, short string, n int, run func(cmd *cobra.Command, c *client.Client, s *client.RenewalSet, args []string) error) *cobra.Command {
	return &cobra.Command{
		Use:               use,
		Short:             short,
		Args:              cobra.ExactArgs(1 + n),
		ValidArgsFunction: g.completeIDs("renewal"),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := djinn.ParseID(args[0])
			if err != nil {
				return usageError{fmt.Errorf("SET: %w", err)}
			}
			c, err := g.dialReady(cmd)
			if err != nil {
				return err
			}
			defer c.Close()
			s, err := c.RenewalService().Set(cmd.Context(), id)
			if err != nil {
				return err
			}
			return run(cmd, c, s, args[1:])
		},
	}
}

func (g *globals) renewalShowCmd() *cobra.Command {
	return g.withSet("show SET", "Show a set: its lease, number of leases and listeners with their sequence numbers", 0,
		func(cmd *cobra.Command, c *client.Client, s *client.RenewalSet, _ []string) error {
			info, err := s.Info(cmd.Context())
			if err != nil {
				return err
			}
			v := viewRenewalSet(s, info)
			return g.print(cmd.OutOrStdout(), v, func(w io.Writer) { printRenewalSet(w, v, true) })
		})
}

func (g *globals) renewalAddCmd() *cobra.Command {
	var (
		desired, renew string
		want, each     time.Duration // parsed before the set is looked up
	)
	cmd := g.withSet("add SET LEASE --desired D [--renew D]", "Have the set renew a lease (its short name, for a lease of --server, or its token) until --desired from now, --renew at a time", 1,
		func(cmd *cobra.Command, c *client.Client, s *client.RenewalSet, args []string) error {
			l, err := leaseArg(cmd.Context(), c, "LEASE", args[0])
			if err != nil {
				return err
			}
			if flagChanged(cmd, "renew") {
				err = s.RenewFor(cmd.Context(), l, want, each)
			} else {
				err = s.RenewForDesired(cmd.Context(), l, want)
			}
			if err != nil {
				return err
			}
			out := map[string]any{"set": s.ID().String(), "lease": l.Cookie().String(), "desired": jsonDuration(want), "renew": jsonDuration(each)}
			return g.print(cmd.OutOrStdout(), out, func(w io.Writer) {
				fmt.Fprintf(w, "set %s renews lease %s: desired %s, renew %s\n", s.ID(), l.Cookie(), djinn.FormatDuration(want), djinn.FormatDuration(each))
			})
		})
	cmd.PreRunE = func(cmd *cobra.Command, _ []string) error {
		var err error
		if !flagChanged(cmd, "desired") { // checked here, before cobra's required flags are
			return usageError{errors.New("--desired: missing: how long to keep the lease, a Go duration or forever")}
		}
		if want, err = djinn.ParseDuration(desired); err != nil {
			return usageError{fmt.Errorf("--desired: %w", err)}
		}
		each = djinn.Forever
		if flagChanged(cmd, "renew") {
			if each, err = djinn.ParseDuration(renew); err != nil {
				return usageError{fmt.Errorf("--renew: %w", err)}
			}
		}
		return nil
	}
	cmd.Flags().StringVar(&desired, "desired", "", "how long to keep the lease: a Go duration or forever (negative: drop it)")
	cmd.Flags().StringVar(&renew, "renew", "forever", "duration of each renewal: a positive Go duration, or any with --desired forever")
	_ = cmd.MarkFlagRequired("desired")
	_ = cmd.RegisterFlagCompletionFunc("desired", completeWords("forever", "10m", "1h", "24h"))
	return cmd
}

func (g *globals) renewalRemoveCmd() *cobra.Command {
	return g.withSet("remove SET LEASE", "Take a lease out of a set without cancelling it; exits 1 when it was not in the set", 1,
		func(cmd *cobra.Command, c *client.Client, s *client.RenewalSet, args []string) error {
			l, err := leaseArg(cmd.Context(), c, "LEASE", args[0])
			if err != nil {
				return err
			}
			removed, err := s.Remove(cmd.Context(), l)
			if err != nil {
				return err
			}
			if removed == nil {
				if err := g.print(cmd.OutOrStdout(), map[string]any{"removed": false, "lease": nil}, func(w io.Writer) { fmt.Fprintln(w, "not in the set") }); err != nil {
					return err
				}
				return negative{fmt.Sprintf("lease %s: not in set %s (renewal ls lists what it holds)", l.Cookie(), s.ID())}
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
		func(cmd *cobra.Command, c *client.Client, s *client.RenewalSet, _ []string) error {
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

func (g *globals) renewalWarnCmd() *cobra.Command {
	var (
		listener, minWarning, handback string
		ref                            djinn.Ref // parsed before the set is looked up
		mw                             time.Duration
	)
	cmd := g.withSet("warn SET --listener REF --min-warning D [--handback S]", "Send an expiration warning event to a listener D before the set's lease expires", 0,
		func(cmd *cobra.Command, c *client.Client, s *client.RenewalSet, _ []string) error {
			reg, err := s.SetExpirationWarningListener(cmd.Context(), ref, mw, handbackBytes(handback))
			if err != nil {
				return err
			}
			return printEventRegistration(g, cmd.OutOrStdout(), reg)
		})
	cmd.Flags().StringVar(&listener, "listener", "", "listener reference (djinn://host:port/SERVICE/OBJECT)")
	cmd.PreRunE = func(cmd *cobra.Command, _ []string) error {
		var err error
		if ref, err = parseRef("listener", listener); err != nil {
			return err
		}
		if !flagChanged(cmd, "min-warning") { // checked here, before cobra's required flags are
			return usageError{errors.New("--min-warning: missing: how long before the set's lease expires to warn, a Go duration (zero or more)")}
		}
		if mw, err = djinn.ParseDuration(minWarning); err != nil {
			return usageError{fmt.Errorf("--min-warning: %w", err)}
		}
		return nil
	}
	cmd.Flags().StringVar(&minWarning, "min-warning", "", "how long before the set's lease expires: a Go duration, zero or more")
	cmd.Flags().StringVar(&handback, "handback", "", "handback returned in the events")
	_ = cmd.MarkFlagRequired("listener")
	_ = cmd.MarkFlagRequired("min-warning")
	return cmd
}

func (g *globals) renewalFailuresCmd() *cobra.Command {
	var listener, handback string
	cmd := g.withSet("failures SET --listener REF [--handback S]", "Send a renewal failure event to a listener for each lease the set cannot renew", 0,
		func(cmd *cobra.Command, c *client.Client, s *client.RenewalSet, _ []string) error {
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
		func(cmd *cobra.Command, c *client.Client, s *client.RenewalSet, _ []string) error {
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
		func(cmd *cobra.Command, c *client.Client, s *client.RenewalSet, _ []string) error {
			if err := s.ClearRenewalFailureListener(cmd.Context()); err != nil {
				return err
			}
			return g.print(cmd.OutOrStdout(), map[string]string{"cleared": "renewal_failure"}, func(w io.Writer) {
				fmt.Fprintln(w, "renewal failure listener cleared")
			})
		})
}
