package replica

import (
	"io/fs"
	"path/filepath"
)

// Figures about the node for status pages and metrics.

// Term returns the node's current Raft term.
func (n *Node) Term() uint64 { return n.raft.CurrentTerm() }

// LastIndex returns the index of the last entry in this node's log.
func (n *Node) LastIndex() uint64 { return n.raft.LastIndex() }

// LogBytes returns the size on disk of the node's log: its segment files
// and their metadata.
func (n *Node) LogBytes() int64 { return dirBytes(filepath.Join(n.dir, "wal")) }

// SnapshotBytes returns the size on disk of the snapshots the node keeps.
func (n *Node) SnapshotBytes() int64 { return dirBytes(filepath.Join(n.dir, "snapshots")) }

// dirBytes adds up the sizes of the files under dir; files that vanish
// while it walks (a segment deleted, a snapshot reaped) count nothing.
func dirBytes(dir string) int64 {
	var total int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		if info, err := d.Info(); err == nil {
			total += info.Size()
		}
		return nil
	})
	return total
}
