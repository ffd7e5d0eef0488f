package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/kv"
	"github.com/djinn-go/djinn/participant"
)

// kvTxnFlags name the transaction a kv command works under: --txn TOKEN
// (ID.SECRET) of --server's manager, or of the manager --manager names.
type kvTxnFlags struct {
	txn     string
	manager string
	g       *globals // --wait-timeout
}

func (f *kvTxnFlags) register(g *globals, cmd *cobra.Command) {
	f.g = g
	cmd.Flags().StringVar(&f.txn, "txn", "", "work under the transaction whose token (ID.SECRET, txn create prints it) this is (of --server's transaction manager unless --manager)")
	cmd.Flags().StringVar(&f.manager, "manager", "", "reference (djinn://host:port/SERVICE/OBJECT) of the manager of --txn, when it is not --server's")
	_ = cmd.RegisterFlagCompletionFunc("txn", cobra.NoFileCompletions) // a token: no listing has its secret
}

// tx returns the transaction the flags name, or nil for none. c is the
// client of --server, whose manager --txn names unless --manager is set;
// w is told when that server is still starting.
func (f *kvTxnFlags) tx(ctx context.Context, w io.Writer, c *client.Client) (*participant.Tx, error) {
	if f.txn == "" {
		if f.manager != "" {
			return nil, usageError{fmt.Errorf("--manager %s: names the manager of --txn, which is missing", f.manager)}
		}
		return nil, nil
	}
	id, secret, err := parseTxnToken(f.txn)
	if err != nil {
		return nil, fmt.Errorf("--txn: %w", err)
	}
	if f.manager == "" {
		m, err := whenReady(ctx, w, f.g.waitTimeout, c.TransactionManager)
		if err != nil {
			return nil, err
		}
		return &participant.Tx{Manager: m.Ref(), ID: id, Secret: secret}, nil
	}
	ref, err := djinn.ParseRef(f.manager)
	if err != nil {
		return nil, usageError{fmt.Errorf("--manager: %w", err)}
	}
	if ref.Service.IsZero() || ref.Object.IsZero() {
		return nil, usageError{fmt.Errorf("--manager %s: names no object (zero service or object id)", f.manager)}
	}
	if err := djinn.CheckEndpoint(ref.Endpoint); err != nil {
		return nil, usageError{fmt.Errorf("--manager %s: %w", f.manager, err)}
	}
	return &participant.Tx{Manager: ref, ID: id, Secret: secret}, nil
}

// kvError says which server an error of its key/value store came from
// when the server does not serve one.
func kvError(addr string, err error) error {
	if errors.Is(err, djinn.ErrUnsupported) {
		return fmt.Errorf("%s serves no key/value store (was it started with --kv=false?): %w", addr, err)
	}
	return err
}

// underTxn describes where a kv command worked, for its text output.
func underTxn(tx *participant.Tx) string {
	if tx == nil {
		return ""
	}
	return fmt.Sprintf(" under transaction %d", tx.ID)
}

type kvEntryView struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

func (g *globals) kvCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "kv",
		Short: "Read and write the key/value store of a server, under a transaction or not",
		Long: "Read and write the reference key/value participant of --server (the first address given): each\n" +
			"node's own store, not replicated, so the command calls that node, not its cluster's leader.\n" +
			"Without --txn a write applies at once and a read sees committed data. With --txn TOKEN the\n" +
			"command works under that transaction: its writes are seen only under the same --txn until the\n" +
			"transaction commits (djinn txn commit ID), and vanish if it aborts.",
	}
	cmd.AddCommand(g.kvPutCmd(), g.kvGetCmd(), g.kvDeleteCmd(), g.kvLsCmd())
	return cmd
}

