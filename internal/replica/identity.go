package replica

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/hashicorp/raft"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/disk"
)

// A node's identity: its id, kept in the node-id file of its data
// directory, is the name its log's configuration knows it by. A node that
// ran under an id its log's configuration does not have would never lead
// nor vote, serving nothing: ready never, and saying nothing. So the id
// the node-id file holds or the node's configuration gives (--node-id, a
// peer certificate) is checked against the log before Raft starts, and a
// node-id file gone, empty or not holding an id beside a log is refused as
// damage, naming the file and how to recover.

// nodeIDFile is the node id's file in a data directory.
const nodeIDFile = "node-id"

// identity is the id a node starts under, and where it comes from.
type identity struct {
	dataDir, path string // the data directory and its node-id file
	id            string // the id the node starts under
	stored        string // the file's id, when it holds one
	configured    string // the configured id (--node-id, a peer certificate's)
	problem       string // the damage of a node-id file gone, empty or holding no id beside a log
}

// readIdentity returns the configured id, or else the one stored in
// dataDir, or else, for a data directory without a log, a new one. A node-id
// file gone, empty or holding no node id beside a log, with no id
// configured, is damage (a new id would make a node its log's
// configuration does not know), which check reports once the log tells
// which member this node may be.
func readIdentity(dataDir, configured string) (identity, error) {
	ident := identity{dataDir: dataDir, path: filepath.Join(dataDir, nodeIDFile), configured: configured}
	if configured != "" {
		if err := CheckNodeID(configured); err != nil {
			return identity{}, err
		}
	}
	b, err := os.ReadFile(ident.path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return identity{}, fmt.Errorf("read node id: %w", err)
	}
	text := strings.TrimSpace(string(b))
	bad := CheckNodeID(text)
	switch {
	case err == nil && text != "" && bad == nil:
		ident.stored = text
	case configured != "":
	case err == nil && text != "":
		if !HasLog(dataDir) {
			return identity{}, disk.WithRecovery(&disk.DamageError{Path: ident.path, Offset: -1, Problem: fmt.Sprintf("holds no node id (%v)", bad)},
				fmt.Sprintf("this data directory holds no log yet: remove %s, and the node takes a new id (or start with --node-id)", ident.path))
		}
		ident.problem = fmt.Sprintf("holds no node id (%v) but the node's log is there", bad)
	case err == nil && HasLog(dataDir):
		ident.problem = "the node's id is empty but its log is there"
	case HasLog(dataDir):
		ident.problem = "the node's id is gone but its log is there"
	}
	ident.id = configured
	if ident.id == "" {
		ident.id = ident.stored
	}
	if ident.id == "" && ident.problem == "" {
		ident.id = djinn.NewID().String()[:12]
	}
	if ident.stored == "" && ident.problem == "" && !HasLog(dataDir) {
		// A first start keeps its id before it makes its log, so that a
		// log never stands without the id (a start that fails after the
		// log is made, on a port taken, starts again under it).
		if err := disk.WriteFile(ident.path, []byte(ident.id+"\n")); err != nil {
			return identity{}, fmt.Errorf("write node id: %w", err)
		}
		ident.stored = ident.id
	}
	return ident, nil
}

// check refuses to start under an id the latest configuration in the
// node's log (conf, empty for a node not yet in a cluster) does not have,
// a configured id that is not the stored one unless the log says the
// stored one is wrong, and a damaged node-id file. self is this node's
// Raft address.
func (ident identity) check(conf raft.Configuration, self raft.ServerAddress) error {
	if ident.problem != "" {
		return ident.damaged(conf, self)
	}
	conflict := ident.stored != "" && ident.configured != "" && ident.configured != ident.stored
	if conflict && (len(conf.Servers) == 0 || hasServer(conf, ident.stored)) {
		return ident.conflict(len(conf.Servers) > 0)
	}
	if len(conf.Servers) == 0 || hasServer(conf, ident.id) {
		return nil
	}
	return ident.notAMember(conf, self)
}

// keep writes the id the node starts under into the node-id file, unless
// it holds it already.
func (ident identity) keep(logger *slog.Logger) error {
	if ident.id == ident.stored {
		return nil
	}
	if ident.stored != "" {
		logger.Warn("node-id held an id the log's configuration does not have; it now holds the configured one",
			"file", ident.path, "held", ident.stored, "node", ident.id)
	}
	if err := disk.WriteFile(ident.path, []byte(ident.id+"\n")); err != nil {
		return fmt.Errorf("write node id: %w", err)
	}
	return nil
}

func hasServer(conf raft.Configuration, id string) bool {
	for _, s := range conf.Servers {
		if string(s.ID) == id {
			return true
		}
	}
	return false
}

