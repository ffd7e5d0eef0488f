package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
)

// withRegistrar dials --server and runs fn with its lookup service.
func (g *globals) withRegistrar(cmd *cobra.Command, fn func(ctx context.Context, c *client.Client, r *client.Registrar) error) error {
	ctx := cmd.Context()
	c, err := g.dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	r, err := whenReady(ctx, cmd.ErrOrStderr(), g.waitTimeout, c.Lookup)
	if err != nil {
		return err
	}
	return fn(g.reads.context(ctx), c, r)
}

// readFlags are the lookup commands' choice of freshness.
type readFlags struct {
	maxStaleness time.Duration
	linearizable bool
}

// context asks for the chosen freshness on the reads made with ctx.
func (f readFlags) context(ctx context.Context) context.Context {
	switch {
	case f.linearizable:
		return client.ReadLinearizable(ctx)
	case f.maxStaleness > 0:
		return client.ReadStale(ctx, f.maxStaleness)
	}
	return ctx
}

func (f *readFlags) check() error {
	if f.linearizable && f.maxStaleness > 0 {
		return errors.New("--linearizable and --max-staleness: choose one")
	}
	if f.maxStaleness < 0 {
		return fmt.Errorf("--max-staleness %s: must be positive", f.maxStaleness)
	}
	return nil
}

func (g *globals) lookupCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "lookup",
		Short: "The lookup service: register, find, watch and browse services",
		Long: "The lookup service (the registrar): register service items with types and attribute entries, " +
			"find them by template, watch them come and go, and change their attributes.\n\n--attr: " + attrSyntax + ".",
	}
	pf := cmd.PersistentFlags()
	pf.DurationVar(&g.reads.maxStaleness, "max-staleness", 0,
		"let any cluster member answer lookups from a state at most this old (spreads reads over the cluster)")
	pf.BoolVar(&g.reads.linearizable, "linearizable", false,
		"lookups see every write acknowledged before them (the leader confirms with a quorum first)")
	cmd.PersistentPreRunE = func(*cobra.Command, []string) error {
		if err := g.reads.check(); err != nil {
			return usageError{err}
		}
		return nil
	}
	cmd.AddCommand(g.lookupRegisterCmd(),
		g.lookupFindCmd("find [--type T]… [--attr Type.field=value]… [--id ID] [--max N]", "Find the services matching a template: the total and the items", true),
		g.lookupFindCmd("ls [--max N]", "List the registered services: the total and the items", false),
		g.lookupTypesCmd(), g.lookupAttrsCmd(), g.lookupWatchCmd(), g.lookupInfoCmd())
	return cmd
}

// lookupLeaseLimit is what bounds a lookup registration's lease: the
// lookup service's own policy, as Reggie's, which no flag sets.
const lookupLeaseLimit = "the lookup service's policy, as Jini's Reggie: renew the lease, djinn lease renew NAME, to keep the item"

const lookupRegisterHelp = "Register a service item for a lease: its type names, its type hierarchy, its " +
	"attributes, and its reference, the --endpoint address. Give every type the item has with --type, or its " +
	"most specific ones and the types each directly extends with --supertype (--type Laser --supertype " +
	"Laser=Printer --supertype Printer=Device): a template naming Printer then finds it, and lookup types " +
	"answers Laser for it, as Jini's getServiceTypes does. Without --id the registrar assigns the service id; " +
	"registering an id again replaces that item. Prints the service id and the registration's lease, whose name " +
	"`djinn lease renew|cancel` and `djinn lookup attrs` take.\n\n--attr: " + attrSyntax + "."

func (g *globals) lookupRegisterCmd() *cobra.Command {
	var (
		f           lookupFlags
		endpoint, d string
		supers      []string
	)
	cmd := &cobra.Command{
		Use:   "register --type T [--type T2]… [--supertype T=S[,S2]]… [--attr Type.field=value]… --endpoint ADDR [--lease D] [--id ID]",
		Short: "Register a service item; prints its service id and the registration's lease",
		Long:  lookupRegisterHelp,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			item, dur, err := f.item(endpoint, d)
			if err != nil {
				return err
			}
			if item.Supertypes, err = parseSupertypes(supers); err != nil {
				return usageError{err}
			}
			return g.withRegistrar(cmd, func(ctx context.Context, _ *client.Client, r *client.Registrar) error {
				sr, err := r.Register(ctx, item, dur)
				if err != nil {
					return err
				}
				g.noticeClamp(cmd, "registration's lease", lookupLeaseLimit, dur, sr.Lease)
				v := lookupRegisteredView{ID: sr.ID.String(), Lease: viewLease(sr.Lease)}
				return g.print(cmd.OutOrStdout(), v, func(w io.Writer) {
					fmt.Fprintf(w, "id       %s\nlease    %s\nexpires  %s\ntoken    %s\n", v.ID, v.Lease.Name, v.Lease.expiresText(), v.Lease.Token)
				})
			})
		},
	}
	f.register(cmd, "the item's")
	cmd.Flags().StringVar(&endpoint, "endpoint", "", "the service's address, host:port (stored as its reference)")
	cmd.Flags().StringArrayVar(&supers, "supertype", nil, "TYPE=SUPER[,SUPER…]: the types TYPE directly extends (repeatable): the item's type hierarchy")
	leaseFlag(cmd, &d, "the registration")
	return cmd
}

