package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
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

type lockSetView struct {
	Set           string         `json:"set"`
	Transactional bool           `json:"transactional"`
	Related       []string       `json:"related"`
	Lease         *leaseView     `json:"lease,omitempty"`
	LastFence     uint64         `json:"last_fence"`
	Holders       []lockHoldView `json:"holders"`
	Waiters       []lockWaitView `json:"waiters"`
}

// lockHolderView names a holder: an owner by the fingerprint of its
// lease's cookie (what djinn lock owner and djinn lease show print), a
// transaction by its id and its manager's reference.
type lockHolderView struct {
	Owner       string `json:"owner,omitempty"`
	Transaction uint64 `json:"transaction,omitempty"`
	Manager     string `json:"manager,omitempty"`
}

type lockHoldView struct {
	lockHolderView
	Locks  map[string]int `json:"locks"` // mode: count
	Fences []uint64       `json:"fences"`
}

type lockWaitView struct {
	lockHolderView
	Mode    string `json:"mode"`
	From    string `json:"from,omitempty"` // a change of mode: the mode held
	Request uint64 `json:"request"`
}

func viewLockHolder(h client.LockHolder) lockHolderView {
	if tx := h.Transaction(); tx != nil {
		return lockHolderView{Transaction: tx.ID(), Manager: managerName(tx.Manager().Ref())}
	}
	return lockHolderView{Owner: strings.TrimPrefix(h.String(), "owner ")}
}

// managerName prints a manager's reference; one known by its identity
// alone prints as SERVICE/OBJECT.
func managerName(r djinn.Ref) string {
	if r.Endpoint == "" {
		return r.Service.String() + "/" + r.Object.String()
	}
	return r.String()
}

func (v lockHolderView) String() string {
	if v.Owner != "" {
		return "owner " + v.Owner
	}
	return fmt.Sprintf("transaction %d of %s", v.Transaction, v.Manager)
}

func viewLockSet(d *client.LockSetDescription) lockSetView {
	v := lockSetView{Set: d.ID.String(), Transactional: d.Transactional, LastFence: d.LastFence,
		Related: []string{}, Holders: []lockHoldView{}, Waiters: []lockWaitView{}}
	for _, r := range d.Related {
		v.Related = append(v.Related, r.String())
	}
	if d.Lease != nil {
		l := viewLease(d.Lease)
		v.Lease = &l
	}
	for _, h := range d.Holders {
		hv := lockHoldView{lockHolderView: viewLockHolder(h.Holder), Locks: map[string]int{}, Fences: h.Fences}
		if hv.Fences == nil {
			hv.Fences = []uint64{}
		}
		for m, n := range h.Counts {
			hv.Locks[m.String()] = n
		}
		v.Holders = append(v.Holders, hv)
	}
	for _, w := range d.Waiters {
		wv := lockWaitView{lockHolderView: viewLockHolder(w.Holder), Mode: w.Mode.String(), Request: w.RequestID}
		if w.Held != 0 {
			wv.From = w.Held.String()
		}
		v.Waiters = append(v.Waiters, wv)
	}
	return v
}