// conflict refuses a configured id other than the one the node-id file
// holds, when the log's configuration has the stored one (member) or no
// configuration tells which is right.
func (ident identity) conflict(member bool) error {
	why := "no cluster configuration in its log says otherwise"
	if member {
		why = "a member of the cluster configuration in its log"
	}
	return djinn.Errorf(djinn.InvalidArgument,
		"node id %q, as configured: data directory %s belongs to node %q (its %s file holds that id, %s); "+
			"start it with --node-id %q or without --node-id, or give node %q a data directory of its own",
		ident.configured, ident.dataDir, ident.stored, ident.path, why, ident.stored, ident.configured)
}

// notAMember refuses an id the log's configuration does not have.
func (ident identity) notAMember(conf raft.Configuration, self raft.ServerAddress) error {
	var has []string
	for _, s := range conf.Servers {
		m := fmt.Sprintf("%s at %s", s.ID, s.Address)
		if s.Address == self {
			m += " (this node's Raft address)"
		}
		has = append(has, m)
	}
	members := strings.Join(has, ", ")
	next := fmt.Sprintf("restore %s from a backup, or start once with --node-id set to the id of the member whose data directory this is (%s); "+
		"if node %s was removed from the cluster, this data directory is no longer a member's: start with an empty one and --join to join again; "+
		"or replace the member (djinn member remove, then a node with an empty data directory that joins)", ident.path, memberHint(conf, self), ident.id)
	if ident.configured != "" && ident.configured != ident.stored {
		held := ""
		if ident.stored != "" {
			held = fmt.Sprintf("; its %s file holds %q, no member either", ident.path, ident.stored)
		}
		return djinn.Errorf(djinn.InvalidArgument,
			"node id %q, as configured: the cluster configuration in the log of data directory %s has no such member; its members: %s%s; %s",
			ident.id, ident.dataDir, members, held, next)
	}
	return disk.WithRecovery(&disk.DamageError{Path: ident.path, Offset: -1, Problem: fmt.Sprintf(
		"holds node id %q, but the cluster configuration in the node's log has no such member; its members: %s", ident.id, members)}, next)
}

// memberHint names the member conf has at this node's Raft address (self),
// or says how to find the one this node was.
func memberHint(conf raft.Configuration, self raft.ServerAddress) string {
	for _, s := range conf.Servers {
		if s.Address == self {
			return fmt.Sprintf("the log's configuration has member %s at this node's Raft address: --node-id %s", s.ID, s.ID)
		}
	}
	return "in a cluster, `djinn member ls` on another member lists it by its Raft address"
}

// latestConfiguration returns the cluster configuration Raft starts with
// on logs and snaps: the newest configuration entry after the newest
// snapshot, else that snapshot's configuration. It reads the log back
// from its end.
func latestConfiguration(logs raft.LogStore, snaps raft.SnapshotStore) (raft.Configuration, error) {
	var conf raft.Configuration
	var after uint64 // the snapshot's configuration stands for the log up to here
	metas, err := snaps.List()
	if err != nil {
		return conf, fmt.Errorf("list snapshots: %w", err)
	}
	if len(metas) > 0 {
		conf, after = metas[0].Configuration, metas[0].Index
	}
	first, err := logs.FirstIndex()
	if err != nil {
		return conf, err
	}
	last, err := logs.LastIndex()
	if err != nil {
		return conf, err
	}
	for i := last; i > after && i >= first && i > 0; i-- {
		var e raft.Log
		if err := logs.GetLog(i, &e); err != nil {
			return conf, fmt.Errorf("log entry %d: %w", i, err)
		}
		if e.Type == raft.LogConfiguration {
			return decodeConfiguration(e.Data)
		}
	}
	return conf, nil
}

// decodeConfiguration is raft.DecodeConfiguration, which panics on data
// it cannot decode, returning an error instead.
func decodeConfiguration(data []byte) (conf raft.Configuration, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("a configuration entry that does not decode: %v", r)
		}
	}()
	return raft.DecodeConfiguration(data), nil
}

// HasLog reports whether dataDir holds a node's log already, or held one:
// its witness (witness.go) outlives a log directory lost.
func HasLog(dataDir string) bool {
	segs, _ := filepath.Glob(filepath.Join(dataDir, "raft", "wal", "*.wal"))
	_, err := os.Stat(filepath.Join(dataDir, "raft", "wal", "wal-meta.db"))
	_, werr := os.Stat(filepath.Join(dataDir, "raft", witnessName))
	return len(segs) > 0 || err == nil || werr == nil
}

// damaged is the damage of a node-id file gone, empty or holding no id
// beside a log; conf, the log's configuration, names the member at this
// node's Raft address (self), if any.
func (ident identity) damaged(conf raft.Configuration, self raft.ServerAddress) error {
	return disk.WithRecovery(&disk.DamageError{Path: ident.path, Offset: -1, Problem: ident.problem},
		fmt.Sprintf("restore %s from a backup, or start once with --node-id set to the id this node had (%s); "+
			"a new id would make a node its log does not know", ident.path, memberHint(conf, self)))
}
