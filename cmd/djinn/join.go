package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/proto/djinnpb"
	"github.com/djinn-go/djinn/service"
)

// The join commands administer how the cluster's services join lookup
// services (djinn.v1.JoinAdmin, River's JoinAdmin).

const joinHelp = "Every service of a djinn cluster — landlord, mailbox, renewal, txn, lock, lds, and each node's kv — " +
	"registers in the lookup services it discovers, so that clients find it by type (djinn find): by group " +
	"(over multicast, when the servers run with [lookup-join] multicast on), at its locators, and at the " +
	"cluster's own lookup service. Its groups, locators and attributes come from the servers' configuration " +
	"([lookup-join]) until an operator sets them here; what an operator set holds across restarts and " +
	"failovers until `join reset`. Changes reach the lookup services at once. SERVICE is a service's name, " +
	"or all for every service. Reading needs any client; changing needs the operator role."

func (g *globals) joinCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "join",
		Short: "Show and change how the cluster's services join lookup services: groups, locators, attributes",
		Long:  joinHelp,
	}
	cmd.AddCommand(g.joinListCmd(), g.joinShowCmd(), g.joinSetCmd("groups"), g.joinSetCmd("locators"), g.joinAttrsCmd(), g.joinResetCmd())
	return cmd
}

// joinView is one service's join as the join commands print it.
type joinView struct {
	Service              string            `json:"service"`
	ServiceID            *string           `json:"service_id"` // null until first registered
	Types                []string          `json:"types"`
	Running              bool              `json:"running"`
	Groups               []string          `json:"groups"`
	GroupsConfigured     bool              `json:"groups_configured"`
	Locators             []string          `json:"locators"`
	LocatorsConfigured   bool              `json:"locators_configured"`
	Attributes           []lookupEntryView `json:"attributes"`
	AttributesConfigured bool              `json:"attributes_configured"`
	ServiceAttributes    []lookupEntryView `json:"service_attributes"`
	Registrars           []registrarView   `json:"registrars"`
}

// entryViews shows entries as the lookup commands show an item's.
func entryViews(pbs []*djinnpb.Entry) []lookupEntryView {
	var es []service.Entry
	for _, pb := range pbs {
		es = append(es, client.EntryFromProto(pb))
	}
	return viewLookupItem(service.Item{Entries: es}).Attrs
}

func viewJoin(j *djinnpb.JoinInfo) joinView {
	v := joinView{Service: j.GetService(), Types: orEmpty(j.GetTypes()), Running: j.GetRunning(),
		Groups: orEmpty(j.GetGroups().GetGroups()), GroupsConfigured: j.GetGroups().GetConfigured(),
		Locators: orEmpty(j.GetLocators().GetLocators()), LocatorsConfigured: j.GetLocators().GetConfigured(),
		Attributes: entryViews(j.GetAttributes().GetAttributes()), AttributesConfigured: j.GetAttributes().GetConfigured(),
		ServiceAttributes: entryViews(j.GetAttributes().GetServiceAttributes()), Registrars: []registrarView{}}
	if id, err := djinn.IDFromBytes("service id", j.GetServiceId()); err == nil && !id.IsZero() {
		s := id.String()
		v.ServiceID = &s
	}
	for _, r := range j.GetRegistrars() {
		id, _ := djinn.IDFromBytes("registrar", r.GetServiceId())
		v.Registrars = append(v.Registrars, registrarView{ServiceID: id.String(), Endpoint: r.GetEndpoint(), Locator: r.GetLocator(), Groups: orEmpty(r.GetGroups())})
	}
	return v
}

// configured marks a setting the configuration gives, not an operator.
func configured(yes bool) string {
	if yes {
		return "  (configured)"
	}
	return "  (set by an operator)"
}

func entriesText(vs []lookupEntryView) string {
	if len(vs) == 0 {
		return "(none)"
	}
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = v.text
	}
	return strings.Join(out, "  ")
}

