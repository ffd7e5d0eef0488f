package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/discovery"
)

// The lookup discovery service's commands. A registration is named by its
// lease token, which register prints: the token's cookie is the capability
// the service checks, and its landlord is the server to call.

func (g *globals) ldsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "lds",
		Short: "The lookup discovery service: discovery of lookup services on a listener's behalf",
		Long: "The lookup discovery service runs group and locator discovery for its registrations and sends " +
			"each registration's listener discovered and discarded events (remote events whose payload names " +
			"the lookup services and their member groups). A registration is named by its lease: its short name " +
			"REG, which `djinn lds register` prints, or its token; `djinn lease renew|cancel REG` keep or end it.",
	}
	cmd.AddCommand(g.ldsRegisterCmd(), g.ldsShowCmd(), g.ldsRegistrarsCmd(), g.ldsSetCmd("groups"), g.ldsSetCmd("locators"), g.ldsDiscardCmd())
	return cmd
}

// ldsGroupsFlag reads --groups and --all-groups: the public group is the
// empty name, so --groups "" is the public group alone and --groups ,lab
// the public group and lab.
func ldsGroupsFlag(cmd *cobra.Command, groups []string, all bool) (bool, []string, error) {
	set := cmd.Flags().Changed("groups")
	if all && set {
		return false, nil, usageError{errors.New("--all-groups and --groups: choose one")}
	}
	if set && len(groups) == 0 {
		groups = []string{""}
	}
	return all, groups, nil
}

// ldsLocators checks jini:// locators and returns them canonical.
func ldsLocators(what string, locs []string) ([]string, error) {
	out := make([]string, 0, len(locs))
	for _, s := range locs {
		l, err := discovery.ParseLocator(s)
		if err != nil {
			return nil, usageError{fmt.Errorf("%s %q: %w", what, s, err)}
		}
		out = append(out, l.String())
	}
	return out, nil
}

// withLDS calls fn with the server's lookup discovery service.
func (g *globals) withLDS(cmd *cobra.Command, fn func(ctx context.Context, c *client.Client, lds *client.LookupDiscoveryService) error) error {
	ctx := cmd.Context()
	c, err := g.dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	lds, err := whenReady(ctx, cmd.ErrOrStderr(), g.waitTimeout, serving(c, (*client.Status).LookupDiscovery))
	if err != nil {
		return err
	}
	return fn(ctx, c, lds)
}

// withLDSRegistration calls fn with the registration named in args or by
// the old --token: its lease's name or token.
func (g *globals) withLDSRegistration(cmd *cobra.Command, args []string, token string, fn func(ctx context.Context, r *client.LDSRegistration) error) error {
	name, err := ldsRegistration(args, token)
	if err != nil {
		return err
	}
	return g.withLDS(cmd, func(ctx context.Context, c *client.Client, lds *client.LookupDiscoveryService) error {
		l, err := leaseArg(ctx, c, "REG", name)
		if err != nil {
			return err
		}
		r, err := lds.Registration(ctx, l)
		if err != nil {
			return err
		}
		return fn(ctx, r)
	})
}

// ldsRegistration reads a registration's name: the argument or --token,
// given once.
func ldsRegistration(args []string, token string) (string, error) {
	if len(args) > 0 {
		if token != "" && token != args[0] {
			return "", usageError{errors.New("--token: the registration is named twice: give its name once")}
		}
		token = args[0]
	}
	if token == "" {
		return "", usageError{errors.New("REG: missing: the registration's name (or its lease token), which `djinn lds register` prints")}
	}
	return token, checkLeaseArg("REG", token)
}

// ldsTokenFlag registers the old --token, hidden: the registration is the
// argument.
func ldsTokenFlag(cmd *cobra.Command, token *string) {
	cmd.Flags().StringVar(token, "token", "", "the registration: give it as the argument")
	cmd.Flags().Lookup("token").Hidden = true
}

