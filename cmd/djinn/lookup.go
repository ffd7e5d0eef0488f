package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
)

// attrSyntax documents --attr for every lookup command's help.
const attrSyntax = `attribute Type.field=value (repeatable; the fields of one Type make one entry; the field ` +
	`is what follows the last dot, so Type may be qualified: net.jini.lookup.entry.Name.name=lp). ` +
	`A value that parses as a decimal integer is an integer, true and false are booleans, ` +
	`a value in double quotes is the string inside them (Go syntax: "42" is a string), anything else a string. ` +
	`A bare Type is an entry of that type without fields`

// attrFlagHelp is --attr's flag help; attrSyntax, in each command's
// long help, says the rest.
const attrFlagHelp = "attribute Type.field=value, or a bare Type (repeatable; values: see --help)"

// lookupFlags describe an item or a template: --type T, --attr
// Type.field=value, --id ID.
type lookupFlags struct {
	types []string
	attrs []string
	id    string
}

func (f *lookupFlags) register(cmd *cobra.Command, what string) {
	cmd.Flags().StringArrayVar(&f.types, "type", nil, what+" service type name (repeatable)")
	cmd.Flags().StringArrayVar(&f.attrs, "attr", nil, what+" "+attrFlagHelp)
	cmd.Flags().StringVar(&f.id, "id", "", what+" service id (32 hex digits)")
}

// parseLookupAttrValue reads the value of an --attr: see attrSyntax.
func parseLookupAttrValue(s string) (client.Value, error) {
	if strings.HasPrefix(s, `"`) {
		u, err := strconv.Unquote(s)
		if err != nil {
			return client.Value{}, errors.New("a quoted value must be a Go string literal")
		}
		return client.NewString(u), nil
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return client.NewInt(n), nil
	}
	switch s {
	case "true":
		return client.NewBool(true), nil
	case "false":
		return client.NewBool(false), nil
	}
	return client.NewString(s), nil
}

// parseLookupEntries groups --attr flags into entries, one per type, in the
// order the types first appear.
func parseLookupEntries(attrs []string) ([]client.Entry, error) {
	var out []client.Entry
	index := map[string]int{}
	for _, a := range attrs {
		typ, val, hasField := strings.Cut(a, "=")
		var field string
		if hasField {
			dot := strings.LastIndexByte(typ, '.')
			if dot < 0 {
				return nil, fmt.Errorf("--attr %q: want Type.field=value, or a bare Type", a)
			}
			typ, field = typ[:dot], typ[dot+1:]
		}
		if typ == "" || (hasField && field == "") {
			return nil, fmt.Errorf("--attr %q: want Type.field=value, or a bare Type", a)
		}
		i, ok := index[typ]
		if !ok {
			i = len(out)
			index[typ] = i
			out = append(out, client.Entry{Type: typ})
		}
		if !hasField {
			continue
		}
		if _, dup := out[i].Get(field); dup {
			return nil, fmt.Errorf("--attr %q: field %s of %s given twice", a, field, typ)
		}
		v, err := parseLookupAttrValue(val)
		if err != nil {
			return nil, fmt.Errorf("--attr %q: %w", a, err)
		}
		out[i].Fields = append(out[i].Fields, client.Field{Name: field, Value: v})
	}
	return out, nil
}

func (f *lookupFlags) serviceID() (*djinn.ID, error) {
	if f.id == "" {
		return nil, nil
	}
	id, err := djinn.ParseID(f.id)
	if err != nil {
		return nil, fmt.Errorf("--id: %w", err)
	}
	return &id, nil
}

// template returns the template the flags describe (no flags: every item).
func (f *lookupFlags) template() (client.ServiceTemplate, error) {
	es, err := parseLookupEntries(f.attrs)
	if err != nil {
		return client.ServiceTemplate{}, err
	}
	id, err := f.serviceID()
	if err != nil {
		return client.ServiceTemplate{}, err
	}
	t := client.ServiceTemplate{ID: id, Types: f.types}
	for _, e := range es {
		t.Entries = append(t.Entries, client.EntryTemplate{Type: e.Type, Fields: e.Fields})
	}
	return t, nil
}