// withKV builds a command that dials --server, resolves --txn and calls
// run with the server's key/value store.
func (g *globals) withKV(use, short string, args cobra.PositionalArgs, run func(ctx context.Context, cmd *cobra.Command, args []string, db *kv.Client, tx *participant.Tx) error) *cobra.Command {
	f := &kvTxnFlags{}
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  args,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			c, err := g.dial(ctx)
			if err != nil {
				return err
			}
			defer c.Close()
			tx, err := f.tx(ctx, cmd.ErrOrStderr(), c)
			if err != nil {
				return err
			}
			// The store is --server's own, not replicated: its calls go to
			// that server, not through the cluster to its leader.
			conn, err := c.Conn(c.Addr())
			if err != nil {
				return err
			}
			err = kvError(c.Addr(), run(ctx, cmd, args, kv.NewClient(conn), tx))
			if f.manager != "" && tx != nil {
				err = diagnoseManager(context.WithoutCancel(ctx), tx.Manager, err)
			}
			return err
		},
	}
	f.register(g, cmd)
	return cmd
}

func (g *globals) kvPutCmd() *cobra.Command {
	return g.withKV("put KEY VALUE [--txn TOKEN]", "Set KEY to VALUE", cobra.ExactArgs(2), func(ctx context.Context, cmd *cobra.Command, args []string, db *kv.Client, tx *participant.Tx) error {
		if err := db.Put(ctx, tx, args[0], []byte(args[1])); err != nil {
			return err
		}
		v := struct {
			Key    string  `json:"key"`
			Stored bool    `json:"stored"`
			Txn    *string `json:"transaction"` // null: none
		}{Key: args[0], Stored: true}
		if tx != nil {
			id := jsonUint(tx.ID)
			v.Txn = &id
		}
		return g.print(cmd.OutOrStdout(), v, func(w io.Writer) {
			if tx == nil {
				fmt.Fprintln(w, "stored")
				return
			}
			fmt.Fprintf(w, "stored%s: seen outside it once it commits\n", underTxn(tx))
		})
	})
}

func (g *globals) kvGetCmd() *cobra.Command {
	return g.withKV("get KEY [--txn TOKEN]", "Print KEY's value; fails if KEY is not there", cobra.ExactArgs(1), func(ctx context.Context, cmd *cobra.Command, args []string, db *kv.Client, tx *participant.Tx) error {
		value, found, err := db.Get(ctx, tx, args[0])
		if err != nil {
			return err
		}
		if !found {
			return negative{fmt.Sprintf("key %q: not found%s", args[0], underTxn(tx))}
		}
		return g.print(cmd.OutOrStdout(), kvEntryView{Key: args[0], Value: string(value)}, func(w io.Writer) {
			fmt.Fprintf(w, "%s\n", value)
		})
	})
}

func (g *globals) kvDeleteCmd() *cobra.Command {
	return g.withKV("delete KEY [--txn TOKEN]", "Delete KEY; exits 1 when it was not there", cobra.ExactArgs(1), func(ctx context.Context, cmd *cobra.Command, args []string, db *kv.Client, tx *participant.Tx) error {
		found, err := db.Delete(ctx, tx, args[0])
		if err != nil {
			return err
		}
		v := struct {
			Key     string `json:"key"`
			Deleted bool   `json:"deleted"`
		}{args[0], found}
		if err := g.print(cmd.OutOrStdout(), v, func(w io.Writer) {
			if found {
				fmt.Fprintf(w, "deleted%s\n", underTxn(tx))
			} else {
				fmt.Fprintf(w, "key %q was not there%s\n", args[0], underTxn(tx))
			}
		}); err != nil || found {
			return err
		}
		return negative{fmt.Sprintf("key %q: not found%s", args[0], underTxn(tx))}
	})
}

func (g *globals) kvLsCmd() *cobra.Command {
	return g.withKV("ls [PREFIX] [--txn TOKEN]", "List the keys that start with PREFIX, with their values", cobra.MaximumNArgs(1), func(ctx context.Context, cmd *cobra.Command, args []string, db *kv.Client, tx *participant.Tx) error {
		prefix := ""
		if len(args) == 1 {
			prefix = args[0]
		}
		es, err := db.List(ctx, tx, prefix)
		if err != nil {
			return err
		}
		vs := make([]kvEntryView, len(es))
		for i, e := range es {
			vs[i] = kvEntryView{Key: e.Key, Value: string(e.Value)}
		}
		return g.print(cmd.OutOrStdout(), vs, func(w io.Writer) {
			for _, e := range es {
				fmt.Fprintf(w, "%s\t%s\n", e.Key, e.Value)
			}
		})
	})
}