// ldsStateView is a registration as show prints it.
type ldsStateView struct {
	Registration string   `json:"registration"`
	EventID      string   `json:"event_id"`
	AllGroups    bool     `json:"all_groups"`
	Groups       []string `json:"groups"`
	Locators     []string `json:"locators"`
	Sequence     string   `json:"sequence"`
	Expires      *string  `json:"expires"` // null: never
}

func viewLDSState(r *client.LDSRegistration, st *client.LDSState) ldsStateView {
	v := ldsStateView{Registration: r.EventRegistration().Lease.Cookie().String(), EventID: jsonInt(st.EventID), AllGroups: st.Groups.All,
		Groups: orEmpty(st.Groups.Names), Locators: orEmpty(st.Locators), Sequence: jsonInt(st.Seq)}
	if !st.Expires.IsZero() {
		v.Expires = jsonInstant(st.Expires)
	}
	return v
}

// printLDSState prints the registration's state.
func (g *globals) printLDSState(ctx context.Context, cmd *cobra.Command, r *client.LDSRegistration) error {
	st, err := r.State(ctx)
	if err != nil {
		return err
	}
	v := viewLDSState(r, st)
	return g.print(cmd.OutOrStdout(), v, func(w io.Writer) {
		groups := "(all)"
		if !v.AllGroups {
			groups = discoveryGroupsText(v.Groups)
		}
		locs := strings.Join(v.Locators, " ")
		if locs == "" {
			locs = "(none)"
		}
		expires := "never"
		if v.Expires != nil {
			expires = *v.Expires
		}
		fmt.Fprintf(w, "registration  %s\nevent id      %s\ngroups        %s\nlocators      %s\nsequence      %s\nexpires       %s\n",
			v.Registration, v.EventID, groups, locs, v.Sequence, expires)
	})
}

const ldsRegisterHelp = "Make a registration: the lookup discovery service discovers the lookup services of the groups " +
	"(--all-groups: of every group; neither flag: none, until groups are added) and at the locators, " +
	"and sends the listener discovered and discarded events (`djinn events listen` hosts one and prints " +
	"them). Prints the registration's name REG (its lease's short name), which the other lds commands " +
	"and `djinn lease renew|cancel` take, and its event id.\n\n" +
	"--groups takes comma-separated names; the public group is the empty name: --groups \"\" is the " +
	"public group alone, --groups ,lab the public group and lab."

// ldsRegisteredView is what lds register prints.
type ldsRegisteredView struct {
	Registration string    `json:"registration"`
	EventID      string    `json:"event_id"`
	Lease        leaseView `json:"lease"`
}

func (g *globals) ldsRegisterCmd() *cobra.Command {
	var (
		groups, locators      []string
		allGroups             bool
		listener, d, handback string
	)
	cmd := &cobra.Command{
		Use:   "register [--groups a,b | --all-groups] [--locator jini://host:port]… --listener REF [--lease D]",
		Short: "Register a listener for discovered and discarded events; prints the registration's name REG",
		Long:  ldsRegisterHelp,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			all, gs, err := ldsGroupsFlag(cmd, groups, allGroups)
			if err != nil {
				return err
			}
			locs, err := ldsLocators("--locator", locators)
			if err != nil {
				return err
			}
			ref, err := parseRef("listener", listener)
			if err != nil {
				return err
			}
			dur, err := parseLease(d)
			if err != nil {
				return err
			}
			return g.withLDS(cmd, func(ctx context.Context, _ *client.Client, lds *client.LookupDiscoveryService) error {
				r, err := lds.Register(ctx, client.Groups{All: all, Names: gs}, locs, ref, []byte(handback), dur)
				if err != nil {
					return err
				}
				er := r.EventRegistration()
				g.noticeClamp(cmd, "registration's lease", "the server's [lds] max-lease setting", dur, er.Lease)
				v := ldsRegisteredView{Registration: er.Lease.Cookie().String(), EventID: jsonInt(er.ID), Lease: viewLease(er.Lease)}
				return g.print(cmd.OutOrStdout(), v, func(w io.Writer) {
					fmt.Fprintf(w, "registration  %s\nevent id      %s\nexpires       %s\ntoken         %s\n", v.Registration, v.EventID, v.Lease.expiresText(), v.Lease.Token)
				})
			})
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&groups, "groups", nil, `groups to discover, comma-separated ("" is the public group)`)
	f.BoolVar(&allGroups, "all-groups", false, "discover the lookup services of every group")
	f.StringArrayVar(&locators, "locator", nil, "a lookup service to discover by unicast, jini://host[:port] (repeatable)")
	f.StringVar(&listener, "listener", "", "reference of the listener the events go to (djinn events listen prints one)")
	leaseFlag(cmd, &d, "the registration")
	f.StringVar(&handback, "handback", "", "handback bytes the events carry, as text")
	return cmd
}