// parseSupertypes parses --supertype TYPE=SUPER[,SUPER…] flags into an
// item's type hierarchy; nil for none.
func parseSupertypes(flags []string) (map[string][]string, error) {
	if len(flags) == 0 {
		return nil, nil
	}
	out := map[string][]string{}
	for _, f := range flags {
		t, supers, ok := strings.Cut(f, "=")
		if !ok || t == "" || supers == "" {
			return nil, fmt.Errorf("--supertype %q: want TYPE=SUPER[,SUPER…], e.g. Laser=Printer", f)
		}
		for _, s := range strings.Split(supers, ",") {
			if s == "" {
				return nil, fmt.Errorf("--supertype %q: an empty supertype name", f)
			}
			out[t] = append(out[t], s)
		}
	}
	return out, nil
}

// lookupRegisteredView is what lookup register prints.
type lookupRegisteredView struct {
	ID    string    `json:"id"`
	Lease leaseView `json:"lease"`
}

// item checks register's flags and returns the item and the lease asked.
func (f *lookupFlags) item(endpoint, lease string) (client.ServiceItem, time.Duration, error) {
	if len(f.types) == 0 {
		return client.ServiceItem{}, 0, usageError{errors.New("--type: missing: name the service's types")}
	}
	if endpoint == "" {
		return client.ServiceItem{}, 0, usageError{errors.New("--endpoint: missing: where the service is reached (stored as its reference)")}
	}
	if err := djinn.CheckEndpoint(endpoint); err != nil {
		return client.ServiceItem{}, 0, usageError{fmt.Errorf("--endpoint: %w", err)}
	}
	d, err := parseLease(lease)
	if err != nil {
		return client.ServiceItem{}, 0, err
	}
	es, err := parseLookupEntries(f.attrs)
	if err != nil {
		return client.ServiceItem{}, 0, err
	}
	id, err := f.serviceID()
	if err != nil {
		return client.ServiceItem{}, 0, err
	}
	item := client.ServiceItem{Service: []byte(endpoint), Types: f.types, Entries: es}
	if id != nil {
		item.ID = *id
	}
	return item, d, nil
}

// lookupFoundView is what lookup find and ls print.
type lookupFoundView struct {
	Total int              `json:"total"`
	Items []lookupItemView `json:"items"`
}

// lookupFindCmd is find (with template flags; no match exits 1) or ls
// (without).
func (g *globals) lookupFindCmd(use, short string, template bool) *cobra.Command {
	var (
		f   lookupFlags
		max int
	)
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			tmpl, err := f.template()
			if err != nil {
				return err
			}
			if max < 0 || max > math.MaxInt32 {
				return usageError{fmt.Errorf("--max %d: want 0 to %d", max, math.MaxInt32)}
			}
			return g.withRegistrar(cmd, func(ctx context.Context, _ *client.Client, r *client.Registrar) error {
				total, items, err := r.LookupN(ctx, tmpl, max)
				if err != nil {
					return err
				}
				v := lookupFoundView{Total: total, Items: make([]lookupItemView, len(items))}
				for i, it := range items {
					v.Items[i] = viewLookupItem(it)
				}
				if err := g.print(cmd.OutOrStdout(), v, func(w io.Writer) { printFound(w, v) }); err != nil || total > 0 || !template {
					return err
				}
				return negative{"no registered service matches the template (lookup ls lists them all)"}
			})
		},
	}
	if template {
		f.register(cmd, "match the")
	}
	cmd.Flags().IntVar(&max, "max", 100, "show at most this many items")
	return cmd
}

func printFound(w io.Writer, v lookupFoundView) {
	fmt.Fprintf(w, "%d matching", v.Total)
	if len(v.Items) < v.Total {
		fmt.Fprintf(w, ", %d shown", len(v.Items))
	}
	fmt.Fprintln(w)
	for _, it := range v.Items {
		fmt.Fprintln(w, lookupItemText(it))
	}
}

func (g *globals) lookupTypesCmd() *cobra.Command {
	var prefix string
	cmd := &cobra.Command{
		Use:   "types [--prefix P]",
		Short: "List the service types registered, one per line",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.withRegistrar(cmd, func(ctx context.Context, _ *client.Client, r *client.Registrar) error {
				ts, err := r.ServiceTypes(ctx, client.ServiceTemplate{}, prefix)
				if err != nil {
					return err
				}
				ts = orEmpty(ts)
				return g.print(cmd.OutOrStdout(), ts, func(w io.Writer) {
					for _, t := range ts {
						fmt.Fprintln(w, t)
					}
				})
			})
		},
	}
	cmd.Flags().StringVar(&prefix, "prefix", "", "only the names that start with this")
	return cmd
}

