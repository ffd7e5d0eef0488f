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
// lease token) or --txn TOKEN (a transaction's ID.SECRET) of --server's
// transaction manager, or of the manager --manager names.
type lockHolderFlags struct {
	owner   string
	txn     string
	manager string
}

func (f *lockHolderFlags) register(g *globals, cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.owner, "owner", "", "the lock owner: its name (djinn lock owner prints it) or its lease token")
	cmd.Flags().StringVar(&f.txn, "txn", "", "transaction token ID.SECRET (txn create prints it; of --server's transaction manager unless --manager)")
	cmd.Flags().StringVar(&f.manager, "manager", "", "reference (djinn://host:port/SERVICE/OBJECT) of the manager of --txn, when it is not --server's")
	_ = cmd.RegisterFlagCompletionFunc("txn", cobra.NoFileCompletions) // a token: no listing has its secret
}

// check parses what needs no server, so that bad flags fail before a
// dial.
func (f *lockHolderFlags) check() error {
	switch {
	case f.owner != "" && f.txn != "":
		return usageError{errors.New("--owner and --txn: name one holder, not both")}
	case f.owner == "" && f.txn == "":
		if f.manager != "" {
			return usageError{fmt.Errorf("--manager %s: names the manager of --txn, which is missing", f.manager)}
		}
		return usageError{errors.New("--owner or --txn: missing: name the lock's holder, a lock owner (djinn lock owner makes one) or a transaction token")}
	case f.owner != "":
		if f.manager != "" {
			return usageError{fmt.Errorf("--manager %s: names the manager of --txn, not of an --owner", f.manager)}
		}
		_, err := f.ownerCookie()
		return err
	}
	if _, _, err := parseTxnToken(f.txn); err != nil {
		return fmt.Errorf("--txn: %w", err)
	}
	if f.manager != "" {
		_, err := checkManagerRef(f.manager)
		return err
	}
	return nil
}

// ownerCookie reads --owner: the owner's name (its lease's cookie) or its
// lease token.
func (f *lockHolderFlags) ownerCookie() (djinn.ID, error) {
	if l, err := client.ParseToken(f.owner); err == nil {
		return l.Cookie(), nil
	}
	id, err := djinn.ParseID(f.owner)
	if err != nil {
		return djinn.ID{}, usageError{fmt.Errorf("--owner %q: neither an owner's name (32 hex digits, djinn lock owner prints it) nor its lease token", abbrev(f.owner))}
	}
	return id, nil
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

// txnOf returns the transaction whose token (a --txn value, ID.SECRET) is
// given, of --server's manager, or of the manager named by manager when it
// is not empty.
func txnOf(ctx context.Context, c *client.Client, token, manager string) (*client.Transaction, error) {
	n, secret, err := parseTxnToken(token)
	if err != nil {
		return nil, fmt.Errorf("--txn: %w", err)
	}
	if manager == "" {
		m, err := c.TransactionManager(ctx)
		if err != nil {
			return nil, err
		}
		return m.TransactionOf(n, secret), nil
	}
	ref, err := checkManagerRef(manager)
	if err != nil {
		return nil, err
	}
	return client.NewTransactionManager(c, ref).TransactionOf(n, secret), nil
}

func checkManagerRef(s string) (djinn.Ref, error) {
	ref, err := djinn.ParseRef(s)
	if err != nil {
		return ref, usageError{fmt.Errorf("--manager: %w", err)}
	}
	if ref.Service.IsZero() || ref.Object.IsZero() {
		return ref, usageError{fmt.Errorf("--manager %s: names no object (zero service or object id)", s)}
	}
	return ref, nil
}

// parseModeFlag parses a lock mode flag's value, naming the flag.
func parseModeFlag(flag, s string) (client.LockMode, error) {
	if s == "" {
		return 0, usageError{fmt.Errorf("--%s: missing: want ir, r, u, iw or w", flag)}
	}
	m, err := client.ParseLockMode(s)
	if err != nil {
		return 0, usageError{fmt.Errorf("--%s: %w", flag, err)}
	}
	return m, nil
}

// parseSetArg parses a SET argument.
func parseSetArg(s string) (djinn.ID, error) {
	id, err := djinn.ParseID(s)
	if err != nil {
		return id, usageError{fmt.Errorf("lock set: %w", err)}
	}
	return id, nil
}

// lockError names the server when it does not run the lock service.
func lockError(addr string, err error) error {
	if errors.Is(err, djinn.ErrUnsupported) {
		return fmt.Errorf("%s runs no lock service: %w", addr, err)
	}
	return err
}

// waitError turns a wait that ran out of --wait into one line.
func waitError(ctx context.Context, wait time.Duration, what string, err error) error {
	if wait > 0 && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return negative{fmt.Sprintf("%s: not granted within --wait %s (the request left the queue; lock show lists who holds and waits)", what, wait)}
	}
	return err
}

