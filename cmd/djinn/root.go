package main

import (
	"github.com/spf13/cobra"
)

// globals are the flags every client command takes.
type globals struct {
	server string
	output string
	tlsCA  string
	cert   string
	key    string
}

func newRoot() *cobra.Command {
	g := &globals{}
	root := &cobra.Command{
		Use:           "djinn",
		Short:         "djinn: leases, remote events and the Jini services, in Go",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	pf := root.PersistentFlags()
	pf.StringVar(&g.server, "server", envOr("DJINN_SERVER", "127.0.0.1:4161"), "gRPC address of a djinn server")
	pf.StringVarP(&g.output, "output", "o", "text", "output format: text or json")
	pf.StringVar(&g.tlsCA, "ca", "", "PEM CA that verifies the server (enables TLS)")
	pf.StringVar(&g.cert, "cert", "", "PEM client certificate (mutual TLS)")
	pf.StringVar(&g.key, "key", "", "PEM client key (mutual TLS)")
	root.AddCommand(newServe(), newStatus(g), newLease(g), newMailbox(g), newRenewal(g), newEvents(g), newTxn(g), newLock(g), newLookup(g), newDiscover(g), newLDS(g), newKV(g), newDemo(g), newBench(g))
	return root
}
