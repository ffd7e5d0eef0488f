package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/discovery"
)

type registrarView struct {
	ServiceID string   `json:"service_id"`
	Endpoint  string   `json:"endpoint"`
	Locator   string   `json:"locator"`
	Groups    []string `json:"groups"`
}

func viewRegistrar(r discovery.RegistrarInfo) registrarView {
	v := registrarView{ServiceID: r.ServiceID.String(), Endpoint: r.Endpoint, Locator: r.Locator.String(), Groups: r.Groups}
	if v.Groups == nil {
		v.Groups = []string{}
	}
	return v
}

// discoveryGroupsText shows member groups: the public group as "", none as (none).
func discoveryGroupsText(gs []string) string {
	if len(gs) == 0 {
		return "(none)"
	}
	out := make([]string, len(gs))
	for i, g := range gs {
		out[i] = g
		if g == "" {
			out[i] = `""`
		}
	}
	return strings.Join(out, ",")
}

const discoverHelp = "Find lookup services (registrars) and list each once: its service id, gRPC endpoint, " +
	"locator and member groups (the public group shows as \"\").\n\n" +
	"With --locator only, it runs unicast discovery at each locator, retrying until it answers or --wait " +
	"passes, and exits as soon as all have answered. With --groups or --all-groups, or with no flags at all " +
	"(the public group), it also runs multicast discovery for --wait: on a network without multicast it " +
	"finds nothing, prints nothing and exits 0. A locator that never answered is an error, after the list.\n\n" +
	"--groups takes comma-separated names; the public group is the empty name: --groups \"\" is the public " +
	"group alone, --groups ,lab the public group and lab."

// discoverFlags are discover's flags, and what they mean once checked.
type discoverFlags struct {
	groups     []string
	allGroups  bool
	locators   []string
	interfaces []string
	timeout    string

	wait      time.Duration
	locs      []discovery.Locator
	multicast bool
}

// check checks the flags; groupsSet is whether --groups was given.
func (f *discoverFlags) check(groupsSet bool) error {
	d, err := time.ParseDuration(f.timeout)
	if err != nil || d <= 0 {
		return usageError{fmt.Errorf("--wait %q: want a positive Go duration", f.timeout)}
	}
	f.wait = d
	if f.allGroups && groupsSet {
		return usageError{errors.New("--all-groups and --groups: choose one")}
	}
	for _, s := range f.locators {
		l, err := discovery.ParseLocator(s)
		if err != nil {
			return usageError{fmt.Errorf("--locator %q: %w", s, err)}
		}
		if !slices.Contains(f.locs, l) {
			f.locs = append(f.locs, l)
		}
	}
	f.multicast = f.allGroups || groupsSet || len(f.locs) == 0
	if f.multicast && !f.allGroups && len(f.groups) == 0 {
		f.groups = []string{""} // the public group: the default, or --groups ""
	}
	return nil
}

// run discovers for the flags' time and returns the registrars found,
// each once, and an error naming the locators that never answered.
func (f *discoverFlags) run(ctx context.Context) ([]registrarView, error) {
	ctx, cancel := context.WithTimeout(ctx, f.wait)
	defer cancel()
	var ld *discovery.LookupDiscovery
	if f.multicast {
		var err error
		ld, err = discovery.NewLookupDiscovery(discovery.LookupDiscoveryConfig{Groups: f.groups, AllGroups: f.allGroups, Interfaces: f.interfaces})
		if err != nil {
			return nil, fmt.Errorf("multicast discovery: %w", err)
		}
		defer ld.Close()
	}
	found, failed := discoverLocators(ctx, f.locs, f.wait)
	if f.multicast {
		<-ctx.Done()
		found = append(found, ld.Registrars()...)
	}
	vs := []registrarView{}
	seen := map[djinn.ID]bool{}
	for _, r := range found {
		if !seen[r.ServiceID] {
			seen[r.ServiceID] = true
			vs = append(vs, viewRegistrar(r))
		}
	}
	return vs, failed
}