// lookupValueJSON is a field value in JSON: a string, a number, a boolean, null,
// or bytes as "0x" and hex digits.
func lookupValueJSON(v client.Value) any {
	if v.Kind() == client.ValueBytes {
		return v.String()
	}
	return v.Interface()
}

type lookupEntryView struct {
	Type       string         `json:"type"`
	Supertypes []string       `json:"supertypes,omitempty"`
	Fields     map[string]any `json:"fields"`
	text       string
}

type lookupItemView struct {
	ID      string            `json:"id"`
	Service string            `json:"service"`
	Types   []string          `json:"types"`
	Attrs   []lookupEntryView `json:"attrs"`
}

// lookupServiceText shows an item's reference: the text a djinn CLI
// registration stores, or 0x and hex digits for other bytes.
func lookupServiceText(b []byte) string {
	if utf8.Valid(b) && !strings.ContainsFunc(string(b), func(r rune) bool { return r < ' ' || r == 0x7f }) {
		return string(b)
	}
	return fmt.Sprintf("0x%x", b)
}

func viewLookupItem(it client.ServiceItem) lookupItemView {
	v := lookupItemView{ID: it.ID.String(), Service: lookupServiceText(it.Service), Types: it.Types, Attrs: []lookupEntryView{}}
	if v.Types == nil {
		v.Types = []string{}
	}
	for _, e := range it.Entries {
		ev := lookupEntryView{Type: e.Type, Supertypes: e.Supertypes, Fields: map[string]any{}}
		fs := make([]string, len(e.Fields))
		for i, f := range e.Fields {
			ev.Fields[f.Name] = lookupValueJSON(f.Value)
			fs[i] = f.Name + "=" + f.Value.String()
		}
		ev.text = e.Type + "{" + strings.Join(fs, " ") + "}"
		v.Attrs = append(v.Attrs, ev)
	}
	return v
}

// lookupItemText is an item on one line: id, reference, types, then each entry
// as Type{field=value …} with values in Go syntax ("text", 3, true).
func lookupItemText(v lookupItemView) string {
	service := v.Service
	if service == "" {
		service = "-"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s  %s  types=%s", v.ID, service, strings.Join(v.Types, ","))
	for _, e := range v.Attrs {
		b.WriteString("  " + e.text)
	}
	return b.String()
}

// withRegistrar dials --server and runs fn with its lookup service.
func (g *globals) withRegistrar(cmd *cobra.Command, fn func(ctx context.Context, c *client.Client, r *client.Registrar) error) error {
	ctx := cmd.Context()
	c, err := g.dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	r, err := c.Lookup(ctx)
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
	cmd.PersistentPreRunE = func(*cobra.Command, []string) error { return g.reads.check() }
	cmd.AddCommand(g.lookupRegisterCmd(),
		g.lookupFindCmd("find [--type T]… [--attr Type.field=value]… [--id ID] [--max N]", "Find the services matching a template: the total and the items", true),
		g.lookupFindCmd("ls [--max N]", "List the registered services: the total and the items", false),
		g.lookupTypesCmd(), g.lookupAttrsCmd(), g.lookupWatchCmd(), g.lookupInfoCmd())
	return cmd
}

func (g *globals) lookupRegisterCmd() *cobra.Command {
	var (
		f                  lookupFlags
		endpoint, duration string
	)
	cmd := &cobra.Command{
		Use:   "register --type T [--type T2]… [--attr Type.field=value]… --endpoint ADDR [--duration D] [--id ID]",
		Short: "Register a service item; prints its service id and lease token",
		Long: "Register a service item for a lease: its type names (give every type it inherits too), its attributes, " +
			"and its reference, the --endpoint address. Without --id the registrar assigns the service id; " +
			"registering an id again replaces that item. Prints the service id and the lease token, which " +
			"`djinn lease renew|cancel` and `djinn lookup attrs` take.\n\n--attr: " + attrSyntax + ".",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(f.types) == 0 {
				return errors.New("--type: missing: name the service's types")
			}
			if endpoint == "" {
				return errors.New("--endpoint: missing: where the service is reached (stored as its reference)")
			}
			if err := djinn.CheckEndpoint(endpoint); err != nil {
				return fmt.Errorf("--endpoint: %w", err)
			}
			d, err := djinn.ParseDuration(duration)
			if err != nil {
				return fmt.Errorf("--duration %q: %w", duration, err)
			}
			es, err := parseLookupEntries(f.attrs)
			if err != nil {
				return err
			}
			id, err := f.serviceID()
			if err != nil {
				return err
			}
			item := client.ServiceItem{Service: []byte(endpoint), Types: f.types, Entries: es}
			if id != nil {
				item.ID = *id
			}
			return g.withRegistrar(cmd, func(ctx context.Context, _ *client.Client, r *client.Registrar) error {
				sr, err := r.Register(ctx, item, d)
				if err != nil {
					return err
				}
				l := viewLease(sr.Lease)
				v := map[string]any{"id": sr.ID.String(), "lease": l}
				return g.print(cmd.OutOrStdout(), v, func(w io.Writer) {
					fmt.Fprintf(w, "id       %s\nlease    %s\nexpires  %s (in %s)\n", sr.ID, l.Token, l.Expiration, l.Remaining)
				})
			})
		},
	}
	f.register(cmd, "the item's")
	cmd.Flags().StringVar(&endpoint, "endpoint", "", "the service's address, host:port (stored as its reference)")
	cmd.Flags().StringVar(&duration, "duration", "any", "lease duration: a positive Go duration, forever or any (the registrar grants at most its maximum)")
	return cmd
}