func printJoin(w io.Writer, v joinView) {
	id := "(not yet registered)"
	if v.ServiceID != nil {
		id = *v.ServiceID
	}
	state := "running"
	if !v.Running {
		state = "off"
	}
	fmt.Fprintf(w, "service     %s (%s)\nservice id  %s\ntypes       %s\n", v.Service, state, id, strings.Join(v.Types, ", "))
	fmt.Fprintf(w, "groups      %s%s\n", discoveryGroupsText(v.Groups), configured(v.GroupsConfigured))
	locs := "(none)"
	if len(v.Locators) > 0 {
		locs = strings.Join(v.Locators, ",")
	}
	fmt.Fprintf(w, "locators    %s%s\n", locs, configured(v.LocatorsConfigured))
	fmt.Fprintf(w, "attributes  %s%s\n", entriesText(v.Attributes), configured(v.AttributesConfigured))
	fmt.Fprintf(w, "its own     %s\n", entriesText(v.ServiceAttributes))
	fmt.Fprintf(w, "joined      %d lookup services\n", len(v.Registrars))
	for _, r := range v.Registrars {
		fmt.Fprintf(w, "  %s  %s  %s  groups=%s\n", r.ServiceID, r.Endpoint, r.Locator, discoveryGroupsText(r.Groups))
	}
}

// withJoin dials the cluster and calls run with its JoinAdmin client.
func (g *globals) withJoin(cmd *cobra.Command, run func(ctx context.Context, a djinnpb.JoinAdminClient) error) error {
	c, err := g.dial(cmd.Context())
	if err != nil {
		return err
	}
	defer c.Close()
	return run(cmd.Context(), djinnpb.NewJoinAdminClient(c.ClientConn()))
}

// joinChangeFunc changes one service's join.
type joinChangeFunc func(ctx context.Context, a djinnpb.JoinAdminClient, svc string) error

// joinEach is the shape of every join command that names SERVICE|all: it
// dials the cluster, makes change (nil: none) to each service name names,
// in turn, stopping at the first that fails, and prints their joins.
func (g *globals) joinEach(cmd *cobra.Command, name string, change joinChangeFunc) error {
	return g.withJoin(cmd, func(ctx context.Context, a djinnpb.JoinAdminClient) error {
		services, err := joinServices(ctx, a, name)
		if err != nil {
			return err
		}
		for _, s := range services {
			if change == nil {
				break
			}
			if err := change(ctx, a, s); err != nil {
				return err
			}
		}
		return g.printJoins(ctx, cmd, a, services)
	})
}

// joinServices returns the services SERVICE names: one, or every one for
// all.
func joinServices(ctx context.Context, a djinnpb.JoinAdminClient, name string) ([]string, error) {
	if name != "all" {
		return []string{name}, nil
	}
	ls, err := a.ListJoins(ctx, &djinnpb.ListJoinsRequest{})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, j := range ls.GetJoins() {
		out = append(out, j.GetService())
	}
	return out, nil
}

// printJoins prints the joins of services, as join show does.
func (g *globals) printJoins(ctx context.Context, cmd *cobra.Command, a djinnpb.JoinAdminClient, services []string) error {
	ls, err := a.ListJoins(ctx, &djinnpb.ListJoinsRequest{})
	if err != nil {
		return err
	}
	var vs []joinView
	for _, j := range ls.GetJoins() {
		for _, s := range services {
			if j.GetService() == s {
				vs = append(vs, viewJoin(j))
			}
		}
	}
	if len(vs) == 0 {
		return djinn.Errorf(djinn.InvalidArgument, "service %q: no such service joins lookup services; djinn join ls lists those that do", strings.Join(services, ","))
	}
	var doc any = vs
	if len(vs) == 1 {
		doc = vs[0]
	}
	return g.print(cmd.OutOrStdout(), doc, func(w io.Writer) {
		for i, v := range vs {
			if i > 0 {
				fmt.Fprintln(w)
			}
			printJoin(w, v)
		}
	})
}

func (g *globals) joinListCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "ls",
		Short: "List every service's join: its service id, groups, locators, attributes and the lookup services it is registered at",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.withJoin(cmd, func(ctx context.Context, a djinnpb.JoinAdminClient) error {
				ls, err := a.ListJoins(ctx, &djinnpb.ListJoinsRequest{})
				if err != nil {
					return err
				}
				vs := []joinView{}
				for _, j := range ls.GetJoins() {
					vs = append(vs, viewJoin(j))
				}
				return g.print(cmd.OutOrStdout(), vs, func(w io.Writer) {
					fmt.Fprintf(w, "%-9s %-32s %-11s %-10s %-10s %s\n", "SERVICE", "SERVICE ID", "JOINED", "GROUPS", "LOCATORS", "ATTRIBUTES")
					for _, v := range vs {
						id := "-"
						if v.ServiceID != nil {
							id = *v.ServiceID
						}
						fmt.Fprintf(w, "%-9s %-32s %-11s %-10s %-10d %s\n", v.Service, id, fmt.Sprintf("%d", len(v.Registrars)),
							discoveryGroupsText(v.Groups), len(v.Locators), entriesText(v.Attributes))
					}
				})
			})
		},
	}
}

