package server

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/djinn-go/djinn/internal/disk"
	"github.com/djinn-go/djinn/internal/replica"
	"github.com/djinn-go/djinn/participant"
)

// RepairReport says what Repair found and did in a data directory: in the
// node's log and snapshots, and in the key/value participant's store.
type RepairReport struct {
	Node replica.RepairReport `json:"node"`
	// KV is nil when the directory has no key/value store.
	KV *participant.RepairReport `json:"kv,omitempty"`
	// KVStarted is the key/value store's log when it was gone or empty
	// beside the node's log and an empty store was started in its place.
	KVStarted string `json:"kv_started,omitempty"`
}

// String describes the report for an operator.
func (r RepairReport) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "log and snapshots:\n%s\n", indent(r.Node.String()))
	if r.KV != nil {
		fmt.Fprintf(&b, "key/value store:\n%s\n", indent(r.KV.String()))
	}
	if r.KVStarted != "" {
		fmt.Fprintf(&b, "key/value store:\n  %s: gone or empty; an empty store was started in its place: what it held is lost\n", r.KVStarted)
	}
	return b.String()
}

func indent(s string) string {
	return "  " + strings.ReplaceAll(s, "\n", "\n  ")
}

// Repair repairs the data directory of a stopped server: its node's log
// and snapshots (replica.Repair) and its key/value store
// (participant.RepairFileStore). It keeps what checks out, drops the rest,
// keeps the files it replaced beside them, and says what it dropped. It
// changes nothing where it finds no damage.
func Repair(dataDir string) (RepairReport, error) {
	var rep RepairReport
	var err error
	if rep.Node, err = replica.Repair(dataDir); err != nil {
		return rep, err
	}
	kvDir := filepath.Join(dataDir, "kv")
	if lost, err := kvStoreLost(dataDir); err != nil || lost {
		if err == nil {
			rep.KVStarted, err = startEmptyKV(kvDir)
		}
		return rep, err
	}
	if _, err := os.Stat(filepath.Join(kvDir, "store.log")); errors.Is(err, fs.ErrNotExist) {
		return rep, nil
	}
	kv, err := participant.RepairFileStore(kvDir)
	if err != nil {
		return rep, err
	}
	rep.KV = &kv
	return rep, nil
}

// repairAdvice is how to recover from damage in dataDir's key/value
// store.
func repairAdvice(dataDir string) string {
	return fmt.Sprintf("restore the data directory %s from a backup, or run `djinn repair --data-dir %s`, which keeps what checks out and reports what it drops", dataDir, dataDir)
}

// kvOffName marks a data directory whose node ran without its key/value
// store (--kv=false) and never made one: turning it on then makes an
// empty store, rather than refuse it as lost.
const kvOffName = "off"

// kvStoreLost reports whether dataDir's key/value store log is gone or
// empty while the directory holds a node's log: a store lost, not one
// never made.
func kvStoreLost(dataDir string) (bool, error) {
	fi, err := os.Stat(filepath.Join(dataDir, "kv", "store.log"))
	switch {
	case err == nil && fi.Size() > 0:
		return false, nil
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return false, err
	case err != nil:
		if _, err := os.Stat(filepath.Join(dataDir, "kv", kvOffName)); err == nil {
			return false, nil // never made
		}
	}
	return replica.HasLog(dataDir), nil
}

// markKVOff records, for a node that starts for the first time without its
// key/value store, that it has none. Only a first start marks: a node
// with a log may have had a store, and one lost must stay refused.
func markKVOff(dataDir string) error {
	if replica.HasLog(dataDir) {
		return nil
	}
	kvDir := filepath.Join(dataDir, "kv")
	if _, err := os.Stat(filepath.Join(kvDir, "store.log")); !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := os.MkdirAll(kvDir, 0o700); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(kvDir, kvOffName), []byte("this node ran without its key/value store (--kv=false); turned on, it starts an empty one\n"), 0o600)
}

// checkKVStore refuses a key/value store lost beside the node's log,
// naming it and how to recover, rather than start an empty one in its
// place and serve its acknowledged writes as never made. On a first start
// it makes the store, before the node makes its log: a log without a
// store is then always a store lost.
func checkKVStore(dataDir string) error {
	lost, err := kvStoreLost(dataDir)
	if err != nil {
		return err
	}
	path := filepath.Join(dataDir, "kv", "store.log")
	if !lost {
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			_, err = startEmptyKV(filepath.Dir(path))
			return err
		}
		return nil
	}
	return disk.WithRecovery(&disk.DamageError{Path: path, Offset: -1, Problem: "the key/value store is gone or empty but the node's log is there"},
		fmt.Sprintf("restore %s from a backup; to start an empty one and lose what it held "+
			"(or if this node ran only with --kv=false before this release), run `djinn repair --data-dir %s`", path, dataDir))
}

// startEmptyKV starts an empty key/value store in kvDir in place of one
// gone or empty, and returns its log's path.
func startEmptyKV(kvDir string) (string, error) {
	path := filepath.Join(kvDir, "store.log")
	for _, name := range []string{path, filepath.Join(kvDir, participant.PositionName)} {
		if err := disk.Remove(name); err != nil {
			return "", err
		}
	}
	st, err := participant.OpenFileStore(kvDir)
	if err != nil {
		return "", err
	}
	if err := st.Close(); err != nil {
		return "", err
	}
	if err := os.Remove(filepath.Join(kvDir, kvOffName)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	return path, nil
}