func (g *globals) ldsShowCmd() *cobra.Command {
	var token string
	cmd := &cobra.Command{
		Use:               "show REG",
		ValidArgsFunction: g.completeIDs("lds"),
		Short:             "Show a registration: event id, managed groups and locators, last sequence number, expiry",
		Args:              cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withLDSRegistration(cmd, args, token, func(ctx context.Context, r *client.LDSRegistration) error {
				return g.printLDSState(ctx, cmd, r)
			})
		},
	}
	ldsTokenFlag(cmd, &token)
	return cmd
}

func (g *globals) ldsRegistrarsCmd() *cobra.Command {
	var token string
	cmd := &cobra.Command{
		Use:               "registrars REG",
		ValidArgsFunction: g.completeIDs("lds"),
		Short:             "List the lookup services discovered for a registration: service id, endpoint, locator, groups",
		Args:              cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withLDSRegistration(cmd, args, token, func(ctx context.Context, r *client.LDSRegistration) error {
				rs, err := r.Registrars(ctx)
				var partial *client.RegistrarsError
				if err != nil && !errors.As(err, &partial) {
					return err
				}
				// Partial results: print the lookup services read, then
				// fail with why the others could not be.
				views := viewDiscovered(rs)
				if perr := g.print(cmd.OutOrStdout(), views, func(w io.Writer) { printRegistrars(w, views) }); perr != nil {
					return perr
				}
				return err
			})
		},
	}
	ldsTokenFlag(cmd, &token)
	return cmd
}

// viewDiscovered converts lookup services the service discovered for
// printing.
func viewDiscovered(rs []client.DiscoveredRegistrar) []registrarView {
	views := make([]registrarView, 0, len(rs))
	for _, r := range rs {
		gs := r.Groups
		if gs == nil {
			gs = []string{}
		}
		views = append(views, registrarView{ServiceID: r.ServiceID.String(), Endpoint: r.Endpoint, Locator: r.Locator, Groups: gs})
	}
	return views
}

// ldsSetHelp is the long help of lds groups and lds locators.
var ldsSetHelp = map[string]string{
	"groups": "Add, set or remove groups of the registration's managed set (comma-separated; \"\" is the public " +
		"group, so `set REG \"\"` is the public group alone and `set REG ,lab` the public group and lab). " +
		"`set REG --all-groups` discovers every group; add and remove need a managed set (not all groups). " +
		"Discovered lookup services that are no longer of interest by group or locator are discarded; " +
		"prints the registration afterwards.",
	"locators": "Add, set or remove jini:// locators of the registration's managed set (comma-separated). " +
		"Discovered lookup services that are no longer of interest by locator or group are discarded; " +
		"prints the registration afterwards.",
}

