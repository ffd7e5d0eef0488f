package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
)

type txnView struct {
	ID      uint64    `json:"id"`
	Parent  uint64    `json:"parent,omitempty"` // nested in it (TX.2.2)
	Manager string    `json:"manager"`
	Lease   leaseView `json:"lease"`
}

func printTxn(w io.Writer, v txnView) {
	fmt.Fprintf(w, "transaction %d\n", v.ID)
	if v.Parent != 0 {
		fmt.Fprintf(w, "nested in   %d\n", v.Parent)
	}
	fmt.Fprintf(w, "manager     %s\nlease       %s\nexpires     %s (in %s)\n", v.Manager, v.Lease.Token, v.Lease.Expiration, v.Lease.Remaining)
}

type txnDescriptionView struct {
	ID           uint64            `json:"id"`
	State        string            `json:"state"`
	Parent       uint64            `json:"parent,omitempty"`
	Nested       []uint64          `json:"nested,omitempty"`
	Lease        *leaseView        `json:"lease,omitempty"`
	Participants []participantView `json:"participants"`
}

type participantView struct {
	Participant  string `json:"participant"`
	CrashCount   int64  `json:"crash_count"`
	Vote         string `json:"vote"`
	Notified     bool   `json:"notified"`
	LastError    string `json:"last_error,omitempty"`
	FailingSince string `json:"failing_since,omitempty"`
}

func viewTxnDescription(d *client.TransactionDescription) txnDescriptionView {
	v := txnDescriptionView{ID: d.ID, State: d.State.String(), Parent: d.Parent, Nested: d.Children, Participants: []participantView{}}
	if d.Lease != nil {
		l := viewLease(d.Lease)
		v.Lease = &l
	}
	for _, p := range d.Participants {
		pv := participantView{Participant: p.Participant.String(), CrashCount: p.CrashCount, Vote: p.Vote.String(), Notified: p.Notified}
		if p.LastError != nil {
			pv.LastError = p.LastError.Error()
		}
		if !p.FailingSince.IsZero() {
			pv.FailingSince = p.FailingSince.Format(time.RFC3339Nano)
		}
		v.Participants = append(v.Participants, pv)
	}
	return v
}

func printTxnDescription(w io.Writer, v txnDescriptionView) {
	fmt.Fprintf(w, "transaction  %d\nstate        %s\n", v.ID, v.State)
	if v.Parent != 0 {
		fmt.Fprintf(w, "nested in    %d\n", v.Parent)
	}
	if len(v.Nested) > 0 {
		ids := make([]string, len(v.Nested))
		for i, id := range v.Nested {
			ids[i] = strconv.FormatUint(id, 10)
		}
		fmt.Fprintf(w, "nested       %s\n", strings.Join(ids, " "))
	}
	if v.Lease != nil {
		fmt.Fprintf(w, "lease        %s\nexpires      %s (in %s)\n", v.Lease.Token, v.Lease.Expiration, v.Lease.Remaining)
	} else {
		fmt.Fprintf(w, "lease        (ended)\n")
	}
	if len(v.Participants) == 0 {
		fmt.Fprintf(w, "participants (none)\n")
	}
	for _, p := range v.Participants {
		fmt.Fprintf(w, "participant  %s crash=%d vote=%s notified=%v\n", p.Participant, p.CrashCount, p.Vote, p.Notified)
		if p.LastError != "" {
			fmt.Fprintf(w, "             failing since %s: %s\n", p.FailingSince, p.LastError)
		}
	}
}

// printTxnList prints one transaction a line.
func printTxnList(w io.Writer, vs []txnDescriptionView) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATE\tPARENT\tPARTICIPANTS\tLEASE LEFT")
	for _, v := range vs {
		parent, left := "-", "(ended)"
		if v.Parent != 0 {
			parent = strconv.FormatUint(v.Parent, 10)
		}
		if v.Lease != nil {
			left = v.Lease.Remaining
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s\n", v.ID, v.State, parent, len(v.Participants), left)
	}
	tw.Flush()
}

// parseTxnState parses --state: empty for any.
func parseTxnState(s string) (client.TransactionState, error) {
	switch strings.ToLower(s) {
	case "":
		return 0, nil
	case "active":
		return client.TxnActive, nil
	case "voting":
		return client.TxnVoting, nil
	case "committed":
		return client.TxnCommitted, nil
	case "aborted":
		return client.TxnAborted, nil
	}
	return 0, fmt.Errorf("--state %q: want active, voting, committed or aborted", s)
}

