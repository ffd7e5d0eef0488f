package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
)

// djinn ls KIND: what the cluster holds, a page at a time — the caller's
// own, or with --all or --principal (the operator role) every principal's
// or one's. Every kind is one Resources.List call; a kind is a row of
// lsKinds.

// lsKind is a kind of resource as ls shows it.
type lsKind struct {
	name    string   // the server's name of the kind
	aliases []string // other names ls takes
	what    string   // what one is, for help
	filter  string   // the filter flag it takes ("" none)
	columns []string // its details, in the order of the text table
}

var lsKinds = []lsKind{
	{name: client.KindLeases, aliases: []string{"lease"}, what: "live leases, with what each covers", filter: "covers", columns: []string{"covers"}},
	{name: client.KindMailboxes, aliases: []string{"mailbox"}, what: "event mailbox registrations", columns: []string{"stored_events", "target"}},
	{name: client.KindRenewalSets, aliases: []string{"renewal"}, what: "lease renewal sets", columns: []string{"leases"}},
	{name: client.KindLockSets, aliases: []string{"lock"}, what: "lock sets", columns: []string{"transactional", "holders", "waiters"}},
	{name: client.KindLDSRegistrations, aliases: []string{"lds"}, what: "lookup discovery registrations (named by their leases)", columns: []string{"groups", "locators", "registrars"}},
	{name: client.KindTransactions, aliases: []string{"txn"}, what: "transactions", filter: "state", columns: []string{"state", "parent", "participants"}},
	{name: client.KindLookupItems, aliases: []string{"items", "lookup"}, what: "lookup service registrations (named by service id)", filter: "type", columns: []string{"types", "service"}},
}

// findLsKind finds a kind by its name or an alias.
func findLsKind(name string) (lsKind, bool) {
	for _, k := range lsKinds {
		if k.name == name {
			return k, true
		}
		for _, a := range k.aliases {
			if a == name {
				return k, true
			}
		}
	}
	return lsKind{}, false
}

// lsFilterKeys are the filters' keys on the wire, by flag.
// lsTxnStates are the states transactions --state takes.
var lsTxnStates = []string{"active", "voting", "prepared", "notchanged", "committed", "aborted"}

var lsFilterKeys = map[string]string{"covers": "kind", "state": "state", "type": "type"}

// The details whose values are counts, flags and lists, for the JSON
// form; the others are strings, "" being null.
var (
	lsCounts = map[string]bool{"stored_events": true, "leases": true, "holders": true, "waiters": true, "registrars": true, "participants": true}
	lsLists  = map[string]bool{"groups": true, "locators": true, "types": true}
)

// lsFlags are ls's flags.
type lsFlags struct {
	all           bool
	principal     string
	max           int
	after         string
	covers, state string
	serviceType   string
	hasPrincipal  bool
}

