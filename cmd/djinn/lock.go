package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
)

// lockHolderFlags name who holds a lock: --owner TOKEN (a lock owner's
// lease token) or --txn ID of --server's transaction manager, or of the
// manager --manager names.
type lockHolderFlags struct {
	owner   string
	txn     string
	manager string
}

func (f *lockHolderFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.owner, "owner", "", "the lock owner's lease token (djinn lock owner prints one)")
	cmd.Flags().StringVar(&f.txn, "txn", "", "transaction ID (of --server's transaction manager unless --manager)")
	cmd.Flags().StringVar(&f.manager, "manager", "", "reference (djinn://…) of the manager of --txn, when it is not --server's")
}

// check parses what needs no server, so that bad flags fail before a
// dial.
func (f *lockHolderFlags) check() error {
	switch {
	case f.owner != "" && f.txn != "":
		return errors.New("--owner and --txn: name one holder, not both")
	case f.owner == "" && f.txn == "":
		if f.manager != "" {
			return fmt.Errorf("--manager %s: names the manager of --txn, which is missing", f.manager)
		}
		return errors.New("--owner or --txn: missing: name the lock's holder, a lock owner's lease token or a transaction id")
	case f.owner != "":
		if f.manager != "" {
			return fmt.Errorf("--manager %s: names the manager of --txn, not of an --owner", f.manager)
		}
		_, err := f.ownerCookie()
		return err
	}
	if _, err := parseTxnID(f.txn); err != nil {
		return fmt.Errorf("--txn: %w", err)
	}
	if f.manager != "" {
		_, err := checkManagerRef(f.manager)
		return err
	}
	return nil
}

func (f *lockHolderFlags) ownerCookie() (djinn.ID, error) {
	l, err := client.ParseToken(f.owner)
	if err != nil {
		return djinn.ID{}, fmt.Errorf("--owner: %w", err)
	}
	return l.Cookie(), nil
}

// holder returns the holder the flags name, once check has passed; c is
// the client of --server, whose manager --txn names unless --manager is
// set.
func (f *lockHolderFlags) holder(ctx context.Context, c *client.Client) (client.LockHolder, error) {
	if f.owner != "" {
		cookie, err := f.ownerCookie()
		return client.HeldByOwnerCookie(cookie), err
	}
	tx, err := txnOf(ctx, c, f.txn, f.manager)
	if err != nil {
		return client.LockHolder{}, err
	}
	return client.HeldByTransaction(tx), nil
}

// txnOf returns transaction id (a --txn value) of --server's manager, or
// of the manager named by manager when it is not empty.
func txnOf(ctx context.Context, c *client.Client, id, manager string) (*client.Transaction, error) {
	n, err := parseTxnID(id)
	if err != nil {
		return nil, fmt.Errorf("--txn: %w", err)
	}
	if manager == "" {
		m, err := c.TransactionManager(ctx)
		if err != nil {
			return nil, err
		}
		return m.Transaction(n), nil
	}
	ref, err := checkManagerRef(manager)
	if err != nil {
		return nil, err
	}
	return client.NewTransactionManager(c, ref).Transaction(n), nil
}

func checkManagerRef(s string) (djinn.Ref, error) {
	ref, err := djinn.ParseRef(s)
	if err != nil {
		return ref, fmt.Errorf("--manager: %w", err)
	}
	if ref.Service.IsZero() || ref.Object.IsZero() {
		return ref, fmt.Errorf("--manager %s: names no object (zero service or object id)", s)
	}
	return ref, nil
}

// parseModeFlag parses a lock mode flag's value, naming the flag.
func parseModeFlag(flag, s string) (client.LockMode, error) {
	if s == "" {
		return 0, fmt.Errorf("--%s: missing: want ir, r, u, iw or w", flag)
	}
	m, err := client.ParseLockMode(s)
	if err != nil {
		return 0, fmt.Errorf("--%s: %w", flag, err)
	}
	return m, nil
}

// parseSetArg parses a SET argument.
func parseSetArg(s string) (djinn.ID, error) {
	id, err := djinn.ParseID(s)
	if err != nil {
		return id, fmt.Errorf("lock set: %w", err)
	}
	return id, nil
}

// parseTimeout parses --timeout: empty for none.
func parseTimeout(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("--timeout %q: not a duration", s)
	}
	if d <= 0 {
		return 0, fmt.Errorf("--timeout %s: must be positive", d)
	}
	return d, nil
}

// lockError names the server when it does not run the lock service.
func lockError(addr string, err error) error {
	if errors.Is(err, djinn.ErrUnsupported) {
		return fmt.Errorf("%s runs no lock service: %w", addr, err)
	}
	return err
}

// waitError turns a wait that ran out of --timeout into one line.
func waitError(ctx context.Context, timeout time.Duration, what string, err error) error {
	if timeout > 0 && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("%s: not granted within --timeout %s (the request left the queue)", what, timeout)
	}
	return err
}

