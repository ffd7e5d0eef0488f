package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/djinn-go/djinn/client"
)

// The transaction manager's commands. A transaction is named by its id at
// the manager of --server (or of --manager where a command takes it); its
// token, ID.SECRET, is the capability to work under it (txn state, txn
// nest, and --txn of kv and lock). Its creator commits, aborts and shows it
// by its id.

func (g *globals) txnCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "txn",
		Short: "Transactions of a server's transaction manager",
		Long: "Create, nest, inspect, commit and abort transactions of the transaction manager of --server " +
			"(the two-phase commit of the Jini Transaction specification, chapter TX.2). A transaction is named " +
			"by its id at that manager; its token, ID.SECRET, which create prints, is the capability to work " +
			"under it (state, nest, and --txn of kv and lock). Its creator commits, aborts and shows it by its id.",
	}
	cmd.AddCommand(g.txnCreateCmd(), g.txnNestCmd(), g.txnShowCmd(), g.txnStateCmd(),
		g.txnFinishCmd("commit", "committed"), g.txnFinishCmd("abort", "aborted"), g.txnLsCmd())
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
	m, err := whenReady(ctx, cmd.ErrOrStderr(), g.waitTimeout, serving(c, (*client.Status).TransactionManager))
	if err != nil {
		return err
	}
	return fn(ctx, m)
}

func (g *globals) txnCreateCmd() *cobra.Command {
	var d string
	cmd := &cobra.Command{
		Use:   "create [--lease D]",
		Short: "Create a transaction; prints its id, its token (ID.SECRET), its manager's reference and its lease",
		Long: "Create a top-level transaction, ACTIVE, leased for D. Renew the lease with djinn lease renew " +
			"while the work goes on: cancelling it, or letting it expire, aborts the transaction.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dur, err := parseLease(d)
			if err != nil {
				return err
			}
			return g.withManager(cmd, func(ctx context.Context, m *client.TransactionManager) error {
				tx, err := m.Create(ctx, dur)
				if err != nil {
					return err
				}
				g.noticeClamp(cmd, "transaction's lease", "djinn serve --txn-max-lease", dur, tx.Lease())
				v := viewTxn(tx, 0)
				return g.print(cmd.OutOrStdout(), v, func(w io.Writer) { printTxn(w, v) })
			})
		},
	}
	leaseFlag(cmd, &d, "the transaction")
	return cmd
}

func (g *globals) txnNestCmd() *cobra.Command {
	var d string
	cmd := &cobra.Command{
		Use:   "nest PARENT-TOKEN [--lease D]",
		Short: "Create a transaction nested in PARENT; prints its id, its token, its manager's reference and its lease",
		Long: "Create a transaction nested in transaction PARENT of the same manager, named by its token (ID.SECRET), " +
			"ACTIVE, leased for D. Its work becomes PARENT's when it commits and is undone when PARENT aborts; " +
			"aborting PARENT aborts it too.",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: cobra.NoFileCompletions, // a token: no listing has its secret
		RunE: func(cmd *cobra.Command, args []string) error {
			parent, secret, err := parseTxnToken(args[0])
			if err != nil {
				return err
			}
			dur, err := parseLease(d)
			if err != nil {
				return err
			}
			return g.withManager(cmd, func(ctx context.Context, m *client.TransactionManager) error {
				tx, err := m.CreateNested(ctx, parent, secret, dur)
				if err != nil {
					return err
				}
				g.noticeClamp(cmd, "transaction's lease", "djinn serve --txn-max-lease", dur, tx.Lease())
				v := viewTxn(tx, parent)
				return g.print(cmd.OutOrStdout(), v, func(w io.Writer) { printTxn(w, v) })
			})
		},
	}
	leaseFlag(cmd, &d, "the nested transaction")
	return cmd
}

// withTxn builds a command on transaction ID: it parses the id argument
// and calls run with the transaction.
func (g *globals) withTxn(use, short string, run func(ctx context.Context, cmd *cobra.Command, tx *client.Transaction) error) *cobra.Command {
	return &cobra.Command{
		Use:               use,
		Short:             short,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: g.completeIDs("txn"),
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
	return &cobra.Command{
		Use:               "state TOKEN",
		Short:             "Print a transaction's state, ACTIVE, VOTING, COMMITTED or ABORTED, given its token (ID.SECRET)",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: cobra.NoFileCompletions, // a token: no listing has its secret
		RunE: func(cmd *cobra.Command, args []string) error {
			id, secret, err := parseTxnToken(args[0])
			if err != nil {
				return err
			}
			return g.withManager(cmd, func(ctx context.Context, m *client.TransactionManager) error {
				st, err := m.TransactionOf(id, secret).State(ctx)
				if err != nil {
					return err
				}
				return g.print(cmd.OutOrStdout(), map[string]any{"id": jsonUint(id), "state": st.String()}, func(w io.Writer) { fmt.Fprintln(w, st) })
			})
		},
	}
}

// txnFinishCmd is commit or abort; with --wait D the command also waits,
// D at most, until every participant was told.
func (g *globals) txnFinishCmd(op, outcome string) *cobra.Command {
	var waitFor string
	cmd := g.withTxn(op+" ID [--wait D]", finishHelp[op], func(ctx context.Context, cmd *cobra.Command, tx *client.Transaction) error {
		wait, err := parseWait(waitFor)
		if err != nil {
			return err
		}
		if err := g.finish(cmd, tx, op, wait); err != nil {
			return err
		}
		return g.print(cmd.OutOrStdout(), map[string]any{"id": jsonUint(tx.ID()), "outcome": outcome, "participants_told": wait > 0},
			func(w io.Writer) { fmt.Fprintln(w, outcome) })
	})
	cmd.Long = finishHelp[op] + ". Without --wait the command returns once the outcome is decided (the manager " +
		"goes on telling the participants); with --wait D it also waits until every participant was told, D " +
		"at most, saying on stderr which participants have not answered while it waits, and why the " +
		"transaction aborted when it did."
	cmd.Flags().StringVar(&waitFor, "wait", "", "wait at most this long (a Go duration) until every participant was told the outcome")
	_ = cmd.RegisterFlagCompletionFunc("wait", completeWords("1s", "5s", "30s", "1m"))
	return cmd
}

var finishHelp = map[string]string{
	"commit": "Commit a transaction: every participant prepares, then commits; one that cannot aborts it",
	"abort":  "Abort a transaction: every participant undoes its work",
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
				return usageError{fmt.Errorf("--max %d: must not be negative", max)}
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
	_ = cmd.RegisterFlagCompletionFunc("state", completeWords("active", "voting", "committed", "aborted"))
	cmd.Flags().IntVar(&max, "max", 0, "at most this many (0: all)")
	return cmd
}