func (g *globals) lsCmd() *cobra.Command {
	var f lsFlags
	var kinds []string
	for _, k := range lsKinds {
		kinds = append(kinds, fmt.Sprintf("  %-18s %s (also: %s)", k.name, k.what, strings.Join(k.aliases, ", ")))
	}
	cmd := &cobra.Command{
		Use:   "ls KIND [--all | --principal P] [--max N] [--after NAME] [--covers C | --state S | --type T]",
		Short: "List what the cluster holds, one kind at a time: your own, or (operators) everyone's",
		Long: "List one kind of resource, a page at a time, in name order: the resources your principal\n" +
			"created, or with --all every principal's, with --principal one's (both need the operator role).\n" +
			"Another principal's resources are shown to an operator redacted: what each is, whose, and its\n" +
			"time left, but not what would let the reader use it — no lease cookie, no delivery target, and a\n" +
			"name that is a capability (a lease's cookie, a registration's or a set's id) shown as its\n" +
			"fingerprint, as on the console (the first 16 hex digits of its SHA-256). An operator sees what\n" +
			"exists, not another principal's capabilities.\n" +
			"A page that is not the last ends with the --after NAME that lists the next.\n\nKinds:\n" +
			strings.Join(kinds, "\n") + "\n\nFilters: leases --covers (what a lease covers, e.g. \"mailbox registration\"),\n" +
			"transactions --state (active, voting, prepared, notchanged, committed, aborted), lookup-items --type.",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: lsKindCompletion,
		RunE: func(cmd *cobra.Command, args []string) error {
			k, ok := findLsKind(args[0])
			if !ok {
				return usageError{fmt.Errorf("kind %q: want one of %s", args[0], lsKindNames())}
			}
			f.hasPrincipal = cmd.Flags().Changed("principal")
			q, err := f.query(k)
			if err != nil {
				return usageError{err}
			}
			c, err := g.dial(cmd.Context())
			if err != nil {
				return err
			}
			defer c.Close()
			page, err := c.Resources(cmd.Context(), q)
			if err != nil {
				return err
			}
			v := viewResources(k, page, time.Now())
			return g.print(cmd.OutOrStdout(), v, func(w io.Writer) { printResources(w, k, v, f.all || f.hasPrincipal) })
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&f.all, "all", false, "every principal's resources (the operator role)")
	fl.StringVar(&f.principal, "principal", "", "one principal's resources, as the server names them (cn:alice; \"\" the anonymous one) (the operator role)")
	fl.IntVar(&f.max, "max", 100, "the most to list on a page (1 to 1000)")
	fl.StringVar(&f.after, "after", "", "start after this name: the NAME a previous page ended with")
	fl.StringVar(&f.covers, "covers", "", "leases: only those covering this (mailbox registration, renewal set, lock set, lock owner, …)")
	fl.StringVar(&f.state, "state", "", "transactions: only those in this state")
	fl.StringVar(&f.serviceType, "type", "", "lookup-items: only those of this service type")
	cmd.MarkFlagsMutuallyExclusive("all", "principal")
	_ = cmd.RegisterFlagCompletionFunc("state", completeWords(lsTxnStates...))
	return cmd
}

func lsKindNames() string {
	var out []string
	for _, k := range lsKinds {
		out = append(out, k.name)
	}
	return strings.Join(out, ", ")
}

func lsKindCompletion(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var out []string
	for _, k := range lsKinds {
		out = append(out, k.name+"\t"+k.what)
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// query checks the flags against the kind and makes the request.
func (f *lsFlags) query(k lsKind) (client.ResourceQuery, error) {
	if f.max < 1 || f.max > 1000 {
		return client.ResourceQuery{}, fmt.Errorf("--max %d: want 1 to 1000", f.max)
	}
	q := client.ResourceQuery{Kind: k.name, After: f.after, Max: f.max, All: f.all}
	if f.hasPrincipal {
		q.Principal = &f.principal
	}
	for flag, v := range map[string]string{"covers": f.covers, "state": f.state, "type": f.serviceType} {
		if v == "" {
			continue
		}
		if k.filter != flag {
			return client.ResourceQuery{}, fmt.Errorf("--%s: %s take no such filter", flag, k.name)
		}
		if flag == "state" && !slices.Contains(lsTxnStates, strings.ToLower(v)) {
			return client.ResourceQuery{}, fmt.Errorf("--state %q: want %s", v, strings.Join(lsTxnStates, ", "))
		}
		q.Filter = map[string]string{lsFilterKeys[flag]: v}
	}
	return q, nil
}

// resourcesView is what ls prints: one page.
type resourcesView struct {
	Kind      string           `json:"kind"`
	Total     int              `json:"total"`
	Resources []map[string]any `json:"resources"`
	// Next is the --after of the next page; null on the last.
	Next *string `json:"next"`
}

// viewResources is a page in the JSON convention: a resource is its
// name, principal, lease (its short name, or null), expiration and time
// left, and its kind's details, typed.
func viewResources(k lsKind, page *client.ResourcePage, now time.Time) resourcesView {
	v := resourcesView{Kind: k.name, Total: page.Total, Resources: []map[string]any{}}
	if page.Next != "" {
		v.Next = &page.Next
	}
	for _, r := range page.Resources {
		row := map[string]any{"name": r.Name, "principal": r.Principal, "lease": nil, "expiration": jsonInstant(r.Expires), "remaining": nil, "redacted": r.Redacted}
		if r.Redacted {
			row["lease"] = "(redacted)"
		}
		if !r.Lease.IsZero() || r.Redacted {
			if !r.Lease.IsZero() {
				row["lease"] = r.Lease.String()
			}
			left := djinn.Forever
			if r.Expires.Before(djinn.EndOfTime) {
				left = max(r.Expires.Sub(now), 0).Round(time.Millisecond) // as a lease's remaining time shows everywhere
			}
			row["remaining"] = jsonDuration(left)
		}
		for _, col := range k.columns {
			row[col] = detailJSON(col, r.Details[col])
		}
		v.Resources = append(v.Resources, row)
	}
	return v
}

// detailJSON is a detail's value in JSON: a count, a flag, a list, or a
// string (null for none).
func detailJSON(name, s string) any {
	switch {
	case lsCounts[name]:
		n, _ := strconv.Atoi(s)
		return n
	case name == "transactional":
		return s == "true"
	case lsLists[name]:
		if s == "" {
			return []string{}
		}
		return strings.Split(s, ",")
	case s == "":
		return nil
	}
	return s
}

// printResources prints a page as a table, with the principal when others'
// are listed.
func printResources(w io.Writer, k lsKind, v resourcesView, principals bool) {
	if len(v.Resources) == 0 {
		if v.Total == 0 {
			fmt.Fprintf(w, "no %s\n", k.name)
		} else {
			fmt.Fprintf(w, "none after --after: %d in all\n", v.Total)
		}
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	head := []string{"NAME"}
	if principals {
		head = append(head, "PRINCIPAL")
	}
	for _, c := range k.columns {
		head = append(head, strings.ToUpper(strings.ReplaceAll(c, "_", " ")))
	}
	fmt.Fprintln(tw, strings.Join(append(head, "LEFT"), "\t"))
	for _, r := range v.Resources {
		cells := []string{r["name"].(string)}
		if principals {
			cells = append(cells, fmt.Sprintf("%q", r["principal"]))
		}
		for _, c := range k.columns {
			cells = append(cells, detailText(r[c]))
		}
		fmt.Fprintln(tw, strings.Join(append(cells, leftText(r)), "\t"))
	}
	tw.Flush()
	if v.Next != nil {
		fmt.Fprintf(w, "%d of %d shown; the next page: djinn ls %s --after %s\n", len(v.Resources), v.Total, k.name, *v.Next)
	}
}

func detailText(v any) string {
	switch x := v.(type) {
	case nil:
		return "-"
	case []string:
		if len(x) == 0 {
			return "-"
		}
		return strings.Join(x, ",")
	}
	return fmt.Sprint(v)
}

// leftText is a resource's time left: a duration, forever, or "(ended)"
// for a resource without a lease any more.
func leftText(r map[string]any) string {
	d, ok := r["remaining"].(durationJSON)
	switch {
	case !ok:
		return "(ended)"
	case d.Seconds == nil:
		return d.Human
	}
	return (time.Duration(*d.Seconds * float64(time.Second))).Round(time.Second).String()
}

// listResourceIDs lists the names of the caller's resources of kind (a
// completion's kind: mailbox, renewal, lock, lds, lease) at c's server, as
// "NAME\tdescription".
func (g *globals) listResourceIDs(ctx context.Context, c *client.Client, kind string) ([]string, error) {
	k, ok := findLsKind(kind)
	if !ok {
		return nil, nil
	}
	page, err := c.Resources(ctx, client.ResourceQuery{Kind: k.name, Max: 1000})
	if err != nil {
		return nil, err
	}
	out := make([]string, len(page.Resources))
	for i, r := range page.Resources {
		var desc []string
		for _, col := range k.columns {
			if v := r.Details[col]; v != "" {
				desc = append(desc, col+"="+v)
			}
		}
		out[i] = r.Name + "\t" + strings.Join(desc, " ")
	}
	return out, nil
}