func (g *globals) discoverCmd() *cobra.Command {
	f := &discoverFlags{}
	cmd := &cobra.Command{
		Use:   "discover [--groups a,b | --all-groups] [--locator jini://host:port]… [--wait D]",
		Short: "Find lookup services by multicast (groups) and unicast (locators) discovery",
		Long:  discoverHelp,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.check(cmd.Flags().Changed("groups")); err != nil {
				return err
			}
			vs, failed := f.run(cmd.Context())
			if vs == nil {
				return failed
			}
			if err := g.print(cmd.OutOrStdout(), vs, func(w io.Writer) { printRegistrars(w, vs) }); err != nil {
				return err
			}
			return failed
		},
	}
	fs := cmd.Flags()
	fs.StringSliceVar(&f.groups, "groups", nil, `groups to discover by multicast, comma-separated ("" is the public group; the default with no --locator)`)
	fs.BoolVar(&f.allGroups, "all-groups", false, "discover the lookup services of every group by multicast")
	fs.StringArrayVar(&f.locators, "locator", nil, "a lookup service's unicast discovery address, jini://host[:port] (repeatable)")
	fs.StringArrayVar(&f.interfaces, "interface", nil, "network interface for multicast (repeatable; default every multicast-capable one)")
	fs.StringVar(&f.timeout, "wait", "5s", "how long to discover: multicast listens this long; unicast retries until then")
	alias(fs, "timeout", "wait")
	return cmd
}

// printRegistrars prints registrars one a line.
func printRegistrars(w io.Writer, vs []registrarView) {
	for _, v := range vs {
		fmt.Fprintf(w, "%s  %s  %s  groups=%s\n", v.ServiceID, v.Endpoint, v.Locator, discoveryGroupsText(v.Groups))
	}
}

// notDiscovery reports whether err says a port answered, but not with
// the discovery protocol: another protocol version (a gRPC port's HTTP/2
// settings frame reads as version 4612) or bytes that break the layout.
// Asking it again would get the same.
func notDiscovery(err error) bool {
	return errors.Is(err, discovery.ErrVersion) || errors.Is(err, discovery.ErrMalformed)
}

// discoverLocators runs unicast discovery at each locator at once, retrying each
// until it answers or ctx ends. It returns the answers in the locators'
// order and an error naming each locator that never answered.
func discoverLocators(ctx context.Context, locs []discovery.Locator, timeout time.Duration) ([]discovery.RegistrarInfo, error) {
	answers := make([]*discovery.RegistrarInfo, len(locs))
	errs := make([]error, len(locs))
	var wg sync.WaitGroup
	for i, loc := range locs {
		wg.Go(func() {
			var last error
			for wait := 50 * time.Millisecond; ; wait = min(2*wait, time.Second) {
				info, err := discovery.Unicast(ctx, loc)
				if err == nil {
					answers[i] = &info
					return
				}
				if notDiscovery(err) {
					errs[i] = fmt.Errorf("--locator %s: the port did not answer the discovery protocol, perhaps it is a server's gRPC port: "+
						"give the port djinn serve's --discovery sets (127.0.0.1:4160 by default) (%w)", loc, err)
					return
				}
				if last == nil || ctx.Err() == nil {
					last = err // not the cancellation that cut an attempt short
				}
				t := time.NewTimer(wait)
				select {
				case <-ctx.Done():
					t.Stop()
					errs[i] = fmt.Errorf("--locator %s: no answer within %s: %w", loc, timeout, last)
					return
				case <-t.C:
				}
			}
		})
	}
	wg.Wait()
	var found []discovery.RegistrarInfo
	for _, a := range answers {
		if a != nil {
			found = append(found, *a)
		}
	}
	var msgs []string
	for _, err := range errs {
		if err != nil {
			msgs = append(msgs, err.Error())
		}
	}
	if len(msgs) > 0 {
		return found, errors.New(strings.Join(msgs, "; ")) // one line
	}
	return found, nil
}
