package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// lookupItemFlags describe an item or a template: --type, --attr
// Type.field=value, --id.
type lookupItemFlags struct {
	types []string
	attrs []string
	id    string
}

func (f *lookupItemFlags) register(cmd *cobra.Command, what string) {
	cmd.Flags().StringArrayVar(&f.types, "type", nil, what+" service type name (repeatable)")
	cmd.Flags().StringArrayVar(&f.attrs, "attr", nil, what+` attribute Type.field=value (repeatable; a value that parses as an integer is one, true/false a boolean, else a string)`)
	cmd.Flags().StringVar(&f.id, "id", "", what+" service id (32 hex digits)")
}

// parseAttrValue reads an --attr value.
func parseAttrValue(s string) *djinnpb.Value {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return &djinnpb.Value{Kind: &djinnpb.Value_IntValue{IntValue: n}}
	}
	if b, err := strconv.ParseBool(s); err == nil && (s == "true" || s == "false") {
		return &djinnpb.Value{Kind: &djinnpb.Value_BoolValue{BoolValue: b}}
	}
	return &djinnpb.Value{Kind: &djinnpb.Value_StringValue{StringValue: s}}
}

// entries groups the --attr flags by entry type, in the order given.
func (f *lookupItemFlags) entries() ([]*djinnpb.Entry, error) {
	var out []*djinnpb.Entry
	byType := map[string]*djinnpb.Entry{}
	for _, a := range f.attrs {
		key, val, ok := strings.Cut(a, "=")
		typ, field, ok2 := strings.Cut(key, ".")
		if !ok || !ok2 || typ == "" || field == "" {
			return nil, fmt.Errorf("--attr %q: want Type.field=value", a)
		}
		e := byType[typ]
		if e == nil {
			e = &djinnpb.Entry{Type: typ}
			byType[typ] = e
			out = append(out, e)
		}
		e.Fields = append(e.Fields, &djinnpb.Field{Name: field, Value: parseAttrValue(val)})
	}
	return out, nil
}

func (f *lookupItemFlags) serviceID() ([]byte, error) {
	if f.id == "" {
		return nil, nil
	}
	id, err := djinn.ParseID(f.id)
	if err != nil {
		return nil, fmt.Errorf("--id: %w", err)
	}
	return id[:], nil
}

func (f *lookupItemFlags) template() (*djinnpb.ServiceTemplate, error) {
	es, err := f.entries()
	if err != nil {
		return nil, err
	}
	id, err := f.serviceID()
	if err != nil {
		return nil, err
	}
	t := &djinnpb.ServiceTemplate{ServiceId: id, Types: f.types}
	for _, e := range es {
		t.Entries = append(t.Entries, &djinnpb.EntryTemplate{Type: e.Type, Fields: e.Fields})
	}
	return t, nil
}

type lookupItemView struct {
	ID      string              `json:"id"`
	Service string              `json:"service"`
	Types   []string            `json:"types"`
	Attrs   []map[string]string `json:"attrs,omitempty"`
}

func formatValue(v *djinnpb.Value) string {
	switch k := v.GetKind().(type) {
	case *djinnpb.Value_StringValue:
		return k.StringValue
	case *djinnpb.Value_IntValue:
		return strconv.FormatInt(k.IntValue, 10)
	case *djinnpb.Value_DoubleValue:
		return strconv.FormatFloat(k.DoubleValue, 'g', -1, 64)
	case *djinnpb.Value_BoolValue:
		return strconv.FormatBool(k.BoolValue)
	case *djinnpb.Value_BytesValue:
		return fmt.Sprintf("%x", k.BytesValue)
	}
	return "null"
}

func viewItem(it *djinnpb.ServiceItem) lookupItemView {
	v := lookupItemView{ID: fmt.Sprintf("%x", it.GetServiceId()), Service: string(it.GetService()), Types: it.GetTypes()}
	for _, e := range it.GetEntries() {
		m := map[string]string{"type": e.GetType()}
		for _, f := range e.GetFields() {
			m[f.GetName()] = formatValue(f.GetValue())
		}
		v.Attrs = append(v.Attrs, m)
	}
	return v
}

func printItem(w io.Writer, v lookupItemView) {
	fmt.Fprintf(w, "%s  %s  types=%s", v.ID, v.Service, strings.Join(v.Types, ","))
	for _, a := range v.Attrs {
		var fs []string
		for k, val := range a {
			if k != "type" {
				fs = append(fs, k+"="+val)
			}
		}
		slices.Sort(fs)
		fmt.Fprintf(w, "  %s{%s}", a["type"], strings.Join(fs, ","))
	}
	fmt.Fprintln(w)
}

