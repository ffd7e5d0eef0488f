package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/service"
)

const findHelp = "Find a service by type without knowing where it is, as a Jini client does (client.Find): " +
	"discover lookup services by group (multicast; a djinn lookup service answers it when its server runs " +
	"with --multicast) and at locators (unicast), ask them for an item of TYPE — djinn.TransactionManager, " +
	"djinn.EventMailbox, djinn.LeaseRenewalService, djinn.LockService, djinn.LookupDiscoveryService, " +
	"djinn.Landlord, djinn.KeyValue, or any type a lookup service holds — with the --attr attributes, and " +
	"print the first found: its service id, reference, types and attributes, and the lookup service it was " +
	"found at. Lookup services that hold none are asked again until --wait passes (exit status 1 then).\n\n" +
	"--groups takes comma-separated names (\"\" is the public group); without --groups and --locator, the " +
	"public group.\n\n--attr takes an "

// foundView is what find prints.
type foundView struct {
	lookupItemView
	Registrar string `json:"registrar"`
}

func (g *globals) findCmd() *cobra.Command {
	var (
		groups, locators, attrs, interfaces []string
		wait                                string
	)
	cmd := &cobra.Command{
		Use:   "find TYPE [--groups a,b] [--locator jini://host:port]… [--attr Type.field=value]… [--wait D]",
		Short: "Find a service by type through discovery and the lookup services found",
		Long:  findHelp + attrSyntax + ".",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			d, err := parseWait(wait)
			if err == nil && d == 0 {
				err = errors.New(`--wait "": want a positive Go duration`)
			}
			if err != nil {
				return usageError{err}
			}
			opts, err := g.findOptions(cmd, groups, locators, attrs, interfaces)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), d)
			defer cancel()
			found, err := client.Find(ctx, args[0], opts...)
			var why *djinn.Error
			if errors.Is(err, context.DeadlineExceeded) && cmd.Context().Err() == nil && errors.As(err, &why) {
				return fmt.Errorf("--wait %s passed: %w", d, why) // why says it all; the deadline's own text is noise
			}
			if err != nil {
				return err
			}
			defer found.Close()
			v := foundView{lookupItemView: viewLookupItem(found.Item), Registrar: found.Registrar.String()}
			return g.print(cmd.OutOrStdout(), v, func(w io.Writer) {
				fmt.Fprintf(w, "%s\nfound at lookup service %s\n", lookupItemText(v.lookupItemView), v.Registrar)
			})
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&groups, "groups", nil, `groups of the lookup services to discover by multicast, comma-separated ("" is the public group)`)
	f.StringArrayVar(&locators, "locator", nil, "a lookup service's unicast discovery address, jini://host[:port] (repeatable)")
	f.StringArrayVar(&attrs, "attr", nil, "a wanted "+attrFlagHelp)
	f.StringArrayVar(&interfaces, "interface", nil, "network interface for multicast (repeatable; default every multicast-capable one)")
	f.StringVar(&wait, "wait", "10s", "how long to look")
	f.StringVar(&g.tlsCA, "tls-ca", envOr("DJINN_TLS_CA", ""), "PEM CA that verifies the lookup services and the service: connect with TLS (or DJINN_TLS_CA)")
	f.StringVar(&g.cert, "tls-cert", envOr("DJINN_TLS_CERT", ""), "PEM client certificate, for mutual TLS (or DJINN_TLS_CERT)")
	f.StringVar(&g.key, "tls-key", envOr("DJINN_TLS_KEY", ""), "PEM key of --tls-cert (or DJINN_TLS_KEY)")
	return cmd
}

// findOptions turns find's flags into client.Find's options.
func (g *globals) findOptions(cmd *cobra.Command, groups, locators, attrs, interfaces []string) ([]client.FindOption, error) {
	if cmd.Flags().Changed("groups") && len(groups) == 0 {
		groups = []string{""} // --groups "": the public group
	}
	if len(groups) == 0 && len(locators) == 0 {
		groups = []string{""}
	}
	es, err := service.ParseAttributes(attrs)
	if err != nil {
		return nil, usageError{fmt.Errorf("--attr: %w", err)}
	}
	var tmpls []service.EntryTemplate
	for _, e := range es {
		tmpls = append(tmpls, service.EntryTemplate{Type: e.Type, Fields: e.Fields})
	}
	opts := []client.FindOption{client.AtLocators(locators...), client.Matching(tmpls...), client.OnInterfaces(interfaces...)}
	if len(groups) > 0 {
		opts = append(opts, client.InGroups(groups...))
	}
	if g.tlsCA != "" || g.cert != "" || g.key != "" {
		cfg, err := g.tlsConfig()
		if err != nil {
			return nil, err
		}
		opts = append(opts, client.ConnectWith(client.WithTLS(cfg)))
	}
	return opts, nil
}