func (g *globals) lockCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "lock",
		Short: "Lock sets of a server's lock service: modes ir r u iw w, owners, transactions, fencing tokens",
		Long: "Create lock sets and lock owners, acquire, change and release locks (the OMG concurrency\n" +
			"service, bound to djinn transactions and leases). A lock is held by a lock owner (--owner, its\n" +
			"name or lease token: the locks go when the lease ends) or by a transaction (--txn: the locks go when it\n" +
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
	s, err := whenReady(ctx, cmd.ErrOrStderr(), g.waitTimeout, serving(c, (*client.Status).LockService))
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
		Use:   "create [--related SET] [--transactional] [--lease D]",
		Short: "Create a lock set; prints its id SET and its lease",
		Long: "Create a lock set leased for D (LockSetFactory.create). --transactional makes a set whose\n" +
			"locks only transactions hold; --related SET relates the new set to SET, of the same kind:\n" +
			"related sets share a lock coordinator and drop a transaction's locks together.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dur, err := parseLease(d)
			if err != nil {
				return err
			}
			var rel djinn.ID
			if related != "" {
				if rel, err = djinn.ParseID(related); err != nil {
					return usageError{fmt.Errorf("--related: %w", err)}
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
				g.noticeClamp(cmd, "set's lease", "the server's [lock] max-set-lease setting", dur, set.Lease())
				v := lockCreatedView{Set: set.ID().String(), Transactional: set.Transactional(), Lease: viewLease(set.Lease())}
				if related != "" {
					r := rel.String()
					v.Related = &r
				}
				return g.print(cmd.OutOrStdout(), v, func(w io.Writer) { printLockCreated(w, v) })
			})
		},
	}
	leaseFlag(cmd, &d, "the set")
	cmd.Flags().StringVar(&related, "related", "", "relate the new set to this set (same kind): they share a lock coordinator")
	cmd.Flags().BoolVar(&transactional, "transactional", false, "only transactions hold the set's locks")
	return cmd
}

func (g *globals) lockOwnerCmd() *cobra.Command {
	var d string
	cmd := &cobra.Command{
		Use:   "owner [--lease D]",
		Short: "Create a lock owner; prints its name, which --owner takes",
		Long: "Lease a lock owner for D: a client identity that holds locks in sets that are not\n" +
			"transactional. Its name is its lease's short name. Its locks last as long as its lease: renew\n" +
			"it with djinn lease renew NAME, cancel it with djinn lease cancel NAME to drop every lock it holds.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dur, err := parseLease(d)
			if err != nil {
				return err
			}
			return g.withLockService(cmd, func(ctx context.Context, _ *client.Client, s *client.LockService) error {
				o, err := s.CreateOwner(ctx, dur)
				if err != nil {
					return err
				}
				g.noticeClamp(cmd, "owner's lease", "djinn serve --lock-max-owner-lease", dur, o.Lease())
				v := lockOwnerView{Owner: o.Lease().Cookie().String(), Fingerprint: *viewLockHolder(client.HeldByOwner(o)).Owner, Lease: viewLease(o.Lease())}
				return g.print(cmd.OutOrStdout(), v, func(w io.Writer) { printLockOwner(w, v) })
			})
		},
	}
	leaseFlag(cmd, &d, "the owner")
	return cmd
}