func printLockSet(w io.Writer, v lockSetView) {
	fmt.Fprintf(w, "set            %s\ntransactional  %v\n", v.Set, v.Transactional)
	if len(v.Related) == 0 {
		fmt.Fprintf(w, "related        (none)\n")
	} else {
		fmt.Fprintf(w, "related        %s\n", strings.Join(v.Related, " "))
	}
	if v.Lease != nil {
		fmt.Fprintf(w, "lease          %s\nexpires        %s (in %s)\n", v.Lease.Token, v.Lease.Expiration, v.Lease.Remaining)
	} else {
		fmt.Fprintf(w, "lease          (ended)\n")
	}
	fmt.Fprintf(w, "last fence     %d\n", v.LastFence)
	if len(v.Holders) == 0 {
		fmt.Fprintf(w, "holders        (none)\n")
	}
	for _, h := range v.Holders {
		var locks []string
		for _, m := range client.LockModes() {
			if n := h.Locks[m.String()]; n > 0 {
				locks = append(locks, fmt.Sprintf("%s=%d", m, n))
			}
		}
		fences := make([]string, len(h.Fences))
		for i, f := range h.Fences {
			fences[i] = strconv.FormatUint(f, 10)
		}
		fmt.Fprintf(w, "holder         %s  %s  fences %s\n", h.lockHolderView, strings.Join(locks, " "), strings.Join(fences, " "))
	}
	if len(v.Waiters) == 0 {
		fmt.Fprintf(w, "waiters        (none)\n")
	}
	for i, wt := range v.Waiters {
		mode := wt.Mode
		if wt.From != "" {
			mode = wt.From + "->" + wt.Mode
		}
		fmt.Fprintf(w, "waiter %-7d %s  %s  request %d\n", i+1, wt.lockHolderView, mode, wt.Request)
	}
}

type lockCreatedView struct {
	Set           string    `json:"set"`
	Transactional bool      `json:"transactional"`
	Related       string    `json:"related,omitempty"`
	Lease         leaseView `json:"lease"`
}

type lockOwnerView struct {
	Owner string    `json:"owner"` // the fingerprint of its lease's cookie
	Lease leaseView `json:"lease"`
}

type lockGrantView struct {
	Set     string `json:"set"`
	Mode    string `json:"mode"`
	From    string `json:"from,omitempty"` // change: the mode given up
	Granted bool   `json:"granted"`
	Fence   uint64 `json:"fence,omitempty"`
}

