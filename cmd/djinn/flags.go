package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/djinn-go/djinn"
)

// The flag vocabulary every command shares:
//
//	--server ADDR                  the djinn server to call (DJINN_SERVER)
//	--wait-timeout D               how long to wait for a server still starting (DJINN_WAIT_TIMEOUT)
//	--lease D                      the length of a lease asked for: a Go duration, forever or any
//	--wait D                       how long to wait: for a grant, an answer, participants told
//	--for D                        how long to run: a watch, a listener, a measurement
//	--listener REF                 a remote event listener, by reference
//	--listen ADDR                  an address to serve on
//	--tls-ca, --tls-cert, --tls-key  TLS, for the client and the server alike
//	--owner LEASE, --txn TOKEN, --manager REF   who holds a lock or works under a transaction (TOKEN: ID.SECRET)
//	-o FORMAT                      text, json, yaml or template=…
//
// A lease is named by its short name (its cookie, 32 hex digits) or its
// token. Names a command used to have stay for one release as hidden
// aliases that say what replaced them.

// aliasOf is the annotation that marks a flag as an old name of another.
const aliasOf = "djinn-alias-of"

// alias adds old as a hidden, deprecated name of the flag name of fs.
func alias(fs *pflag.FlagSet, old, name string) {
	f := fs.Lookup(name)
	fs.AddFlag(&pflag.Flag{Name: old, Usage: "old name of --" + name, Value: f.Value, DefValue: f.DefValue,
		NoOptDefVal: f.NoOptDefVal, Hidden: true, Annotations: map[string][]string{aliasOf: {name}}})
}

// flagChanged reports whether the flag name, or an old name of it, was
// given.
func flagChanged(cmd *cobra.Command, name string) bool {
	changed := false
	cmd.Flags().Visit(func(f *pflag.Flag) {
		if f.Name == name || (len(f.Annotations[aliasOf]) == 1 && f.Annotations[aliasOf][0] == name) {
			changed = true
		}
	})
	return changed
}

// oldNamesUsed returns a notice for each old flag name given.
func oldNamesUsed(cmd *cobra.Command) []string {
	var out []string
	cmd.Flags().Visit(func(f *pflag.Flag) {
		if a := f.Annotations[aliasOf]; len(a) == 1 {
			out = append(out, fmt.Sprintf("--%s is an old name: use --%s (the old name goes in the next release)", f.Name, a[0]))
		}
	})
	return out
}

// leaseFlag registers --lease D on cmd, the length of a lease asked for,
// with --duration as its old name.
func leaseFlag(cmd *cobra.Command, d *string, what string) {
	cmd.Flags().StringVar(d, "lease", "any", what+"'s lease: a positive Go duration, forever or any (the server grants at most its maximum)")
	alias(cmd.Flags(), "duration", "lease")
	_ = cmd.RegisterFlagCompletionFunc("lease", completeWords("any", "forever", "30s", "1m", "10m", "1h"))
}

// parseLease parses a --lease value: a positive duration, Forever or Any.
func parseLease(s string) (time.Duration, error) {
	d, err := djinn.ParseDuration(s)
	if err != nil {
		return 0, usageError{fmt.Errorf("--lease: %w", err)}
	}
	if err := djinn.CheckLeaseDuration("--lease", d); err != nil {
		return 0, usageError{err}
	}
	return d, nil
}

// parseWait parses a --wait value: empty for none, else a positive Go
// duration.
func parseWait(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, usageError{fmt.Errorf("--wait %q: not a duration (a Go duration: 300ms, 5s, 2m)", s)}
	}
	if d <= 0 {
		return 0, usageError{fmt.Errorf("--wait %s: must be positive", d)}
	}
	return d, nil
}

// completeWords completes a flag or argument from a fixed list.
func completeWords(words ...string) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return func(_ *cobra.Command, _ []string, prefix string) ([]string, cobra.ShellCompDirective) {
		var out []string
		for _, w := range words {
			if strings.HasPrefix(w, prefix) {
				out = append(out, w)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}
