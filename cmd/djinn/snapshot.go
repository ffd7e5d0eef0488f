package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/internal/server"
)

// snapshotCmd is `djinn snapshot`: backups of a running cluster, and new
// clusters seeded from them.
func (g *globals) snapshotCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "snapshot",
		Short: "Save a running cluster's state to a file, and seed a new cluster from one",
	}
	cmd.AddCommand(g.snapshotSaveCmd(), g.snapshotRestoreCmd())
	return cmd
}

type snapshotView struct {
	File      string `json:"file"`
	ServiceID string `json:"service_id"`
	Node      string `json:"node,omitempty"`
	Index     string `json:"index"`
	Term      string `json:"term"`
	SavedAt   string `json:"saved_at"`
	Bytes     int64  `json:"bytes,omitempty"`
	DataDir   string `json:"data_dir,omitempty"`
}

func (g *globals) snapshotSaveCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "save FILE",
		Short: "Write a consistent snapshot of the cluster at --server to FILE (operator role)",
		Long: `Write a consistent snapshot of a running cluster's state to FILE: the leader
takes it, holding everything acknowledged before the command, and streams it.
The file is checked (version and checksum) as it arrives and written beside
FILE first, so FILE is either the whole snapshot or left as it was. Restore it
with djinn snapshot restore.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkSaveTarget(args[0]); err != nil {
				return err
			}
			c, err := g.dial(cmd.Context())
			if err != nil {
				return err
			}
			defer c.Close()
			info, err := saveSnapshot(cmd, c, args[0])
			if err != nil {
				return err
			}
			v := snapshotView{File: args[0], ServiceID: info.ServiceID.String(), Node: info.NodeID, Index: jsonUint(info.Index),
				Term: jsonUint(info.Term), SavedAt: info.SavedAt.UTC().Format(time.RFC3339Nano), Bytes: info.Bytes}
			return g.print(cmd.OutOrStdout(), v, func(w io.Writer) {
				fmt.Fprintf(w, "saved %s: %d bytes, cluster %s at log index %s (leader %s, %s)\n",
					v.File, v.Bytes, v.ServiceID, v.Index, v.Node, v.SavedAt)
			})
		},
	}
}

// checkSaveTarget refuses, before the cluster is asked, a path the
// snapshot cannot be written to.
func checkSaveTarget(path string) error {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return usageError{fmt.Errorf("%s is a directory; name a file to write the snapshot to", path)}
	}
	if dir := filepath.Dir(path); !isDir(dir) {
		return usageError{fmt.Errorf("%s cannot be written: no directory %s; create it, or name a file in a directory that exists", path, dir)}
	}
	return nil
}

func isDir(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
}

// saveSnapshot writes the snapshot beside path, then puts it in place.
func saveSnapshot(cmd *cobra.Command, c *client.Client, path string) (*client.SnapshotInfo, error) {
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".partial-*")
	if err != nil {
		var pe *fs.PathError // names the file beside path: say only why
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, fmt.Errorf("%s cannot be written (%w); name a file in a directory you may write to", path, err)
	}
	defer os.Remove(f.Name()) // gone once renamed
	defer f.Close()
	info, err := c.SaveSnapshot(cmd.Context(), f)
	if err != nil {
		return nil, err
	}
	if err := f.Sync(); err != nil {
		return nil, err
	}
	if err := f.Close(); err != nil {
		return nil, err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return nil, err
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return info, nil
}

func (g *globals) snapshotRestoreCmd() *cobra.Command {
	var dataDir string
	cmd := &cobra.Command{
		Use:   "restore FILE --data-dir DIR",
		Short: "Seed a new data directory from a snapshot file: a new cluster with the same resources",
		Long: `Seed a new data directory from a snapshot file written by djinn snapshot save.
The whole file is checked first (version, checksum, every record); a damaged
file is refused. djinn serve --data-dir DIR then starts a new cluster (a new
service id) holding every resource of the saved one; references and lease
tokens made by the saved cluster keep working against it. Every lease keeps,
from the moment the new cluster starts, the time it had left when saved.
To seed a cluster of several members, start the others with --join.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			h, err := server.RestoreSnapshot(args[0], dataDir)
			if err != nil {
				return err
			}
			id, _ := djinn.IDFromBytes("service id", h.GetServiceId())
			v := snapshotView{File: args[0], ServiceID: id.String(), Node: h.GetNodeId(), Index: jsonUint(h.GetIndex()), Term: jsonUint(h.GetTerm()),
				SavedAt: time.Unix(0, h.GetSavedUnixNanos()).UTC().Format(time.RFC3339Nano), DataDir: dataDir}
			return g.print(cmd.OutOrStdout(), v, func(w io.Writer) {
				fmt.Fprintf(w, "checked %s: cluster %s at log index %s, saved %s\n", v.File, v.ServiceID, v.Index, v.SavedAt)
				fmt.Fprintf(w, "seeded %s; start it with: djinn serve --data-dir %s\n", dataDir, dataDir)
			})
		},
	}
	cmd.Flags().StringVar(&dataDir, "data-dir", "", "a new data directory to seed")
	_ = cmd.MarkFlagRequired("data-dir")
	return cmd
}