func newLookup(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "lookup",
		Short: "The lookup service: register, find and list services",
	}
	withRegistrar := func(cmd *cobra.Command, fn func(ctx context.Context, r *client.Registrar) error) error {
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
		return fn(ctx, r)
	}

	var reg lookupItemFlags
	var endpoint, duration string
	register := &cobra.Command{
		Use:   "register --type T [--type T2] [--attr Type.field=value]… [--endpoint ADDR] [--duration D] [--id ID]",
		Short: "Register a service item; prints its service id and lease token",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			d, err := djinn.ParseDuration(duration)
			if err != nil {
				return fmt.Errorf("--duration %q: %w", duration, err)
			}
			es, err := reg.entries()
			if err != nil {
				return err
			}
			id, err := reg.serviceID()
			if err != nil {
				return err
			}
			if endpoint == "" {
				return fmt.Errorf("--endpoint: missing: where the service is reached (its reference)")
			}
			item := &djinnpb.ServiceItem{ServiceId: id, Service: []byte(endpoint), Types: reg.types, Entries: es}
			return withRegistrar(cmd, func(ctx context.Context, r *client.Registrar) error {
				sr, err := r.Register(ctx, item, d)
				if err != nil {
					return err
				}
				v := map[string]any{"id": sr.ID.String(), "lease": viewLease(sr.Lease)}
				return g.print(cmd.OutOrStdout(), v, func(w io.Writer) {
					l := viewLease(sr.Lease)
					fmt.Fprintf(w, "id       %s\nlease    %s\nexpires  %s (in %s)\n", sr.ID, l.Token, l.Expiration, l.Remaining)
				})
			})
		},
	}
	reg.register(register, "the item's")
	register.Flags().StringVar(&endpoint, "endpoint", "", "the service's address (stored as its reference)")
	register.Flags().StringVar(&duration, "duration", "any", "lease duration: a positive Go duration, forever or any")

	find := func(use, short string, def int) *cobra.Command {
		var tf lookupItemFlags
		var max int
		c := &cobra.Command{
			Use:   use,
			Short: short,
			Args:  cobra.NoArgs,
			RunE: func(cmd *cobra.Command, args []string) error {
				tmpl, err := tf.template()
				if err != nil {
					return err
				}
				if max < 0 {
					return fmt.Errorf("--max %d: must not be negative", max)
				}
				return withRegistrar(cmd, func(ctx context.Context, r *client.Registrar) error {
					total, items, err := r.LookupN(ctx, tmpl, max)
					if err != nil {
						return err
					}
					vs := make([]lookupItemView, len(items))
					for i, it := range items {
						vs[i] = viewItem(it)
					}
					return g.print(cmd.OutOrStdout(), map[string]any{"total": total, "items": vs}, func(w io.Writer) {
						fmt.Fprintf(w, "%d matching\n", total)
						for _, v := range vs {
							printItem(w, v)
						}
					})
				})
			},
		}
		tf.register(c, "match the")
		c.Flags().IntVar(&max, "max", def, "at most this many items")
		return c
	}

	var prefix string
	types := &cobra.Command{
		Use:   "types [--prefix P]",
		Short: "List the service types registered",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return withRegistrar(cmd, func(ctx context.Context, r *client.Registrar) error {
				ts, err := r.ServiceTypes(ctx, &djinnpb.ServiceTemplate{}, prefix)
				if err != nil {
					return err
				}
				return g.print(cmd.OutOrStdout(), ts, func(w io.Writer) {
					for _, t := range ts {
						fmt.Fprintln(w, t)
					}
				})
			})
		},
	}
	types.Flags().StringVar(&prefix, "prefix", "", "only names starting with this")

	var af lookupItemFlags
	var token string
	attrs := &cobra.Command{
		Use:   "attrs add|set --token TOKEN --attr Type.field=value…",
		Short: "Add to or replace a registration's attributes (its lease token authorizes it)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if args[0] != "add" && args[0] != "set" {
				return fmt.Errorf("attrs %q: want add or set", args[0])
			}
			l, err := client.ParseToken(token)
			if err != nil {
				return fmt.Errorf("--token: %w", err)
			}
			es, err := af.entries()
			if err != nil {
				return err
			}
			return withRegistrar(cmd, func(ctx context.Context, r *client.Registrar) error {
				sr := r.RegistrationFromLease(djinn.ID{}, l)
				if args[0] == "add" {
					err = sr.AddAttributes(ctx, es)
				} else {
					err = sr.SetAttributes(ctx, es)
				}
				if err != nil {
					return err
				}
				return g.print(cmd.OutOrStdout(), map[string]any{"done": args[0]}, func(w io.Writer) { fmt.Fprintln(w, "done") })
			})
		},
	}
	attrs.Flags().StringArrayVar(&af.attrs, "attr", nil, "attribute Type.field=value (repeatable)")
	attrs.Flags().StringVar(&token, "token", "", "the registration's lease token (register prints it)")

	cmd.AddCommand(register, find("find [--type T] [--attr …] [--id ID] [--max N]", "Find services matching a template", 10),
		find("ls [--max N]", "List registered services", 100), types, attrs)
	return cmd
}