func (g *globals) lockCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "lock",
		Short: "Lock sets of a server's lock service: modes ir r u iw w, owners, transactions, fencing tokens",
		Long: "Create lock sets and lock owners, acquire, change and release locks (the OMG concurrency\n" +
			"service, bound to djinn transactions and leases). A lock is held by a lock owner (--owner, its\n" +
			"lease token: the locks go when the lease ends) or by a transaction (--txn: the locks go when it\n" +
			"commits or aborts). Modes: ir (intention read), r (read), u (upgrade), iw (intention write),\n" +
			"w (write). Every grant prints a fencing token, which djinn lock validate checks.",
	}
	cmd.AddCommand(g.lockCreateCmd(), g.lockOwnerCmd(), g.lockAcquireCmd(), g.lockReleaseCmd(), g.lockChangeCmd(),
		g.lockShowCmd(), g.lockDropCmd(), g.lockValidateCmd())
	return cmd
}

// withLockService dials --server and finds its lock service.
func (g *globals) withLockService(cmd *cobra.Command, fn func(ctx context.Context, c *client.Client, s *client.LockService) error) error {
	ctx := cmd.Context()
	c, err := g.dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	s, err := c.LockService(ctx)
	if err != nil {
		return lockError(c.Addr(), err)
	}
	return fn(ctx, c, s)
}

func (g *globals) lockCreateCmd() *cobra.Command {
	var (
		d, related    string
		transactional bool
	)
	cmd := &cobra.Command{
		Use:   "create [--related SET] [--transactional] [--duration D]",
		Short: "Create a lock set; prints its id and its lease token",
		Long: "Create a lock set leased for D (LockSetFactory.create). --transactional makes a set whose\n" +
			"locks only transactions hold; --related SET relates the new set to SET, of the same kind:\n" +
			"related sets share a lock coordinator and drop a transaction's locks together.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dur, err := parseLeaseFlag("duration", d)
			if err != nil {
				return err
			}
			var rel djinn.ID
			if related != "" {
				if rel, err = djinn.ParseID(related); err != nil {
					return fmt.Errorf("--related: %w", err)
				}
			}
			return g.withLockService(cmd, func(ctx context.Context, _ *client.Client, s *client.LockService) error {
				opts := client.LockSetOptions{Transactional: transactional, Lease: dur}
				if related != "" {
					opts.Related = s.Set(rel)
				}
				set, err := s.CreateSet(ctx, opts)
				if err != nil {
					return err
				}
				v := lockCreatedView{Set: set.ID().String(), Transactional: set.Transactional(), Lease: viewLease(set.Lease())}
				if related != "" {
					v.Related = rel.String()
				}
				return g.print(cmd.OutOrStdout(), v, func(w io.Writer) { printLockCreated(w, v) })
			})
		},
	}
	cmd.Flags().StringVar(&d, "duration", "any", "the set's lease duration: a positive Go duration, forever or any")
	cmd.Flags().StringVar(&related, "related", "", "relate the new set to this set (same kind): they share a lock coordinator")
	cmd.Flags().BoolVar(&transactional, "transactional", false, "only transactions hold the set's locks")
	return cmd
}

// parseLeaseFlag parses a lease duration flag, naming the flag.
func parseLeaseFlag(flag, s string) (time.Duration, error) {
	dur, err := djinn.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("--%s: %w", flag, err)
	}
	if err := djinn.CheckLeaseDuration("--"+flag, dur); err != nil {
		return 0, err
	}
	return dur, nil
}

func (g *globals) lockOwnerCmd() *cobra.Command {
	var d string
	cmd := &cobra.Command{
		Use:   "owner --duration D",
		Short: "Create a lock owner; prints its lease token, which --owner takes",
		Long: "Lease a lock owner for D: a client identity that holds locks in sets that are not\n" +
			"transactional. Its locks last as long as its lease: renew it with djinn lease renew, cancel it\n" +
			"with djinn lease cancel to drop every lock it holds.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dur, err := parseLeaseFlag("duration", d)
			if err != nil {
				return err
			}
			return g.withLockService(cmd, func(ctx context.Context, _ *client.Client, s *client.LockService) error {
				o, err := s.CreateOwner(ctx, dur)
				if err != nil {
					return err
				}
				v := lockOwnerView{Owner: viewLockHolder(client.HeldByOwner(o)).Owner, Lease: viewLease(o.Lease())}
				return g.print(cmd.OutOrStdout(), v, func(w io.Writer) {
					fmt.Fprintf(w, "owner          %s\nlease          %s\nexpires        %s (in %s)\n", v.Owner, v.Lease.Token, v.Lease.Expiration, v.Lease.Remaining)
				})
			})
		},
	}
	cmd.Flags().StringVar(&d, "duration", "any", "the owner's lease duration: a positive Go duration, forever or any")
	return cmd
}