// parseTxnID parses a transaction id argument.
func parseTxnID(s string) (uint64, error) {
	id, err := strconv.ParseUint(s, 10, 64)
	if err != nil || id == 0 {
		return 0, fmt.Errorf("transaction id %q: want a decimal number from 1", s)
	}
	return id, nil
}

// txnError adds to a commit or abort error what the transaction's kind of
// failure means (TX.2.5).
func txnError(op string, err error) error {
	var de *djinn.Error
	switch {
	case errors.As(err, &de) && de.Kind == djinn.TimeoutExpired:
		outcome := "aborted"
		if de.Committed {
			outcome = "committed"
		}
		return fmt.Errorf("%w: the transaction %s; the manager keeps telling the participants", err, outcome)
	case errors.Is(err, djinn.ErrCannotCommit), errors.Is(err, djinn.ErrCannotAbort):
		return fmt.Errorf("cannot %s: %w", op, err)
	}
	return err
}

func (g *globals) txnCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "txn",
		Short: "Transactions of a server's transaction manager",
		Long: "Create, nest, inspect, commit and abort transactions (TX.2) of the transaction manager\n" +
			"of --server. A transaction is named by its id at that manager.",
	}
	commit := g.txnFinishCmd("commit", "committed", "Commit a transaction; --wait D also waits until its participants were told",
		func(ctx context.Context, tx *client.Transaction) error { return tx.Commit(ctx) },
		func(ctx context.Context, tx *client.Transaction, w time.Duration) error { return tx.CommitWait(ctx, w) })
	abort := g.txnFinishCmd("abort", "aborted", "Abort a transaction; --wait D also waits until its participants were told",
		func(ctx context.Context, tx *client.Transaction) error { return tx.Abort(ctx) },
		func(ctx context.Context, tx *client.Transaction, w time.Duration) error { return tx.AbortWait(ctx, w) })
	cmd.AddCommand(g.txnCreateCmd(), g.txnNestCmd(), g.txnShowCmd(), g.txnStateCmd(), commit, abort, g.txnLsCmd())
	return cmd
}

// withManager dials the server and finds its transaction manager.
func (g *globals) withManager(cmd *cobra.Command, fn func(ctx context.Context, m *client.TransactionManager) error) error {
	ctx := cmd.Context()
	c, err := g.dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	m, err := c.TransactionManager(ctx)
	if err != nil {
		return err
	}
	return fn(ctx, m)
}

func (g *globals) txnCreateCmd() *cobra.Command {
	var d string
	cmd := &cobra.Command{
		Use:   "create --duration D",
		Short: "Create a transaction; prints its id, its manager's reference and its lease token",
		Long: "Create a top-level transaction, ACTIVE, leased for D (TX.2.1). Renew the lease with\n" +
			"djinn lease renew while the work goes on: cancelling it, or letting it expire, aborts the transaction.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dur, err := djinn.ParseDuration(d)
			if err != nil {
				return err
			}
			return g.withManager(cmd, func(ctx context.Context, m *client.TransactionManager) error {
				tx, err := m.Create(ctx, dur)
				if err != nil {
					return err
				}
				v := txnView{ID: tx.ID(), Manager: m.Ref().String(), Lease: viewLease(tx.Lease())}
				return g.print(cmd.OutOrStdout(), v, func(w io.Writer) { printTxn(w, v) })
			})
		},
	}
	cmd.Flags().StringVar(&d, "duration", "any", "lease duration: a positive Go duration, forever or any")
	return cmd
}