func newLock(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "lock",
		Short: "Lock sets of a server's lock service: modes ir r u iw w, owners, transactions, fencing tokens",
		Long: "Create lock sets and lock owners, acquire, change and release locks (the OMG concurrency\n" +
			"service, bound to djinn transactions and leases). A lock is held by a lock owner (--owner, its\n" +
			"lease token: the locks go when the lease ends) or by a transaction (--txn: the locks go when it\n" +
			"commits or aborts). Modes: ir (intention read), r (read), u (upgrade), iw (intention write),\n" +
			"w (write). Every grant prints a fencing token, which djinn lock validate checks.",
	}
	// withService dials --server and finds its lock service.
	withService := func(cmd *cobra.Command, fn func(ctx context.Context, c *client.Client, s *client.LockService) error) error {
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

	var (
		createDur, related string
		transactional      bool
	)
	create := &cobra.Command{
		Use:   "create [--related SET] [--transactional] [--duration D]",
		Short: "Create a lock set; prints its id and its lease token",
		Long: "Create a lock set leased for D (LockSetFactory.create). --transactional makes a set whose\n" +
			"locks only transactions hold; --related SET relates the new set to SET, of the same kind:\n" +
			"related sets share a lock coordinator and drop a transaction's locks together.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dur, err := djinn.ParseDuration(createDur)
			if err != nil {
				return fmt.Errorf("--duration: %w", err)
			}
			if err := djinn.CheckLeaseDuration("--duration", dur); err != nil {
				return err
			}
			var rel djinn.ID
			if related != "" {
				if rel, err = djinn.ParseID(related); err != nil {
					return fmt.Errorf("--related: %w", err)
				}
			}
			return withService(cmd, func(ctx context.Context, _ *client.Client, s *client.LockService) error {
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
				return g.print(cmd.OutOrStdout(), v, func(w io.Writer) {
					fmt.Fprintf(w, "set            %s\ntransactional  %v\n", v.Set, v.Transactional)
					if v.Related != "" {
						fmt.Fprintf(w, "related        %s\n", v.Related)
					}
					fmt.Fprintf(w, "lease          %s\nexpires        %s (in %s)\n", v.Lease.Token, v.Lease.Expiration, v.Lease.Remaining)
				})
			})
		},
	}
	create.Flags().StringVar(&createDur, "duration", "any", "the set's lease duration: a positive Go duration, forever or any")
	create.Flags().StringVar(&related, "related", "", "relate the new set to this set (same kind): they share a lock coordinator")
	create.Flags().BoolVar(&transactional, "transactional", false, "only transactions hold the set's locks")

	var ownerDur string
	owner := &cobra.Command{
		Use:   "owner --duration D",
		Short: "Create a lock owner; prints its lease token, which --owner takes",
		Long: "Lease a lock owner for D: a client identity that holds locks in sets that are not\n" +
			"transactional. Its locks last as long as its lease: renew it with djinn lease renew, cancel it\n" +
			"with djinn lease cancel to drop every lock it holds.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dur, err := djinn.ParseDuration(ownerDur)
			if err != nil {
				return fmt.Errorf("--duration: %w", err)
			}
			if err := djinn.CheckLeaseDuration("--duration", dur); err != nil {
				return err
			}
			return withService(cmd, func(ctx context.Context, _ *client.Client, s *client.LockService) error {
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
	owner.Flags().StringVar(&ownerDur, "duration", "any", "the owner's lease duration: a positive Go duration, forever or any")

	// withHolder builds a command on SET and a holder: it checks the
	// flags, dials, and calls run with the set and the holder.
	withHolder := func(use, short string, check func() error, run func(ctx context.Context, cmd *cobra.Command, set *client.LockSet, h client.LockHolder) error) *cobra.Command {
		f := &lockHolderFlags{}
		sub := &cobra.Command{
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
				return withService(cmd, func(ctx context.Context, c *client.Client, s *client.LockService) error {
					h, err := f.holder(ctx, c)
					if err != nil {
						return err
					}
					return run(ctx, cmd, s.Set(id), h)
				})
			},
		}
		f.register(sub)
		return sub
	}

	var (
		acqMode, acqTimeout string
		try                 bool
		mode                client.LockMode
		timeout             time.Duration
	)
	acquire := withHolder("acquire SET --mode ir|r|u|iw|w (--owner TOKEN | --txn ID [--manager REF]) [--try] [--timeout D]",
		"Acquire a lock; prints its fencing token",
		func() (err error) {
			if mode, err = parseModeFlag("mode", acqMode); err != nil {
				return err
			}
			timeout, err = parseTimeout(acqTimeout)
			return err
		},
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
			} else {
				if timeout > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, timeout)
					defer cancel()
				}
				fence, err := set.Lock(ctx, h, mode)
				if err != nil {
					return waitError(ctx, timeout, what, err)
				}
				v.Granted, v.Fence = true, fence
			}
			return g.print(cmd.OutOrStdout(), v, func(w io.Writer) { fmt.Fprintln(w, v.Fence) })
		})
	acquire.Long = "Acquire a lock in SET in a mode, for a lock owner (--owner, its lease token) or a transaction\n" +
		"(--txn ID, of --server's transaction manager unless --manager names another). It waits until the\n" +
		"lock is granted, first come first served, or until --timeout; with --try it does not wait, but\n" +
		"prints \"not granted\" and fails. Prints the grant's fencing token."
	acquire.Flags().StringVar(&acqMode, "mode", "", "lock mode: ir, r, u, iw or w")
	acquire.Flags().BoolVar(&try, "try", false, "do not wait: fail if the lock cannot be granted at once")
	acquire.Flags().StringVar(&acqTimeout, "timeout", "", "give up waiting after this long (a Go duration); default: wait")

	var (
		relMode string
		rmode   client.LockMode
	)
	release := withHolder("release SET --mode M (--owner TOKEN | --txn ID [--manager REF])", "Release one lock held in a mode",
		func() (err error) {
			rmode, err = parseModeFlag("mode", relMode)
			return err
		},
		func(ctx context.Context, cmd *cobra.Command, set *client.LockSet, h client.LockHolder) error {
			if err := set.Unlock(ctx, h, rmode); err != nil {
				return err
			}
			return g.print(cmd.OutOrStdout(), map[string]any{"set": set.ID().String(), "mode": rmode.String(), "released": true},
				func(w io.Writer) { fmt.Fprintln(w, "released") })
		})
	release.Flags().StringVar(&relMode, "mode", "", "lock mode: ir, r, u, iw or w")

	var (
		from, to, chTimeout string
		fromMode, toMode    client.LockMode
		chWait              time.Duration
	)
	change := withHolder("change SET --from M --to M (--owner TOKEN | --txn ID [--manager REF]) [--timeout D]",
		"Change one lock's mode, atomically; prints the new grant's fencing token",
		func() (err error) {
			if fromMode, err = parseModeFlag("from", from); err != nil {
				return err
			}
			if toMode, err = parseModeFlag("to", to); err != nil {
				return err
			}
			chWait, err = parseTimeout(chTimeout)
			return err
		},
		func(ctx context.Context, cmd *cobra.Command, set *client.LockSet, h client.LockHolder) error {
			if chWait > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, chWait)
				defer cancel()
			}
			fence, err := set.ChangeMode(ctx, h, fromMode, toMode)
			if err != nil {
				return waitError(ctx, chWait, fmt.Sprintf("change from %s to %s in set %s for %s", fromMode, toMode, set.ID(), h), err)
			}
			v := lockGrantView{Set: set.ID().String(), Mode: toMode.String(), From: fromMode.String(), Granted: true, Fence: fence}
			return g.print(cmd.OutOrStdout(), v, func(w io.Writer) { fmt.Fprintln(w, fence) })
		})
	change.Long = "Change one lock held in --from to --to (change_mode): the --from lock stays held until --to is\n" +
		"granted, waiting as acquire does. Prints the new grant's fencing token."
	change.Flags().StringVar(&from, "from", "", "the mode of the lock held: ir, r, u, iw or w")
	change.Flags().StringVar(&to, "to", "", "the new mode: ir, r, u, iw or w")
	change.Flags().StringVar(&chTimeout, "timeout", "", "give up waiting after this long (a Go duration); default: wait")

	show := &cobra.Command{
		Use:   "show SET",
		Short: "Show a lock set: its holders with their modes and counts, its waiters in order",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseSetArg(args[0])
			if err != nil {
				return err
			}
			return withService(cmd, func(ctx context.Context, _ *client.Client, s *client.LockService) error {
				d, err := s.Set(id).Describe(ctx)
				if err != nil {
					return err
				}
				v := viewLockSet(d)
				return g.print(cmd.OutOrStdout(), v, func(w io.Writer) { printLockSet(w, v) })
			})
		},
	}

	var dropTxn, dropManager string
	drop := &cobra.Command{
		Use:   "drop SET --txn ID [--manager REF]",
		Short: "Drop every lock a transaction holds in SET and the sets related to it (drop_locks)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseSetArg(args[0])
			if err != nil {
				return err
			}
			if dropTxn == "" {
				return errors.New("--txn: missing: name the transaction whose locks to drop")
			}
			if _, err := parseTxnID(dropTxn); err != nil {
				return fmt.Errorf("--txn: %w", err)
			}
			if dropManager != "" {
				if _, err := checkManagerRef(dropManager); err != nil {
					return err
				}
			}
			return withService(cmd, func(ctx context.Context, c *client.Client, s *client.LockService) error {
				tx, err := txnOf(ctx, c, dropTxn, dropManager)
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
	drop.Flags().StringVar(&dropTxn, "txn", "", "transaction ID (of --server's transaction manager unless --manager)")
	drop.Flags().StringVar(&dropManager, "manager", "", "reference (djinn://…) of the manager of --txn, when it is not --server's")

	validate := &cobra.Command{
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
			return withService(cmd, func(ctx context.Context, _ *client.Client, s *client.LockService) error {
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
	cmd.AddCommand(create, owner, acquire, release, change, show, drop, validate)
	return cmd
}
