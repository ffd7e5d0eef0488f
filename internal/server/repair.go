package server

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/djinn-go/djinn/internal/replica"
	"github.com/djinn-go/djinn/participant"
)

// RepairReport says what Repair found and did in a data directory: in the
// node's log and snapshots, and in the key/value participant's store.
type RepairReport struct {
	Node replica.RepairReport `json:"node"`
	// KV is nil when the directory has no key/value store.
	KV *participant.RepairReport `json:"kv,omitempty"`
}

// String describes the report for an operator.
func (r RepairReport) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "log and snapshots:\n%s\n", indent(r.Node.String()))
	if r.KV != nil {
		fmt.Fprintf(&b, "key/value store:\n%s\n", indent(r.KV.String()))
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
