package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// Dynamic shell completion (djinn completion bash|zsh|fish|powershell
// writes the script): modes, output formats, states and durations from
// fixed lists (completeWords), and ids the server can list: the
// transactions, mailbox registrations, renewal sets and lock sets of the
// caller. Where a command takes a transaction's token (ID.SECRET: txn
// state and nest, --txn), nothing is offered: the listing has ids alone,
// which those commands refuse.

// completionWait bounds the server calls of a completion: a shell must not
// hang on a slow server.
const completionWait = 2 * time.Second

// completeIDs completes a command's first argument with the ids of kind
// (txn, mailbox, renewal, lock) that --server lists for the caller, each
// with a word on what it is.
func (g *globals) completeIDs(kind string) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	complete := g.completeFlagIDs(kind)
	return func(cmd *cobra.Command, args []string, prefix string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return complete(cmd, args, prefix)
	}
}

// completeFlagIDs completes a flag with the ids of kind.
func (g *globals) completeFlagIDs(kind string) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return func(_ *cobra.Command, _ []string, prefix string) ([]string, cobra.ShellCompDirective) {
		ctx, cancel := context.WithTimeout(context.Background(), completionWait)
		defer cancel()
		ids, err := g.listIDs(ctx, kind)
		if err != nil {
			return nil, cobra.ShellCompDirectiveError | cobra.ShellCompDirectiveNoFileComp
		}
		var out []string
		for _, id := range ids {
			if strings.HasPrefix(id, prefix) {
				out = append(out, id)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// listIDs lists the ids of kind at --server, as "ID\tdescription".
func (g *globals) listIDs(ctx context.Context, kind string) ([]string, error) {
	c, err := g.dial(ctx)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	switch kind {
	case "txn":
		m, err := c.TransactionManager(ctx)
		if err != nil {
			return nil, err
		}
		ds, err := m.List(ctx, 0, 200)
		if err != nil {
			return nil, err
		}
		out := make([]string, len(ds))
		for i, d := range ds {
			out[i] = fmt.Sprintf("%d\t%s", d.ID, d.State)
		}
		return out, nil
	}
	return g.listResourceIDs(ctx, c, kind)
}
