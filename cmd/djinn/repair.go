package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

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
				return usageError{fmt.Errorf("--data-dir: missing: name the data directory of a stopped server")}
			}
			if err := checkNodeDir(dataDir); err != nil {
				return err
			}
			rep, err := server.Repair(dataDir)
			if err != nil {
				return err
			}
			v := viewRepair(rep)
			return g.print(cmd.OutOrStdout(), v, func(w io.Writer) { fmt.Fprint(w, rep) })
		},
	}
	cmd.Flags().StringVar(&dataDir, "data-dir", "", "data directory of a stopped djinn server")
	return cmd
}

// checkNodeDir refuses, in plain words, a --data-dir that holds no node.
func checkNodeDir(dir string) error {
	const next = "name the data directory of a stopped djinn server (the --data-dir it was started with)"
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return usageError{fmt.Errorf("data directory %s: no such directory; %s", dir, next)}
	case err != nil:
		return fmt.Errorf("data directory %s cannot be read (%w); %s", dir, err, next)
	case !fi.IsDir():
		return usageError{fmt.Errorf("data directory %s is a file, not a directory; %s", dir, next)}
	}
	if _, err := os.Stat(filepath.Join(dir, "raft")); errors.Is(err, fs.ErrNotExist) {
		return usageError{fmt.Errorf("data directory %s holds no djinn node (it has no raft directory); %s", dir, next)}
	}
	return nil
}

// repairView is a repair's report in JSON: log positions and crash counts
// are strings, as every 64-bit integer.
type repairView struct {
	Node struct {
		Dir       string   `json:"data_dir"`
		Saved     *string  `json:"saved"` // null: nothing changed
		Snapshot  string   `json:"snapshot"`
		First     string   `json:"first"`
		Last      string   `json:"last"`
		Found     []string `json:"found"`
		Dropped   []string `json:"dropped"`
		LostFirst string   `json:"lost_first"` // "0": no acknowledged entry lost
		LostLast  string   `json:"lost_last"`
	} `json:"node"`
	KV *repairKVView `json:"kv"` // null: no key/value store
}

type repairKVView struct {
	Path       string           `json:"path"`
	Saved      *string          `json:"saved"`
	Dropped    []repairSpanView `json:"dropped"`
	Torn       int64            `json:"torn"`
	Records    int              `json:"records"`
	CrashCount string           `json:"crash_count"`
}

type repairSpanView struct {
	Offset int64 `json:"offset"`
	Length int64 `json:"length"`
}

func viewRepair(r server.RepairReport) repairView {
	var v repairView
	n := r.Node
	v.Node.Dir, v.Node.Snapshot, v.Node.First, v.Node.Last = n.Dir, jsonUint(n.Snapshot), jsonUint(n.First), jsonUint(n.Last)
	v.Node.Found, v.Node.Dropped = orEmpty(n.Found), orEmpty(n.Dropped)
	v.Node.LostFirst, v.Node.LostLast = jsonUint(n.LostFirst), jsonUint(n.LostLast)
	if n.Saved != "" {
		v.Node.Saved = &n.Saved
	}
	if kv := r.KV; kv != nil {
		k := &repairKVView{Path: kv.Path, Dropped: []repairSpanView{}, Torn: kv.Torn, Records: kv.Records, CrashCount: jsonInt(kv.CrashCount)}
		if kv.Saved != "" {
			k.Saved = &kv.Saved
		}
		for _, d := range kv.Dropped {
			k.Dropped = append(k.Dropped, repairSpanView{d.Offset, d.Length})
		}
		v.KV = k
	}
	return v
}