// ldsSetCmd is `lds groups add|set|remove` or `lds locators add|set|remove`.
func (g *globals) ldsSetCmd(what string) *cobra.Command {
	var allGroups bool
	cmd := &cobra.Command{
		Use:   what + " add|set|remove REG " + map[string]string{"groups": "a,b", "locators": "jini://host:port…"}[what],
		Short: "Change a registration's managed set of " + what,
		Long:  ldsSetHelp[what],
		Args:  cobra.RangeArgs(2, 3),
		RunE: func(cmd *cobra.Command, args []string) error {
			op := args[0]
			if op != "add" && op != "set" && op != "remove" {
				return usageError{fmt.Errorf("%q: want add, set or remove", op)}
			}
			var values []string
			if len(args) == 3 {
				values = strings.Split(args[2], ",")
			}
			if allGroups && (op != "set" || len(args) == 3) {
				return usageError{errors.New("--all-groups: only with set, and without groups")}
			}
			if !allGroups && len(args) == 2 && op != "set" {
				return usageError{fmt.Errorf("%s %s: missing: the %s to %s", what, op, what, op)}
			}
			change, err := ldsChange(what, op, values, allGroups)
			if err != nil {
				return err
			}
			return g.withLDSRegistration(cmd, args[1:2], "", func(ctx context.Context, r *client.LDSRegistration) error {
				if err := change(ctx, r); err != nil {
					return err
				}
				return g.printLDSState(ctx, cmd, r)
			})
		},
	}
	if what == "groups" {
		cmd.Flags().BoolVar(&allGroups, "all-groups", false, "with set: discover every group")
	}
	return cmd
}

// ldsChange returns the change op makes to a registration's groups or
// locators.
func ldsChange(what, op string, values []string, allGroups bool) (func(ctx context.Context, r *client.LDSRegistration) error, error) {
	if what == "groups" {
		return func(ctx context.Context, r *client.LDSRegistration) error {
			switch {
			case allGroups:
				return r.SetAllGroups(ctx)
			case op == "add":
				return r.AddGroups(ctx, values...)
			case op == "set":
				return r.SetGroups(ctx, values...)
			}
			return r.RemoveGroups(ctx, values...)
		}, nil
	}
	var locs []string
	for _, s := range values {
		if s = strings.TrimSpace(s); s != "" {
			locs = append(locs, s)
		}
	}
	locs, err := ldsLocators("locator", locs)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, r *client.LDSRegistration) error {
		switch op {
		case "add":
			return r.AddLocators(ctx, locs...)
		case "set":
			return r.SetLocators(ctx, locs...)
		}
		return r.RemoveLocators(ctx, locs...)
	}, nil
}

func (g *globals) ldsDiscardCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "discard REG REGISTRAR-ID",
		Short: "Discard a discovered lookup service for a registration, making it eligible for rediscovery",
		Long: "Discard the lookup service REGISTRAR-ID (its service id, as `djinn lds registrars` prints it) for the " +
			"registration: it gets a discarded event, and a discovered event when the lookup service is found " +
			"again. Exits 1 when the lookup service was not among the registration's discovered ones.",
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := djinn.ParseID(args[1])
			if err != nil {
				return usageError{fmt.Errorf("REGISTRAR-ID %q: %w", args[1], err)}
			}
			return g.withLDSRegistration(cmd, args[:1], "", func(ctx context.Context, r *client.LDSRegistration) error {
				ok, err := r.Discard(ctx, id)
				if err != nil {
					return err
				}
				if err := g.print(cmd.OutOrStdout(), map[string]any{"registrar": id.String(), "discarded": ok}, func(w io.Writer) {
					if ok {
						fmt.Fprintf(w, "discarded %s\n", id)
					} else {
						fmt.Fprintf(w, "%s was not discovered for the registration: nothing discarded\n", id)
					}
				}); err != nil || ok {
					return err
				}
				return negative{fmt.Sprintf("registrar %s: not among the registration's discovered lookup services (lds registrars lists them)", id)}
			})
		},
	}
}