// withHolder builds a command on SET and a holder: it checks the flags,
// dials, and calls run with the set and the holder.
func (g *globals) withHolder(use, short string, check func() error, run func(ctx context.Context, cmd *cobra.Command, set *client.LockSet, h client.LockHolder) error) *cobra.Command {
	f := &lockHolderFlags{}
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseSetArg(args[0])
			if err != nil {
				return err
			}
			if err := check(); err != nil {
				return err
			}
			if err := f.check(); err != nil {
				return err
			}
			return g.withLockService(cmd, func(ctx context.Context, c *client.Client, s *client.LockService) error {
				h, err := f.holder(ctx, c)
				if err != nil {
					return err
				}
				return run(ctx, cmd, s.Set(id), h)
			})
		},
	}
	f.register(cmd)
	return cmd
}

func (g *globals) lockAcquireCmd() *cobra.Command {
	var (
		modeFlag, timeoutFlag string
		try                   bool
		mode                  client.LockMode
		timeout               time.Duration
	)
	check := func() (err error) {
		if mode, err = parseModeFlag("mode", modeFlag); err != nil {
			return err
		}
		timeout, err = parseTimeout(timeoutFlag)
		return err
	}
	cmd := g.withHolder("acquire SET --mode ir|r|u|iw|w (--owner TOKEN | --txn ID [--manager REF]) [--try] [--timeout D]",
		"Acquire a lock; prints its fencing token", check,
		func(ctx context.Context, cmd *cobra.Command, set *client.LockSet, h client.LockHolder) error {
			v := lockGrantView{Set: set.ID().String(), Mode: mode.String()}
			what := fmt.Sprintf("%s lock in set %s for %s", mode, set.ID(), h)
			if try {
				fence, ok, err := set.TryLock(ctx, h, mode)
				if err != nil {
					return err
				}
				if !ok {
					if err := g.print(cmd.OutOrStdout(), v, func(w io.Writer) { fmt.Fprintln(w, "not granted") }); err != nil {
						return err
					}
					return fmt.Errorf("%s: not granted (--try): held in a conflicting mode, or others wait first", what)
				}
				v.Granted, v.Fence = true, fence
				return g.print(cmd.OutOrStdout(), v, func(w io.Writer) { fmt.Fprintln(w, v.Fence) })
			}
			ctx, cancel := withTimeout(ctx, timeout)
			defer cancel()
			fence, err := set.Lock(ctx, h, mode)
			if err != nil {
				return waitError(ctx, timeout, what, err)
			}
			v.Granted, v.Fence = true, fence
			return g.print(cmd.OutOrStdout(), v, func(w io.Writer) { fmt.Fprintln(w, v.Fence) })
		})
	cmd.Long = "Acquire a lock in SET in a mode, for a lock owner (--owner, its lease token) or a transaction\n" +
		"(--txn ID, of --server's transaction manager unless --manager names another). It waits until the\n" +
		"lock is granted, first come first served, or until --timeout; with --try it does not wait, but\n" +
		"prints \"not granted\" and fails. Prints the grant's fencing token."
	cmd.Flags().StringVar(&modeFlag, "mode", "", "lock mode: ir, r, u, iw or w")
	cmd.Flags().BoolVar(&try, "try", false, "do not wait: fail if the lock cannot be granted at once")
	cmd.Flags().StringVar(&timeoutFlag, "timeout", "", "give up waiting after this long (a Go duration); default: wait")
	return cmd
}

// withTimeout is ctx bounded by d when d is positive.
func withTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if d <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, d)
}

func (g *globals) lockReleaseCmd() *cobra.Command {
	var (
		modeFlag string
		mode     client.LockMode
	)
	check := func() (err error) {
		mode, err = parseModeFlag("mode", modeFlag)
		return err
	}
	cmd := g.withHolder("release SET --mode M (--owner TOKEN | --txn ID [--manager REF])", "Release one lock held in a mode", check,
		func(ctx context.Context, cmd *cobra.Command, set *client.LockSet, h client.LockHolder) error {
			if err := set.Unlock(ctx, h, mode); err != nil {
				return err
			}
			return g.print(cmd.OutOrStdout(), map[string]any{"set": set.ID().String(), "mode": mode.String(), "released": true},
				func(w io.Writer) { fmt.Fprintln(w, "released") })
		})
	cmd.Flags().StringVar(&modeFlag, "mode", "", "lock mode: ir, r, u, iw or w")
	return cmd
}