// newLookupFind is find (with template flags) or ls (without).
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
			if max < 0 {
				return fmt.Errorf("--max %d: must not be negative", max)
			}
			return g.withRegistrar(cmd, func(ctx context.Context, _ *client.Client, r *client.Registrar) error {
				total, items, err := r.LookupN(ctx, tmpl, max)
				if err != nil {
					return err
				}
				vs := make([]lookupItemView, len(items))
				for i, it := range items {
					vs[i] = viewLookupItem(it)
				}
				return g.print(cmd.OutOrStdout(), map[string]any{"total": total, "items": vs}, func(w io.Writer) {
					fmt.Fprintf(w, "%d matching", total)
					if len(vs) < total {
						fmt.Fprintf(w, ", %d shown", len(vs))
					}
					fmt.Fprintln(w)
					for _, v := range vs {
						fmt.Fprintln(w, lookupItemText(v))
					}
				})
			})
		},
	}
	if template {
		f.register(cmd, "match the")
	}
	cmd.Flags().IntVar(&max, "max", 100, "show at most this many items")
	return cmd
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
				if ts == nil {
					ts = []string{}
				}
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
				groups := info.Groups
				if groups == nil {
					groups = []string{}
				}
				v := map[string]any{"service_id": info.ServiceID.String(), "groups": groups, "locator": info.Locator,
					"reference": info.Ref.String(), "items": info.Items}
				return g.print(cmd.OutOrStdout(), v, func(w io.Writer) {
					locator := info.Locator
					if locator == "" {
						locator = "(no discovery)"
					}
					fmt.Fprintf(w, "service id  %s\ngroups      %s\nlocator     %s\nreference   %s\nitems       %d\n",
						info.ServiceID, discoveryGroupsText(info.Groups), locator, info.Ref, info.Items)
				})
			})
		},
	}
}

// attrsToken reads the registration's lease token of lookup attrs: the
// argument or --token, given once.
func attrsToken(args []string, token string) (*client.Lease, error) {
	if len(args) == 2 {
		if token != "" && token != args[1] {
			return nil, errors.New("--token: the registration is named twice: give the token once")
		}
		token = args[1]
	}
	if token == "" {
		return nil, errors.New("--token: missing: the registration's lease token, which register prints")
	}
	l, err := client.ParseToken(token)
	if err != nil {
		if _, idErr := djinn.ParseID(token); idErr == nil {
			return nil, fmt.Errorf("%s: a service id, not a lease token: changing attributes takes the registration's lease token, which register prints", token)
		}
		return nil, fmt.Errorf("--token: %w", err)
	}
	return l, nil
}

