package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

// Main is the djinn command: its arguments in, its output out, its exit
// status returned.
type Main struct {
	Stdout, Stderr io.Writer
}

// Run runs the command line args and returns the exit status: 0, or 1
// after printing the error on one line.
func (m Main) Run(ctx context.Context, args []string) int {
	root := newRoot()
	root.SetArgs(args)
	root.SetOut(m.Stdout)
	root.SetErr(m.Stderr)
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(m.Stderr, "djinn:", err)
		return 1
	}
	return 0
}

// globals are the flags every client command takes.
type globals struct {
	server string
	output string
	tlsCA  string
	cert   string
	key    string
	// secretFile holds the cluster's join secret (joinSecret).
	secretFile string
	reads      readFlags // the lookup commands' freshness
}

// newRoot returns the djinn command with every command group. A new group
// is one line here and a file of its own.
func newRoot() *cobra.Command {
	g := &globals{}
	root := &cobra.Command{
		Use:           "djinn",
		Short:         "djinn: leases, remote events and the Jini services, in Go",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	pf := root.PersistentFlags()
	pf.StringVar(&g.server, "server", envOr("DJINN_SERVER", "127.0.0.1:4161"), "gRPC address of a djinn server, or several of one cluster (comma-separated, or a DNS name with several addresses)")
	pf.StringVarP(&g.output, "output", "o", "text", "output format: text or json")
	pf.StringVar(&g.tlsCA, "ca", "", "PEM CA that verifies the server (enables TLS)")
	pf.StringVar(&g.cert, "cert", "", "PEM client certificate (mutual TLS)")
	pf.StringVar(&g.key, "key", "", "PEM client key (mutual TLS)")
	pf.StringVar(&g.secretFile, "join-secret-file", envOr("DJINN_JOIN_SECRET_FILE", ""), "file holding the cluster's join secret, the operator role without mutual TLS (default: djinn-data/join-secret when --server is on this machine)")
	root.AddCommand(
		newServe(),
		g.statusCmd(),
		g.leaseCmd(),
		g.mailboxCmd(),
		g.renewalCmd(),
		g.eventsCmd(),
		g.txnCmd(),
		g.lockCmd(),
		g.lookupCmd(),
		g.discoverCmd(),
		g.ldsCmd(),
		g.kvCmd(),
		g.demoCmd(),
		g.benchCmd(),
		g.repairCmd(),
		g.memberCmd(),
		g.leaderCmd(),
		g.snapshotCmd(),
	)
	return root
}