// withHolder builds a command on SET and a holder: it checks the flags,
// dials, and calls run with the set and the holder.
func (g *globals) withHolder(use, short string, check func() error, run func(ctx context.Context, cmd *cobra.Command, set *client.LockSet, h client.LockHolder) error) *cobra.Command {
	f := &lockHolderFlags{}
	cmd := &cobra.Command{
		Use:               use,
		Short:             short,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: g.completeIDs("lock"),
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
	f.register(g, cmd)
	return cmd
}

// modeFlag registers a lock mode flag with its completion.
func modeFlag(cmd *cobra.Command, p *string, name, usage string) {
	cmd.Flags().StringVar(p, name, "", usage)
	_ = cmd.RegisterFlagCompletionFunc(name, completeWords("ir", "r", "u", "iw", "w"))
}

// waitFlag registers --wait, with --timeout as its old name.
func waitFlag(cmd *cobra.Command, p *string, usage string) {
	cmd.Flags().StringVar(p, "wait", "", usage)
	alias(cmd.Flags(), "timeout", "wait")
}

const acquireHelp = "Acquire a lock in SET in a mode, for a lock owner (--owner, its name or lease token) or a\n" +
	"transaction (--txn, its token ID.SECRET, of --server's transaction manager unless --manager names\n" +
	"another). It waits until the lock is granted, first come first served, or until --wait passes; with\n" +
	"--try it does not wait, but prints \"not granted\" and exits 1. Prints the grant's fencing token."

func (g *globals) lockAcquireCmd() *cobra.Command {
	var (
		modeS, waitS string
		try          bool
		mode         client.LockMode
		wait         time.Duration
	)
	check := func() (err error) {
		if mode, err = parseModeFlag("mode", modeS); err != nil {
			return err
		}
		wait, err = parseWait(waitS)
		return err
	}
	cmd := g.withHolder("acquire SET --mode ir|r|u|iw|w (--owner OWNER | --txn TOKEN [--manager REF]) [--try] [--wait D]",
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
					return negative{what + ": not granted (--try): held in a conflicting mode, or others wait first (lock show SET says who)"}
				}
				v = v.granted(fence)
				return g.print(cmd.OutOrStdout(), v, func(w io.Writer) { fmt.Fprintln(w, fence) })
			}
			ctx, cancel := withTimeout(ctx, wait)
			defer cancel()
			fence, err := set.Lock(ctx, h, mode)
			if err != nil {
				return waitError(ctx, wait, what, err)
			}
			v = v.granted(fence)
			return g.print(cmd.OutOrStdout(), v, func(w io.Writer) { fmt.Fprintln(w, fence) })
		})
	cmd.Long = acquireHelp
	modeFlag(cmd, &modeS, "mode", "lock mode: ir, r, u, iw or w")
	cmd.Flags().BoolVar(&try, "try", false, "do not wait: exit 1 if the lock cannot be granted at once")
	waitFlag(cmd, &waitS, "give up waiting after this long (a Go duration); default: wait until granted")
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
		modeS string
		mode  client.LockMode
	)
	check := func() (err error) {
		mode, err = parseModeFlag("mode", modeS)
		return err
	}
	cmd := g.withHolder("release SET --mode M (--owner OWNER | --txn TOKEN [--manager REF])", "Release one lock held in a mode", check,
		func(ctx context.Context, cmd *cobra.Command, set *client.LockSet, h client.LockHolder) error {
			if err := set.Unlock(ctx, h, mode); err != nil {
				return err
			}
			return g.print(cmd.OutOrStdout(), map[string]any{"set": set.ID().String(), "mode": mode.String(), "released": true},
				func(w io.Writer) { fmt.Fprintln(w, "released") })
		})
	modeFlag(cmd, &modeS, "mode", "lock mode: ir, r, u, iw or w")
	return cmd
}