func (g *globals) joinShowCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "show SERVICE|all",
		Short: "Show a service's join: its types, groups, locators, attributes (its own too) and the lookup services it is registered at",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.joinEach(cmd, args[0], nil)
		},
	}
}

// joinSetHelp is the long help of join groups and join locators.
var joinSetHelp = map[string]string{
	"groups": "Add, set or remove the groups a service joins lookup services by (comma-separated; \"\" is the public " +
		"group, so `set txn \"\"` is the public group alone and `set txn ,lab` the public group and lab; `set txn` " +
		"with no groups joins none by group). Lookup services of a group no longer joined are left at once. " +
		"Prints the service's join afterwards. Needs the operator role.",
	"locators": "Add, set or remove the jini:// locators of the lookup services a service joins (comma-separated). " +
		"Lookup services at a locator removed are left at once. Prints the service's join afterwards. Needs the operator role.",
}

// joinSetCmd is `join groups add|set|remove` or `join locators add|set|remove`.
func (g *globals) joinSetCmd(what string) *cobra.Command {
	return &cobra.Command{
		Use:   what + " add|set|remove SERVICE|all " + map[string]string{"groups": "a,b", "locators": "jini://host:port,…"}[what],
		Short: "Change the " + what + " a service joins lookup services by",
		Long:  joinSetHelp[what],
		Args:  cobra.RangeArgs(2, 3),
		RunE: func(cmd *cobra.Command, args []string) error {
			op := args[0]
			if _, ok := groupCalls[op]; !ok {
				return usageError{fmt.Errorf("%q: want add, set or remove", op)}
			}
			var values []string
			if len(args) == 3 {
				values = strings.Split(args[2], ",")
			} else if op != "set" {
				return usageError{fmt.Errorf("%s %s: missing: the %s to %s", what, op, what, op)}
			}
			return g.joinEach(cmd, args[1], func(ctx context.Context, a djinnpb.JoinAdminClient, svc string) error {
				return joinChange(ctx, a, what, op, svc, values)
			})
		},
	}
}

// The calls of join groups and join locators, by operation.
var (
	groupCalls = map[string]func(djinnpb.JoinAdminClient, context.Context, *djinnpb.JoinGroupsRequest, ...grpc.CallOption) (*djinnpb.JoinGroups, error){
		"add": djinnpb.JoinAdminClient.AddLookupGroups, "set": djinnpb.JoinAdminClient.SetLookupGroups, "remove": djinnpb.JoinAdminClient.RemoveLookupGroups,
	}
	locatorCalls = map[string]func(djinnpb.JoinAdminClient, context.Context, *djinnpb.JoinLocatorsRequest, ...grpc.CallOption) (*djinnpb.JoinLocators, error){
		"add": djinnpb.JoinAdminClient.AddLookupLocators, "set": djinnpb.JoinAdminClient.SetLookupLocators, "remove": djinnpb.JoinAdminClient.RemoveLookupLocators,
	}
)

// joinChange makes one change (op: add, set or remove) of a service's
// groups or locators.
func joinChange(ctx context.Context, a djinnpb.JoinAdminClient, what, op, svc string, values []string) error {
	if what == "groups" {
		_, err := groupCalls[op](a, ctx, &djinnpb.JoinGroupsRequest{Service: svc, Groups: values})
		return err
	}
	var locs []string
	for _, v := range values {
		if v = strings.TrimSpace(v); v != "" {
			locs = append(locs, v)
		}
	}
	_, err := locatorCalls[op](a, ctx, &djinnpb.JoinLocatorsRequest{Service: svc, Locators: locs})
	return err
}

