package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/kv"
	"github.com/djinn-go/djinn/participant"
)

// The transfer demo's transaction lease, and how long its commit waits for
// both participants to be told before the balances are read back.
const (
	transferLease      = time.Minute
	transferCommitWait = 10 * time.Second
)

// secondServer is how to start the second participant the transfer needs.
const secondServer = "djinn serve --data-dir d2 --listen 127.0.0.1:4171 --admin 127.0.0.1:4172 --raft 127.0.0.1:4173 --discovery 127.0.0.1:4170"

func (g *globals) demoCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Demonstrations that run against servers already started",
	}
	cmd.AddCommand(g.demoTransferCmd())
	return cmd
}

// transferSide is one of the two balances of a transfer.
type transferSide struct {
	Address string `json:"address"`
	// Created is whether the demo wrote the initial balance first.
	Created bool `json:"created"`
	// Before is the balance read under the transaction; After the one
	// read outside it once it committed.
	Before int64 `json:"before"`
	After  int64 `json:"after"`

	db *kv.Client
}

type transferView struct {
	Transaction string       `json:"transaction"`
	Manager     string       `json:"manager"`
	Key         string       `json:"key"`
	Amount      int64        `json:"amount"`
	From        transferSide `json:"from"`
	To          transferSide `json:"to"`
}

// transferFlags are demo transfer's flags.
type transferFlags struct {
	from, to, key   string
	amount, initial int64
}

// check checks the flags, --from defaulting to server.
func (f *transferFlags) check(server string) error {
	if f.from == "" {
		f.from = server
	}
	switch {
	case f.to == "":
		return fmt.Errorf("--to: missing: the transfer needs a second key/value store in another process; start one with %q and pass --to 127.0.0.1:4171", secondServer)
	case f.amount <= 0:
		return fmt.Errorf("--amount %d: must be positive", f.amount)
	case f.initial < 0:
		return fmt.Errorf("--initial %d: must not be negative", f.initial)
	}
	if err := djinn.CheckEndpoint(f.from); err != nil {
		return fmt.Errorf("--from: %w", err)
	}
	if err := djinn.CheckEndpoint(f.to); err != nil {
		return fmt.Errorf("--to: %w", err)
	}
	if f.from == f.to {
		return fmt.Errorf("--from and --to are both %s: the transfer needs two key/value stores", f.to)
	}
	return nil
}

const transferHelp = "Move --amount from the balance at --from (default: --server) to the balance at --to, two\n" +
	"key/value participants in separate processes, under one transaction of --server's manager:\n" +
	"read both balances under the transaction, write both, commit, then read both again outside it.\n" +
	"A balance that is not there yet is set to --initial first, outside any transaction. If --from's\n" +
	"balance is less than --amount the transaction aborts and nothing moves.\n\n" +
	"The second server is another djinn serve, for example:\n  " + secondServer

func (g *globals) demoTransferCmd() *cobra.Command {
	f := &transferFlags{}
	cmd := &cobra.Command{
		Use:   "transfer --to ADDR [--from ADDR] [--amount N]",
		Short: "Move value between the key/value stores of two servers under one transaction",
		Long:  transferHelp,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.check(g.server); err != nil {
				return usageError{err}
			}
			c, err := g.dial(cmd.Context())
			if err != nil {
				return err
			}
			defer c.Close()
			v, err := f.run(cmd.Context(), cmd.ErrOrStderr(), g, c)
			if err != nil {
				return err
			}
			return g.print(cmd.OutOrStdout(), v, func(w io.Writer) { printTransfer(w, v, f.initial) })
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&f.from, "from", "", "gRPC address of the server whose key/value store pays (default --server)")
	fs.StringVar(&f.to, "to", "", "gRPC address of the server whose key/value store is paid (another djinn serve)")
	fs.Int64Var(&f.amount, "amount", 10, "how much to move")
	fs.StringVar(&f.key, "key", "balance", "the key that holds the balance at both")
	fs.Int64Var(&f.initial, "initial", 100, "the balance written, outside any transaction, where there is none yet")
	return cmd
}