func (g *globals) lockChangeCmd() *cobra.Command {
	var (
		from, to, timeoutFlag string
		fromMode, toMode      client.LockMode
		timeout               time.Duration
	)
	check := func() (err error) {
		if fromMode, err = parseModeFlag("from", from); err != nil {
			return err
		}
		if toMode, err = parseModeFlag("to", to); err != nil {
			return err
		}
		timeout, err = parseTimeout(timeoutFlag)
		return err
	}
	cmd := g.withHolder("change SET --from M --to M (--owner TOKEN | --txn ID [--manager REF]) [--timeout D]",
		"Change one lock's mode, atomically; prints the new grant's fencing token", check,
		func(ctx context.Context, cmd *cobra.Command, set *client.LockSet, h client.LockHolder) error {
			ctx, cancel := withTimeout(ctx, timeout)
			defer cancel()
			fence, err := set.ChangeMode(ctx, h, fromMode, toMode)
			if err != nil {
				return waitError(ctx, timeout, fmt.Sprintf("change from %s to %s in set %s for %s", fromMode, toMode, set.ID(), h), err)
			}
			v := lockGrantView{Set: set.ID().String(), Mode: toMode.String(), From: fromMode.String(), Granted: true, Fence: fence}
			return g.print(cmd.OutOrStdout(), v, func(w io.Writer) { fmt.Fprintln(w, fence) })
		})
	cmd.Long = "Change one lock held in --from to --to (change_mode): the --from lock stays held until --to is\n" +
		"granted, waiting as acquire does. Prints the new grant's fencing token."
	cmd.Flags().StringVar(&from, "from", "", "the mode of the lock held: ir, r, u, iw or w")
	cmd.Flags().StringVar(&to, "to", "", "the new mode: ir, r, u, iw or w")
	cmd.Flags().StringVar(&timeoutFlag, "timeout", "", "give up waiting after this long (a Go duration); default: wait")
	return cmd
}

func (g *globals) lockShowCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "show SET",
		Short: "Show a lock set: its holders with their modes and counts, its waiters in order",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseSetArg(args[0])
			if err != nil {
				return err
			}
			return g.withLockService(cmd, func(ctx context.Context, _ *client.Client, s *client.LockService) error {
				d, err := s.Set(id).Describe(ctx)
				if err != nil {
					return err
				}
				v := viewLockSet(d)
				return g.print(cmd.OutOrStdout(), v, func(w io.Writer) { printLockSet(w, v) })
			})
		},
	}
}

func (g *globals) lockDropCmd() *cobra.Command {
	var txn, manager string
	cmd := &cobra.Command{
		Use:   "drop SET --txn ID [--manager REF]",
		Short: "Drop every lock a transaction holds in SET and the sets related to it (drop_locks)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseSetArg(args[0])
			if err != nil {
				return err
			}
			if err := checkDropFlags(txn, manager); err != nil {
				return err
			}
			return g.withLockService(cmd, func(ctx context.Context, c *client.Client, s *client.LockService) error {
				tx, err := txnOf(ctx, c, txn, manager)
				if err != nil {
					return err
				}
				if err := s.Set(id).Coordinator(tx).DropLocks(ctx); err != nil {
					return err
				}
				return g.print(cmd.OutOrStdout(), map[string]any{"set": id.String(), "transaction": tx.ID(), "dropped": true},
					func(w io.Writer) { fmt.Fprintln(w, "dropped") })
			})
		},
	}
	cmd.Flags().StringVar(&txn, "txn", "", "transaction ID (of --server's transaction manager unless --manager)")
	cmd.Flags().StringVar(&manager, "manager", "", "reference (djinn://…) of the manager of --txn, when it is not --server's")
	return cmd
}

// checkDropFlags checks drop's --txn and --manager before a dial.
func checkDropFlags(txn, manager string) error {
	if txn == "" {
		return errors.New("--txn: missing: name the transaction whose locks to drop")
	}
	if _, err := parseTxnID(txn); err != nil {
		return fmt.Errorf("--txn: %w", err)
	}
	if manager != "" {
		if _, err := checkManagerRef(manager); err != nil {
			return err
		}
	}
	return nil
}

func (g *globals) lockValidateCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "validate SET FENCE",
		Short: "Print whether a fencing token's grant still holds its lock: valid or invalid",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseSetArg(args[0])
			if err != nil {
				return err
			}
			fence, err := strconv.ParseUint(args[1], 10, 64)
			if err != nil || fence == 0 {
				return fmt.Errorf("fencing token %q: want a decimal number from 1", args[1])
			}
			return g.withLockService(cmd, func(ctx context.Context, _ *client.Client, s *client.LockService) error {
				ok, err := s.Set(id).ValidateFence(ctx, fence)
				if err != nil {
					return err
				}
				return g.print(cmd.OutOrStdout(), map[string]any{"set": id.String(), "fence": fence, "valid": ok}, func(w io.Writer) {
					if ok {
						fmt.Fprintln(w, "valid")
					} else {
						fmt.Fprintln(w, "invalid")
					}
				})
			})
		},
	}
}
