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
// directory, is the name its cluster's configuration knows it by. So the id
// the node-id file holds or the node's configuration gives (--node-id, a
// peer certificate) is checked against the log before Raft starts. A
// node-id file gone, empty or not holding an id beside a log is refused as
// damage, naming the file and how to recover; so is an id the log's newest
// configuration does not have when that configuration has another member
// at this node's Raft address (the id altered: that member is this node).
//
// An id the log's newest configuration does not have, with no other
// member at this node's address, is no damage: that configuration may be
// stale. A joiner that stopped while the leader was still filling its
// empty log holds only the configurations before the one adding it; a
// node removed and then added back holds its removal last; an uncommitted
// removal may be overwritten by a new leader. Such a node starts, says
// that it is not in its log's configuration, and waits until the leader
// adds it or brings its log up to date.

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
// node's log (conf, empty for a node not yet in a cluster) does not have
// while it has another member at this node's Raft address (self), a
// configured id that is not the stored one unless the log says the stored
// one is wrong, and a damaged node-id file.
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
	if _, ok := memberAt(conf, self); ok || conflict {
		return ident.notAMember(conf, self)
	}
	return nil
}

// outside reports whether conf, the latest configuration in the node's
// log, is a cluster's that does not have the node; check let it start.
func (ident identity) outside(conf raft.Configuration) bool {
	return len(conf.Servers) > 0 && !hasServer(conf, ident.id)
}

// warnOutside says that the node starts outside the configuration its log
// holds, and what it waits for.
func (ident identity) warnOutside(logger *slog.Logger, conf raft.Configuration, self raft.ServerAddress) {
	logger.Warn("this node is not in the cluster configuration its log holds (a joiner stopped before its log reached its addition, or a node removed): "+
		"it waits until the leader brings its log up to date or adds it; if it was removed, add it again at a member",
		"node", ident.id, "raft", string(self), "members", members(conf, self),
		"add", fmt.Sprintf("djinn member add %s --raft %s --grpc GRPC_ADDRESS --server MEMBER", ident.id, self))
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

// members lists conf's members, marking the one at this node's Raft
// address (self).
func members(conf raft.Configuration, self raft.ServerAddress) string {
	var has []string
	for _, s := range conf.Servers {
		m := fmt.Sprintf("%s at %s", s.ID, s.Address)
		if s.Address == self {
			m += " (this node's Raft address)"
		}
		has = append(has, m)
	}
	return strings.Join(has, ", ")
}

// notAMember refuses an id the log's configuration does not have, when it
// has another member at this node's Raft address or the id is configured
// against the stored one.
func (ident identity) notAMember(conf raft.Configuration, self raft.ServerAddress) error {
	members := members(conf, self)
	next := fmt.Sprintf("restore %s from a backup, or start once with --node-id set to the id of the member whose data directory this is (%s); "+
		"if node %s was removed from the cluster and its Raft address given to another member, this data directory is no longer a member's: "+
		"start with an empty one and --join to join again", ident.path, memberHint(conf, self), ident.id)
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

// memberAt returns the id of the member conf has at this node's Raft
// address (self), if any.
func memberAt(conf raft.Configuration, self raft.ServerAddress) (raft.ServerID, bool) {
	for _, s := range conf.Servers {
		if s.Address == self {
			return s.ID, true
		}
	}
	return "", false
}

// memberHint names the member conf has at this node's Raft address (self),
// or says how to find the one this node was.
func memberHint(conf raft.Configuration, self raft.ServerAddress) string {
	if id, ok := memberAt(conf, self); ok {
		return fmt.Sprintf("the log's configuration has member %s at this node's Raft address: --node-id %s", id, id)
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