// lookupInfoView is what lookup info prints.
type lookupInfoView struct {
	ServiceID string   `json:"service_id"`
	Groups    []string `json:"groups"`
	Locator   *string  `json:"locator"` // null: discovery is off
	Reference string   `json:"reference"`
	Items     int64    `json:"items"`
}

func (g *globals) lookupInfoCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "info",
		Short: "What the lookup service says of itself: service id, groups, locator, reference, items",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.withRegistrar(cmd, func(ctx context.Context, _ *client.Client, r *client.Registrar) error {
				info, err := r.Info(ctx)
				if err != nil {
					return err
				}
				v := lookupInfoView{ServiceID: info.ServiceID.String(), Groups: orEmpty(info.Groups), Reference: info.Ref.String(), Items: info.Items}
				if info.Locator != "" {
					v.Locator = &info.Locator
				}
				return g.print(cmd.OutOrStdout(), v, func(w io.Writer) {
					locator := "(no discovery)"
					if v.Locator != nil {
						locator = *v.Locator
					}
					fmt.Fprintf(w, "service id  %s\ngroups      %s\nlocator     %s\nreference   %s\nitems       %d\n",
						v.ServiceID, discoveryGroupsText(v.Groups), locator, v.Reference, v.Items)
				})
			})
		},
	}
}

func (g *globals) lookupAttrsCmd() *cobra.Command {
	var (
		token string
		attrs []string
	)
	cmd := &cobra.Command{
		Use:   "attrs add|set LEASE --attr Type.field=value…",
		Short: "Add to or replace a registration's attributes; its lease (name or token) authorizes it",
		Long: "Add entries to a registered item (add) or replace all of its entries (set; without --attr it " +
			"removes them all). The registration is named by its lease, which `djinn lookup register` prints: " +
			"its name or its token. A service id is not enough, since anyone can learn it.\n\n--attr: " + attrSyntax + ".",
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			op := args[0]
			if op != "add" && op != "set" {
				return usageError{fmt.Errorf("attrs %q: want add or set", op)}
			}
			name, err := attrsLease(args, token)
			if err != nil {
				return err
			}
			es, err := parseLookupEntries(attrs)
			if err != nil {
				return err
			}
			if op == "add" && len(es) == 0 {
				return usageError{errors.New("--attr: missing: the entries to add")}
			}
			return g.withRegistrar(cmd, func(ctx context.Context, c *client.Client, r *client.Registrar) error {
				l, err := leaseArg(ctx, c, "LEASE", name)
				if err != nil {
					return notItsLease(name, err)
				}
				sr := r.Registration(djinn.ID{}, l)
				if op == "add" {
					err = sr.AddAttributes(ctx, es)
				} else {
					err = sr.SetAttributes(ctx, es)
				}
				if err != nil {
					return notItsLease(name, err)
				}
				return g.print(cmd.OutOrStdout(), map[string]any{"op": op, "entries": len(es)}, func(w io.Writer) { printAttrsChanged(w, op, len(es)) })
			})
		},
	}
	cmd.Flags().StringVar(&token, "token", "", "the registration's lease: give it as the argument")
	cmd.Flags().Lookup("token").Hidden = true
	cmd.Flags().StringArrayVar(&attrs, "attr", nil, attrFlagHelp)
	return cmd
}

// notItsLease says, of a short name no lease has, that a service id is
// not a registration's lease: both are 32 hex digits.
func notItsLease(name string, err error) error {
	if (errors.Is(err, djinn.ErrUnknownLease) || errors.Is(err, djinn.ErrNoSuchObject)) && !strings.HasPrefix(name, client.TokenPrefix) {
		return fmt.Errorf("LEASE %s: no registration holds that lease; a service id is not its lease (lookup register prints the lease's name): %w", name, djinn.KindOf(err))
	}
	return err
}

// attrsLease reads the registration's lease of lookup attrs: the argument
// or the old --token, given once.
func attrsLease(args []string, token string) (string, error) {
	if len(args) == 2 {
		if token != "" && token != args[1] {
			return "", usageError{errors.New("--token: the registration is named twice: give its lease once")}
		}
		token = args[1]
	}
	if token == "" {
		return "", usageError{errors.New("LEASE: missing: the registration's lease, its name or token, which register prints")}
	}
	if err := checkLeaseArg("LEASE", token); err != nil {
		return "", err
	}
	return token, nil
}

func printAttrsChanged(w io.Writer, op string, n int) {
	verb, noun := "added", "entries"
	if op == "set" {
		verb = "set"
	}
	if n == 1 {
		noun = "entry"
	}
	fmt.Fprintf(w, "%s %d %s\n", verb, n, noun)
}