// run does the transfer under a transaction of c's manager and reads the
// balances back once it committed; w is told when c's server is still
// starting.
func (f *transferFlags) run(ctx context.Context, w io.Writer, g *globals, c *client.Client) (*transferView, error) {
	m, err := whenReady(ctx, w, g.waitTimeout, serving(c, (*client.Status).TransactionManager))
	if err != nil {
		return nil, err
	}
	v := &transferView{Manager: m.Ref().String(), Key: f.key, Amount: f.amount, From: transferSide{Address: f.from}, To: transferSide{Address: f.to}}
	for i, s := range []*transferSide{&v.From, &v.To} {
		conn, err := c.Conn(s.Address)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.Address, err)
		}
		s.db = kv.NewClient(conn)
		if s.Created, err = ensureBalance(ctx, s, f.key, f.initial); err != nil {
			if djinn.KindOf(err) == djinn.Unavailable {
				flag := [...]string{"--from", "--to"}[i]
				return nil, fmt.Errorf("%s %s: no key/value store answers there: give the gRPC address of a running djinn serve (djinn demo transfer --help shows how to start one) (%w)", flag, s.Address, err)
			}
			return nil, err
		}
	}
	tx, err := m.Create(ctx, transferLease)
	if err != nil {
		return nil, err
	}
	v.Transaction = jsonUint(tx.ID())
	if err := transfer(ctx, tx, v); err != nil {
		return nil, abortTransfer(ctx, tx, err)
	}
	if err := tx.CommitWait(ctx, transferCommitWait); err != nil {
		return nil, g.finishError(ctx, tx, "commit", transferCommitWait, err)
	}
	for _, s := range []*transferSide{&v.From, &v.To} {
		if s.After, _, err = readBalance(ctx, s, nil, f.key); err != nil {
			return nil, err
		}
	}
	return v, nil
}

// abortTransfer aborts a transfer that failed with err, also on the way
// out after an interrupt, and says what happened to the transaction:
// nothing moved.
func abortTransfer(ctx context.Context, tx *client.Transaction, err error) error {
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), transferCommitWait)
	defer cancel()
	if aerr := tx.Abort(actx); aerr != nil && !errors.Is(aerr, djinn.ErrCannotAbort) {
		return fmt.Errorf("%w; aborting transaction %d: %v", err, tx.ID(), aerr)
	}
	return fmt.Errorf("%w: transaction %d aborted, nothing moved", err, tx.ID())
}

func printTransfer(w io.Writer, v *transferView, initial int64) {
	fmt.Fprintf(w, "transaction %s of %s\n", v.Transaction, v.Manager)
	fmt.Fprintf(w, "moved %d of %q from %s to %s: committed\n", v.Amount, v.Key, v.From.Address, v.To.Address)
	for _, s := range []struct {
		name string
		side transferSide
	}{{"from", v.From}, {"to", v.To}} {
		created := ""
		if s.side.Created {
			created = fmt.Sprintf(" (set to %d first)", initial)
		}
		fmt.Fprintf(w, "%-4s %s  %d -> %d%s\n", s.name, s.side.Address, s.side.Before, s.side.After, created)
	}
}

// ensureBalance writes the initial balance at s, without a transaction,
// if it has none; it reports whether it wrote one.
func ensureBalance(ctx context.Context, s *transferSide, key string, initial int64) (bool, error) {
	if _, found, err := readBalance(ctx, s, nil, key); err != nil || found {
		return false, err
	}
	if err := s.db.Put(ctx, nil, key, []byte(strconv.FormatInt(initial, 10))); err != nil {
		return false, kvErrorAt(s.Address, err)
	}
	return true, nil
}

// kvErrorAt says which server's key/value store err came from.
func kvErrorAt(addr string, err error) error {
	if errors.Is(err, djinn.ErrUnsupported) {
		return kvError(addr, err)
	}
	return fmt.Errorf("%s: %w", addr, err)
}

// readBalance reads the balance at s, under tx if it is not nil.
func readBalance(ctx context.Context, s *transferSide, tx *participant.Tx, key string) (int64, bool, error) {
	raw, found, err := s.db.Get(ctx, tx, key)
	if err != nil {
		return 0, false, kvErrorAt(s.Address, err)
	}
	if !found {
		return 0, false, nil
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("key %q at %s holds %q: not a whole number", key, s.Address, raw)
	}
	return n, true, nil
}

// transfer does the transfer's work under tx: it reads both balances and
// writes the new ones. An error leaves the transaction to be aborted.
func transfer(ctx context.Context, tx *client.Transaction, v *transferView) error {
	ptx := participant.TxOf(tx)
	for _, s := range []*transferSide{&v.From, &v.To} {
		n, found, err := readBalance(ctx, s, ptx, v.Key)
		if err != nil {
			return err
		}
		if !found {
			return fmt.Errorf("key %q at %s: deleted since it was written", v.Key, s.Address)
		}
		s.Before = n
	}
	if v.From.Before < v.Amount {
		return fmt.Errorf("balance at %s is %d, less than %d", v.From.Address, v.From.Before, v.Amount)
	}
	if v.To.Before > math.MaxInt64-v.Amount {
		return fmt.Errorf("balance at %s is %d: adding %d overflows", v.To.Address, v.To.Before, v.Amount)
	}
	for _, w := range []struct {
		s *transferSide
		n int64
	}{{&v.From, v.From.Before - v.Amount}, {&v.To, v.To.Before + v.Amount}} {
		if err := w.s.db.Put(ctx, ptx, v.Key, []byte(strconv.FormatInt(w.n, 10))); err != nil {
			return kvErrorAt(w.s.Address, err)
		}
	}
	return nil
}