const joinAttrsHelp = "Change the attributes an operator gives a service, which every lookup service it joins " +
	"then holds: add (an entry equal to one it has is dropped), set (replaces them all; none: no --attr), " +
	"modify (the entries each --match template matches get the fields of the --attr entry of the same " +
	"position: templates and changes go in pairs, by type), remove (deletes the entries --match matches). " +
	"The entries a service sets itself (net.jini.lookup.entry.ServiceInfo, djinn.Cluster) cannot be changed. " +
	"Prints the service's join afterwards. Needs the operator role.\n\n--attr and --match take an "

func (g *globals) joinAttrsCmd() *cobra.Command {
	var attrs, match []string
	cmd := &cobra.Command{
		Use:   "attrs add|set|modify|remove SERVICE|all [--attr Type.field=value]… [--match Type.field=value]…",
		Short: "Change the attributes an operator gives a service",
		Long:  joinAttrsHelp + attrSyntax + ".",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			change, err := joinAttrsChange(args[0], attrs, match)
			if err != nil {
				return err
			}
			return g.joinEach(cmd, args[1], change)
		},
	}
	cmd.Flags().StringArrayVar(&attrs, "attr", nil, "an entry's "+attrFlagHelp)
	cmd.Flags().StringArrayVar(&match, "match", nil, "with modify and remove: a template's "+attrFlagHelp)
	return cmd
}

// joinAttrsChange returns the change op makes to a service's attributes.
func joinAttrsChange(op string, attrs, match []string) (func(context.Context, djinnpb.JoinAdminClient, string) error, error) {
	es, err := service.ParseAttributes(attrs)
	if err != nil {
		return nil, usageError{fmt.Errorf("--attr: %w", err)}
	}
	ts, err := service.ParseAttributes(match)
	if err != nil {
		return nil, usageError{fmt.Errorf("--match: %w", err)}
	}
	entries := make([]*djinnpb.Entry, len(es))
	for i, e := range es {
		entries[i] = client.EntryToProto(e)
	}
	templates := make([]*djinnpb.EntryTemplate, len(ts))
	for i, t := range ts {
		templates[i] = client.EntryTemplateToProto(service.EntryTemplate{Type: t.Type, Fields: t.Fields})
	}
	switch op {
	case "add", "set":
		if len(match) > 0 {
			return nil, usageError{fmt.Errorf("attrs %s: --match goes with modify and remove", op)}
		}
		if op == "add" && len(es) == 0 {
			return nil, usageError{fmt.Errorf("attrs add: missing: the --attr entries to add")}
		}
		return func(ctx context.Context, a djinnpb.JoinAdminClient, svc string) error {
			req := &djinnpb.JoinAttributesRequest{Service: svc, Attributes: entries}
			if op == "add" {
				_, err := a.AddLookupAttributes(ctx, req)
				return err
			}
			_, err := a.SetLookupAttributes(ctx, req)
			return err
		}, nil
	case "modify", "remove":
		if len(ts) == 0 {
			return nil, usageError{fmt.Errorf("attrs %s: missing: the --match templates of the entries to %s", op, op)}
		}
		if op == "remove" {
			if len(es) > 0 {
				return nil, usageError{fmt.Errorf("attrs remove: --attr goes with add, set and modify")}
			}
			entries = make([]*djinnpb.Entry, len(ts)) // no type: delete what the template matches
			for i := range entries {
				entries[i] = &djinnpb.Entry{}
			}
		} else if len(es) != len(ts) {
			return nil, usageError{fmt.Errorf("attrs modify: %d --match templates and %d --attr entries (by type): they go in pairs", len(ts), len(es))}
		}
		return func(ctx context.Context, a djinnpb.JoinAdminClient, svc string) error {
			_, err := a.ModifyLookupAttributes(ctx, &djinnpb.JoinModifyRequest{Service: svc, Templates: templates, Changes: entries})
			return err
		}, nil
	}
	return nil, usageError{fmt.Errorf("%q: want add, set, modify or remove", op)}
}

func (g *globals) joinResetCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "reset SERVICE|all",
		Short: "Give a service's groups, locators and attributes back to the servers' configuration",
		Long: "Drop what operators set of a service's groups, locators and attributes: the configuration of the " +
			"leader ([lookup-join]) governs them again, on every leader to come. Needs the operator role.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.joinEach(cmd, args[0], func(ctx context.Context, a djinnpb.JoinAdminClient, svc string) error {
				_, err := a.ResetJoin(ctx, &djinnpb.JoinServiceRequest{Service: svc})
				return err
			})
		},
	}
}