func (g *globals) txnNestCmd() *cobra.Command {
	var d string
	cmd := &cobra.Command{
		Use:   "nest PARENT --duration D",
		Short: "Create a transaction nested in PARENT; prints its id, its manager's reference and its lease token",
		Long: "Create a transaction nested in transaction PARENT of the same manager (TX.2.2), ACTIVE, leased\n" +
			"for D. Its work becomes PARENT's when it commits and is undone when PARENT aborts; aborting\n" +
			"PARENT aborts it too.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			parent, err := parseTxnID(args[0])
			if err != nil {
				return err
			}
			dur, err := djinn.ParseDuration(d)
			if err != nil {
				return err
			}
			return g.withManager(cmd, func(ctx context.Context, m *client.TransactionManager) error {
				tx, err := m.CreateNested(ctx, parent, dur)
				if err != nil {
					return err
				}
				v := txnView{ID: tx.ID(), Parent: parent, Manager: m.Ref().String(), Lease: viewLease(tx.Lease())}
				return g.print(cmd.OutOrStdout(), v, func(w io.Writer) { printTxn(w, v) })
			})
		},
	}
	cmd.Flags().StringVar(&d, "duration", "any", "lease duration: a positive Go duration, forever or any")
	return cmd
}

// withTxn builds a command on transaction ID: it parses the id argument
// and calls run with the transaction.
func (g *globals) withTxn(use, short string, run func(ctx context.Context, cmd *cobra.Command, tx *client.Transaction) error) *cobra.Command {
	return &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseTxnID(args[0])
			if err != nil {
				return err
			}
			return g.withManager(cmd, func(ctx context.Context, m *client.TransactionManager) error {
				return run(ctx, cmd, m.Transaction(id))
			})
		},
	}
}

func (g *globals) txnShowCmd() *cobra.Command {
	return g.withTxn("show ID", "Show a transaction: its state, lease and participants with their votes", func(ctx context.Context, cmd *cobra.Command, tx *client.Transaction) error {
		d, err := tx.Describe(ctx)
		if err != nil {
			return err
		}
		v := viewTxnDescription(d)
		return g.print(cmd.OutOrStdout(), v, func(w io.Writer) { printTxnDescription(w, v) })
	})
}

func (g *globals) txnStateCmd() *cobra.Command {
	return g.withTxn("state ID", "Print a transaction's state (TX.2.4)", func(ctx context.Context, cmd *cobra.Command, tx *client.Transaction) error {
		st, err := tx.State(ctx)
		if err != nil {
			return err
		}
		return g.print(cmd.OutOrStdout(), map[string]any{"id": tx.ID(), "state": st.String()}, func(w io.Writer) { fmt.Fprintln(w, st) })
	})
}

// txnFinishCmd is commit or abort, with its --wait form (TX.2.5).
func (g *globals) txnFinishCmd(op, done, short string, now func(context.Context, *client.Transaction) error, wait func(context.Context, *client.Transaction, time.Duration) error) *cobra.Command {
	var waitFor string
	cmd := g.withTxn(op+" ID [--wait D]", short, func(ctx context.Context, cmd *cobra.Command, tx *client.Transaction) error {
		var err error
		if cmd.Flags().Changed("wait") {
			w, perr := time.ParseDuration(waitFor)
			if perr != nil {
				return fmt.Errorf("--wait %q: not a duration", waitFor)
			}
			err = wait(ctx, tx, w)
		} else {
			err = now(ctx, tx)
		}
		if err != nil {
			return txnError(op, err)
		}
		return g.print(cmd.OutOrStdout(), map[string]any{"id": tx.ID(), done: true}, func(w io.Writer) { fmt.Fprintln(w, done) })
	})
	cmd.Flags().StringVar(&waitFor, "wait", "", "also wait up to D until every participant has been told the outcome")
	return cmd
}

func (g *globals) txnLsCmd() *cobra.Command {
	var (
		state string
		max   int
	)
	cmd := &cobra.Command{
		Use:   "ls [--state S] [--max N]",
		Short: "List your transactions the manager knows: ACTIVE, VOTING, and decided ones it still remembers",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := parseTxnState(state)
			if err != nil {
				return err
			}
			if max < 0 {
				return fmt.Errorf("--max %d: must not be negative", max)
			}
			return g.withManager(cmd, func(ctx context.Context, m *client.TransactionManager) error {
				ds, err := m.List(ctx, st, max)
				if err != nil {
					return err
				}
				vs := make([]txnDescriptionView, len(ds))
				for i, d := range ds {
					vs[i] = viewTxnDescription(d)
				}
				return g.print(cmd.OutOrStdout(), vs, func(w io.Writer) { printTxnList(w, vs) })
			})
		},
	}
	cmd.Flags().StringVar(&state, "state", "", "only transactions in this state: active, voting, committed or aborted")
	cmd.Flags().IntVar(&max, "max", 0, "at most this many (0: all)")
	return cmd
}