func (g *globals) lookupAttrsCmd() *cobra.Command {
	var (
		token string
		attrs []string
	)
	cmd := &cobra.Command{
		Use:   "attrs add|set [TOKEN] [--token TOKEN] --attr Type.field=value…",
		Short: "Add to or replace a registration's attributes; its lease token authorizes it",
		Long: "Add entries to a registered item (add) or replace all of its entries (set; without --attr it " +
			"removes them all). The registration is named by its lease token, which `djinn lookup register` " +
			"prints, as the argument or --token: a service id is not enough, since anyone can learn it.\n\n--attr: " + attrSyntax + ".",
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			op := args[0]
			if op != "add" && op != "set" {
				return fmt.Errorf("attrs %q: want add or set", op)
			}
			l, err := attrsToken(args, token)
			if err != nil {
				return err
			}
			es, err := parseLookupEntries(attrs)
			if err != nil {
				return err
			}
			if op == "add" && len(es) == 0 {
				return errors.New("--attr: missing: the entries to add")
			}
			return g.withRegistrar(cmd, func(ctx context.Context, _ *client.Client, r *client.Registrar) error {
				sr := r.Registration(djinn.ID{}, l)
				if op == "add" {
					err = sr.AddAttributes(ctx, es)
				} else {
					err = sr.SetAttributes(ctx, es)
				}
				if err != nil {
					return err
				}
				return g.print(cmd.OutOrStdout(), map[string]any{"op": op, "entries": len(es)}, func(w io.Writer) { printAttrsChanged(w, op, len(es)) })
			})
		},
	}
	cmd.Flags().StringVar(&token, "token", "", "the registration's lease token (register prints it)")
	cmd.Flags().StringArrayVar(&attrs, "attr", nil, attrFlagHelp)
	return cmd
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

// lookupEventView is a service event as watch prints it.
type lookupEventView struct {
	Seq        int64           `json:"sequence"`
	Transition string          `json:"transition"`
	ID         string          `json:"id"`
	Item       *lookupItemView `json:"item,omitempty"`
}

func printLookupEvent(g *globals, w io.Writer, se *client.ServiceEvent) {
	v := lookupEventView{Seq: se.Seq, Transition: se.Transition.String(), ID: se.ServiceID.String()}
	if se.Item != nil {
		iv := viewLookupItem(*se.Item)
		v.Item = &iv
	}
	printMu.Lock()
	defer printMu.Unlock()
	if g.output == "json" {
		b, _ := json.Marshal(v)
		fmt.Fprintln(w, string(b))
		return
	}
	if v.Item == nil {
		fmt.Fprintf(w, "seq=%d %s %s (removed)\n", v.Seq, v.Transition, v.ID)
		return
	}
	fmt.Fprintf(w, "seq=%d %s %s\n", v.Seq, v.Transition, lookupItemText(*v.Item))
}