func (g *globals) lockChangeCmd() *cobra.Command {
	var (
		from, to, waitS  string
		fromMode, toMode client.LockMode
		wait             time.Duration
	)
	check := func() (err error) {
		if fromMode, err = parseModeFlag("from", from); err != nil {
			return err
		}
		if toMode, err = parseModeFlag("to", to); err != nil {
			return err
		}
		wait, err = parseWait(waitS)
		return err
	}
	cmd := g.withHolder("change SET --from M --to M (--owner OWNER | --txn TOKEN [--manager REF]) [--wait D]",
		"Change one lock's mode, atomically; prints the new grant's fencing token", check,
		func(ctx context.Context, cmd *cobra.Command, set *client.LockSet, h client.LockHolder) error {
			ctx, cancel := withTimeout(ctx, wait)
			defer cancel()
			fence, err := set.ChangeMode(ctx, h, fromMode, toMode)
			if err != nil {
				return waitError(ctx, wait, fmt.Sprintf("change from %s to %s in set %s for %s", fromMode, toMode, set.ID(), h), err)
			}
			from := fromMode.String()
			v := lockGrantView{Set: set.ID().String(), Mode: toMode.String(), From: &from}.granted(fence)
			return g.print(cmd.OutOrStdout(), v, func(w io.Writer) { fmt.Fprintln(w, fence) })
		})
	cmd.Long = "Change one lock held in --from to --to (change_mode): the --from lock stays held until --to is\n" +
		"granted, waiting as acquire does. Prints the new grant's fencing token."
	modeFlag(cmd, &from, "from", "the mode of the lock held: ir, r, u, iw or w")
	modeFlag(cmd, &to, "to", "the new mode: ir, r, u, iw or w")
	waitFlag(cmd, &waitS, "give up waiting after this long (a Go duration); default: wait until granted")
	return cmd
}

func (g *globals) lockShowCmd() *cobra.Command {
	return &cobra.Command{
		Use:               "show SET",
		Short:             "Show a lock set: its holders with their modes and counts, its waiters in order",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: g.completeIDs("lock"),
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
		Use:               "drop SET --txn TOKEN [--manager REF]",
		Short:             "Drop every lock a transaction holds in SET and the sets related to it (drop_locks)",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: g.completeIDs("lock"),
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
				return g.print(cmd.OutOrStdout(), map[string]any{"set": id.String(), "transaction": jsonUint(tx.ID()), "dropped": true},
					func(w io.Writer) { fmt.Fprintln(w, "dropped") })
			})
		},
	}
	cmd.Flags().StringVar(&txn, "txn", "", "transaction token ID.SECRET (txn create prints it; of --server's transaction manager unless --manager)")
	cmd.Flags().StringVar(&manager, "manager", "", "reference (djinn://host:port/SERVICE/OBJECT) of the manager of --txn, when it is not --server's")
	return cmd
}

// checkDropFlags checks drop's --txn and --manager before a dial.
func checkDropFlags(txn, manager string) error {
	if txn == "" {
		return usageError{errors.New("--txn: missing: name the transaction whose locks to drop")}
	}
	if _, _, err := parseTxnToken(txn); err != nil {
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
		Use:               "validate SET FENCE",
		Short:             "Say whether a fencing token's grant still holds its lock: valid (exit 0) or invalid (exit 1)",
		Args:              cobra.ExactArgs(2),
		ValidArgsFunction: g.completeIDs("lock"),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseSetArg(args[0])
			if err != nil {
				return err
			}
			fence, err := strconv.ParseUint(args[1], 10, 64)
			if err != nil || fence == 0 {
				return usageError{fmt.Errorf("fencing token %q: want a decimal number from 1 (lock acquire prints one)", args[1])}
			}
			return g.withLockService(cmd, func(ctx context.Context, _ *client.Client, s *client.LockService) error {
				ok, err := s.Set(id).ValidateFence(ctx, fence)
				if err != nil {
					return err
				}
				if err := g.print(cmd.OutOrStdout(), map[string]any{"set": id.String(), "fence": jsonUint(fence), "valid": ok}, func(w io.Writer) {
					fmt.Fprintln(w, map[bool]string{true: "valid", false: "invalid"}[ok])
				}); err != nil || ok {
					return err
				}
				return negative{fmt.Sprintf("fencing token %d of set %s: invalid: that grant no longer holds its lock", fence, id)}
			})
		},
	}
}
