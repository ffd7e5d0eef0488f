package main

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/djinn-go/djinn/internal/server"
)

// repairCmd is `djinn repair`: a damaged data directory made to start
// again, only when asked, dropping what does not check out.
func (g *globals) repairCmd() *cobra.Command {
	var dataDir string
	cmd := &cobra.Command{
		Use:   "repair --data-dir DIR",
		Short: "Make a damaged data directory start again, dropping what does not check out",
		Long: `Repair the data directory of a stopped djinn server that refuses to start
because its files are damaged. It keeps the newest snapshot and the log
entries that check out, up to the first damage, and the key/value store's
records that check out; it drops the rest and says exactly what it dropped,
including acknowledged writes that are lost. The files it replaces are kept
in a damaged-N directory inside the data directory. A directory without
damage is left as it is.

Prefer restoring the directory from a backup, or, in a cluster, replacing
the member: those lose nothing.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dataDir == "" {
				return fmt.Errorf("--data-dir: missing: name the data directory of a stopped server")
			}
			rep, err := server.Repair(dataDir)
			if err != nil {
				return err
			}
			if g.output == "json" {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(rep)
			}
			_, err = fmt.Fprint(cmd.OutOrStdout(), rep)
			return err
		},
	}
	cmd.Flags().StringVar(&dataDir, "data-dir", "", "data directory of a stopped djinn server")
	return cmd
}