func (g *globals) lookupWatchCmd() *cobra.Command {
	var (
		f                               lookupFlags
		transitions, addr, duration, hb string
	)
	cmd := &cobra.Command{
		Use:   "watch [--type T]… [--attr Type.field=value]… [--id ID] [--transitions LIST] [--listen ADDR] [--duration D]",
		Short: "Print one line per service event: services matching a template come, go and change",
		Long: "Host a listener (as `djinn events listen` does), register it with the lookup service for the " +
			"items matching the template, print what was registered, then one line per service event until " +
			"interrupted or --duration passes; the registration's lease is renewed meanwhile and cancelled at the end.\n\n" +
			"Transitions: match-nomatch (an item stopped matching, or went: printed as (removed)), nomatch-match (one " +
			"started matching, or came), match-match (a matching item changed).\n\n--attr: " + attrSyntax + ".",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			tmpl, err := f.template()
			if err != nil {
				return err
			}
			tr, err := client.ParseTransitions(transitions)
			if err != nil {
				return fmt.Errorf("--transitions: %w", err)
			}
			d, err := djinn.ParseDuration(duration)
			if err != nil || d == djinn.Any {
				return fmt.Errorf("--duration %q: want a positive Go duration or forever", duration)
			}
			return g.withRegistrar(cmd, func(ctx context.Context, c *client.Client, r *client.Registrar) error {
				return runLookupWatch(ctx, g, cmd.OutOrStdout(), cmd.ErrOrStderr(), c, r, tmpl, tr, addr, []byte(hb), d)
			})
		},
	}
	f.register(cmd, "match the")
	cmd.Flags().StringVar(&transitions, "transitions", "match-nomatch,nomatch-match,match-match", "the transitions to report, comma-separated (or all)")
	cmd.Flags().StringVar(&addr, "listen", "127.0.0.1:0", "address to serve the listener on (the registrar must reach it)")
	cmd.Flags().StringVar(&duration, "duration", "forever", "how long to watch: a positive Go duration, or forever (until interrupted)")
	cmd.Flags().StringVar(&hb, "handback", "", "handback bytes the events carry, as text")
	return cmd
}

// runLookupWatch hosts the listener, registers it and prints events until ctx ends,
// d passes or the registration's lease cannot be renewed.
func runLookupWatch(ctx context.Context, g *globals, w, errw io.Writer, c *client.Client, r *client.Registrar, tmpl client.ServiceTemplate,
	tr client.Transition, addr string, handback []byte, d time.Duration) error {
	if d != djinn.Forever {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	l, err := client.Listen(ctx, addr, func(_ context.Context, ev *client.RemoteEvent) error {
		se, err := client.ServiceEventFrom(ev)
		if err != nil {
			printMu.Lock()
			fmt.Fprintln(errw, "djinn: ignored an event:", err)
			printMu.Unlock()
			return nil
		}
		printLookupEvent(g, w, se)
		return nil
	})
	if err != nil {
		return fmt.Errorf("--listen %s: %w", addr, err)
	}
	defer l.Close()
	failed := make(chan error, 1)
	renewer, err := client.NewRenewer(c, client.WithFailureHandler(func(f client.Failure) {
		select {
		case failed <- f.Err:
		default:
		}
	}))
	if err != nil {
		return err
	}
	defer renewer.Close()
	reg, err := r.Notify(ctx, tmpl, tr, l.Ref(), handback, djinn.Any)
	if err != nil {
		return err
	}
	if err := renewer.Renew(reg.Lease, djinn.EndOfTime); err != nil {
		return err
	}
	printWatching(g, w, reg, l.Ref(), tr)
	end := waitWatch(ctx, l, failed)
	// Best effort: a lease left behind ends by itself.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = renewer.Cancel(cctx, reg.Lease)
	return end
}

// printWatching prints what a watch registered.
func printWatching(g *globals, w io.Writer, reg *client.EventRegistration, listener djinn.Ref, tr client.Transition) {
	v := map[string]any{"event_id": reg.ID, "source": reg.Source.String(), "sequence": reg.Seq, "listener": listener.String(),
		"transitions": tr.String(), "lease": reg.Lease.Token()}
	printMu.Lock()
	defer printMu.Unlock()
	if g.output == "json" {
		b, _ := json.Marshal(v)
		fmt.Fprintln(w, string(b))
		return
	}
	fmt.Fprintf(w, "watching %s: event id %d, listener %s, lease %s\n", tr, reg.ID, listener, reg.Lease.Token())
}

// waitWatch waits until the watch ends: ctx ends (nil), the listener
// stops, or the registration's lease cannot be renewed.
func waitWatch(ctx context.Context, l *client.Listener, failed <-chan error) error {
	select {
	case <-ctx.Done():
		return nil
	case <-l.Done():
		if ctx.Err() == nil {
			return errors.New("the listener stopped")
		}
		return nil
	case err := <-failed:
		return fmt.Errorf("the watch's lease could not be renewed: %w", err)
	}
}
