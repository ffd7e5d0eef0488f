package replica

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/disk"
)

// leadingNode opens a node on dir under id (empty: the stored one) at
// raftAddr, bootstrapping it, and waits until it leads.
func leadingNode(t *testing.T, dir, id, raftAddr string) *Node {
	t.Helper()
	leading := make(chan struct{}, 4)
	n, err := Open(Config{
		DataDir: dir, NodeID: id, RaftAddr: raftAddr, Bootstrap: true,
		HeartbeatTimeout: 100 * time.Millisecond, ElectionTimeout: 100 * time.Millisecond,
		OnLeader: func(ctx context.Context) { leading <- struct{}{}; <-ctx.Done() },
	}, newCounter())
	if err != nil {
		t.Fatalf("open %s: %v", dir, err)
	}
	select {
	case <-leading:
	case <-time.After(20 * time.Second):
		n.Close()
		t.Fatalf("node %s never led", n.ID())
	}
	return n
}

func wantErrText(t *testing.T, what string, err error, kind error, wants ...string) {
	t.Helper()
	if !errors.Is(err, kind) {
		t.Fatalf("%s: %v, want %v", what, err, kind)
	}
	for _, want := range wants {
		if !strings.Contains(fmt.Sprint(err), want) {
			t.Fatalf("%s: %v\nwant it to say %q", what, err, want)
		}
	}
}

// TestNodeIDDamagedRefused: a node-id file cut short, zeroed or with a
// byte flipped, beside a log, is refused as damage naming the file, the
// member the log's configuration has at this node's Raft address, and
// how to recover — not a node that starts under an id its configuration
// does not know and is never ready, saying nothing; started once with
// --node-id the id it had, it takes it back and keeps it (README, Disk
// damage). The configuration comes from the newest snapshot or from the
// log after it.
func TestNodeIDDamagedRefused(t *testing.T) {
	const id = "node-a1"
	for _, tc := range []struct {
		name     string
		text     string
		snapshot bool
		want     string
	}{
		{"cut to half", "node", false, `holds node id "node", but the cluster configuration in the node's log has no such member; its members: `},
		{"zeroed", "\x00\x00\x00\x00\x00\x00\x00\n", true, "holds no node id"},
		{"a letter flipped", "node-A1\n", true, `holds node id "node-A1", but`},
		{"the dash flipped", "node\r" + "a1\n", false, "holds no node id"},
		{"another node's id", "n9\n", true, `holds node id "n9", but`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			n := leadingNode(t, dir, id, "127.0.0.1:0")
			addr := n.RaftAddr()
			if tc.snapshot {
				// The configuration then comes from the snapshot, the
				// log after it holding commands only.
				if err := n.Snapshot(); err != nil {
					t.Fatal(err)
				}
			}
			for range 2 {
				if _, err := propose(context.Background(), n); err != nil {
					t.Fatal(err)
				}
			}
			n.Close()
			path := filepath.Join(dir, "node-id")
			if err := os.WriteFile(path, []byte(tc.text), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := Open(Config{DataDir: dir, RaftAddr: addr}, newCounter())
			wantErrText(t, "damaged node-id", err, disk.ErrDamaged, path+": "+tc.want, "to recover: restore "+path+" from a backup", "member "+id+" at this node's Raft address: --node-id "+id)
			if tc.want != "holds no node id" {
				wantErrText(t, "damaged node-id", err, disk.ErrDamaged, id+" at "+addr+" (this node's Raft address)")
			}

			leadingNode(t, dir, id, addr).Close()
			if b, err := os.ReadFile(path); err != nil || string(b) != id+"\n" {
				t.Fatalf("node-id after a start with --node-id %s: %q, %v", id, b, err)
			}
			leadingNode(t, dir, "", addr).Close()
		})
	}
}

// TestNodeIDConfiguredNotAMember: a configured id (--node-id) the log's
// configuration does not have is refused naming the members it has; one
// other than the stored id, when the configuration has the stored one or
// there is none, is refused naming the node-id file and the next step.
func TestNodeIDConfiguredNotAMember(t *testing.T) {
	dir := t.TempDir()
	n := leadingNode(t, dir, "n1", "127.0.0.1:0")
	addr := n.RaftAddr()
	n.Close()
	path := filepath.Join(dir, "node-id")

	_, err := Open(Config{DataDir: dir, NodeID: "n2", RaftAddr: addr}, newCounter())
	wantErrText(t, "another id than the stored member's", err, djinn.ErrInvalidArgument,
		`node id "n2", as configured: data directory `+dir+` belongs to node "n1"`, path, "a member of the cluster configuration", "--node-id \"n1\"")

	if err := os.WriteFile(path, []byte("n3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = Open(Config{DataDir: dir, NodeID: "n2", RaftAddr: addr}, newCounter())
	wantErrText(t, "neither the configured nor the stored id a member", err, djinn.ErrInvalidArgument,
		`node id "n2", as configured: the cluster configuration in the log of data directory `+dir+" has no such member; its members: n1 at "+addr,
		path+` file holds "n3", no member either`, "--node-id n1")

	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	_, err = Open(Config{DataDir: dir, NodeID: "n2", RaftAddr: addr}, newCounter())
	wantErrText(t, "node-id gone, the configured id no member", err, djinn.ErrInvalidArgument, "has no such member; its members: n1 at "+addr)
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused id was written into node-id: %v", err)
	}

	fresh := t.TempDir()
	waiting, err := Open(Config{DataDir: fresh, NodeID: "w1", RaftAddr: "127.0.0.1:0"}, newCounter())
	if err != nil {
		t.Fatal(err)
	}
	waiting.Close()
	_, err = Open(Config{DataDir: fresh, NodeID: "w2", RaftAddr: "127.0.0.1:0"}, newCounter())
	wantErrText(t, "another id than a waiting node's", err, djinn.ErrInvalidArgument,
		`belongs to node "w1"`, filepath.Join(fresh, "node-id"), "no cluster configuration in its log says otherwise")
}

// TestNodeIDLegitimateStarts: a node waiting to be added (no
// configuration yet) restarts under its stored id, with or without
// --node-id; so does a first start that failed after making its log, and
// a member of a cluster.
func TestNodeIDLegitimateStarts(t *testing.T) {
	dir := t.TempDir()
	w, err := Open(Config{DataDir: dir, RaftAddr: "127.0.0.1:0"}, newCounter())
	if err != nil {
		t.Fatal(err)
	}
	id := w.ID()
	w.Close()
	for _, configured := range []string{"", id} {
		w, err := Open(Config{DataDir: dir, NodeID: configured, RaftAddr: "127.0.0.1:0"}, newCounter())
		if err != nil {
			t.Fatalf("a waiting node restarting with --node-id %q: %v", configured, err)
		}
		if w.ID() != id {
			t.Errorf("a waiting node restarted as %s, was %s", w.ID(), id)
		}
		w.Close()
	}

	// A first start that fails once its log is made (its Raft port taken)
	// kept its id first: the next start takes it, not a lost id.
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	first := t.TempDir()
	if _, err := Open(Config{DataDir: first, RaftAddr: taken.Addr().String(), Bootstrap: true}, newCounter()); err == nil {
		t.Fatal("a node opened on a taken Raft port")
	}
	again, err := Open(Config{DataDir: first, RaftAddr: "127.0.0.1:0", Bootstrap: true}, newCounter())
	if err != nil {
		t.Fatalf("a first start again after one on a taken port: %v", err)
	}
	again.Close()

	_, f, _ := twoNodes(t)
	fdir, fid, faddr := f.cfg.DataDir, f.ID(), f.RaftAddr()
	f.Close()
	f2, err := Open(Config{DataDir: fdir, RaftAddr: faddr}, newCounter())
	if err != nil {
		t.Fatalf("a member restarting: %v", err)
	}
	defer f2.Close()
	if f2.ID() != fid {
		t.Fatalf("a member restarted as %s, was %s", f2.ID(), fid)
	}
}

// outsideMsg begins the warning of a node that starts outside the
// configuration its log holds.
const outsideMsg = "this node is not in the cluster configuration its log holds"

// wantOutsideWarning fails unless recs hold the warning that node id
// starts outside its log's configuration, naming the command that adds it.
func wantOutsideWarning(t *testing.T, recs *strangerLog, id, raftAddr string) {
	t.Helper()
	for _, rec := range recs.all() {
		if strings.HasPrefix(rec.Message, outsideMsg) {
			if rec.Level != slog.LevelWarn || attr(rec, "node") != id ||
				!strings.Contains(attr(rec, "add"), "djinn member add "+id+" --raft "+raftAddr) {
				t.Fatalf("the warning of a node outside its configuration: %v %q, node %q, add %q; want WARN for %s at %s",
					rec.Level, rec.Message, attr(rec, "node"), attr(rec, "add"), id, raftAddr)
			}
			return
		}
	}
	t.Fatalf("node %s started outside its log's configuration without a warning", id)
}

// TestNodeIDOutsideItsConfiguration: a node-id holding a valid id that the
// newest configuration in the log does not have is refused only when that
// configuration has another member at this node's Raft address (the id
// altered: that member is this node, --node-id takes its id back);
// otherwise the configuration may be stale (a joiner that stopped while the
// leader was filling its empty log holds the bootstrap configuration only)
// and the node starts, warning that it waits to be added. A damaged
// node-id, and a --node-id other than the stored id that the configuration
// does not have, are still refused (README, Disk damage).
func TestNodeIDOutsideItsConfiguration(t *testing.T) {
	for _, tc := range []struct {
		name, stored, configured string
		atLeaderAddr             bool // restart at the address of the configuration's member
		want                     error
		wants                    []string
	}{
		{name: "a joiner holding the bootstrap configuration only", stored: "j1"},
		{name: "a joiner restarting with its own --node-id", stored: "j1", configured: "j1"},
		{name: "another member's id at this node's address", stored: "n4", atLeaderAddr: true, want: disk.ErrDamaged,
			wants: []string{`holds node id "n4", but the cluster configuration`, "(this node's Raft address)", "--node-id n1"}},
		{name: "the node-id empty", stored: "", want: disk.ErrDamaged, wants: []string{"the node's id is empty but its log is there"}},
		{name: "no node id in node-id", stored: "j\x001", want: disk.ErrDamaged, wants: []string{"holds no node id"}},
		{name: "a --node-id other than the stored id", stored: "j1", configured: "j2", want: djinn.ErrInvalidArgument,
			wants: []string{`node id "j2", as configured`, `file holds "j1", no member either`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The log a joiner's holds once the leader's first batch
			// reached it: the bootstrap configuration, leader n1 alone.
			dir := t.TempDir()
			l := leadingNode(t, dir, "n1", "127.0.0.1:0")
			leaderAddr := l.RaftAddr()
			l.Close()
			path := filepath.Join(dir, "node-id")
			if err := os.WriteFile(path, []byte(tc.stored+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			addr := "127.0.0.1:0"
			if tc.atLeaderAddr {
				addr = leaderAddr
			}
			recs := newStrangerLog()
			n, err := Open(Config{DataDir: dir, NodeID: tc.configured, RaftAddr: addr, Logger: slog.New(recs)}, newCounter())
			if tc.want != nil {
				wantErrText(t, tc.name, err, tc.want, tc.wants...)
				if tc.atLeaderAddr {
					leadingNode(t, dir, "n1", leaderAddr).Close()
				}
				return
			}
			if err != nil {
				t.Fatalf("a node whose log's configuration does not have it yet, restarting: %v", err)
			}
			defer n.Close()
			if n.ID() != tc.stored {
				t.Fatalf("restarted as %s, want %s", n.ID(), tc.stored)
			}
			wantOutsideWarning(t, recs, tc.stored, n.RaftAddr())
		})
	}
}

// joinerDisk fails every append after the first, as a joiner killed while
// the leader was still filling its empty log: the first batch holds the
// bootstrap configuration, not the entry that adds the joiner.
type joinerDisk struct {
	raft.LogStore
	calls atomic.Int32
	broke chan struct{}        // closed at the first append that fails
	confs []raft.Configuration // the configurations the first append held
}

func (d *joinerDisk) StoreLogs(ls []*raft.Log) error {
	switch d.calls.Add(1) {
	case 1:
		for _, e := range ls {
			if e.Type == raft.LogConfiguration {
				d.confs = append(d.confs, raft.DecodeConfiguration(e.Data))
			}
		}
		return d.LogStore.StoreLogs(ls)
	case 2:
		close(d.broke)
	}
	return errDisk
}

// TestJoinerStoppedWhileCatchingUpRestarts: a joiner whose log, when it
// stopped, held the leader's first batch only (the bootstrap configuration,
// leader alone; the entry adding the joiner comes later) restarts, warning
// that its log's configuration does not have it, and catches up.
func TestJoinerStoppedWhileCatchingUpRestarts(t *testing.T) {
	l, _ := steady(t, true, nil)
	t.Cleanup(func() { l.Close() })
	// More entries than raft sends in one batch (512) before the joiner
	// is added, so that its first batch ends before its addition.
	const entries = 600
	for i := range entries {
		untilLeading(t, fmt.Sprintf("write %d", i), func(ctx context.Context) error { _, err := propose(ctx, l); return err })
	}
	jd := &joinerDisk{broke: make(chan struct{})}
	dir := t.TempDir()
	j, err := Open(Config{
		DataDir: dir, NodeID: "j1", RaftAddr: "127.0.0.1:0",
		HeartbeatTimeout: 500 * time.Millisecond, ElectionTimeout: 500 * time.Millisecond,
		wrapLogs: func(s raft.LogStore) raft.LogStore { jd.LogStore = s; return jd },
	}, newCounter())
	if err != nil {
		t.Fatal(err)
	}
	jaddr := j.RaftAddr()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	added := make(chan error, 1)
	go func() { added <- l.AddVoter(ctx, "j1", jaddr) }()
	select {
	case <-jd.broke:
	case <-ctx.Done():
		t.Fatal("the joiner never received a second batch")
	}
	j.Close()
	if len(jd.confs) == 0 || hasServer(jd.confs[len(jd.confs)-1], "j1") {
		t.Fatalf("the joiner's log holds configurations %v; want the last one without it", jd.confs)
	}

	j2, c, recs, err := reopenLogged(dir, jaddr)
	if err != nil {
		t.Fatalf("a joiner stopped while catching up, restarting: %v", err)
	}
	defer j2.Close()
	wantOutsideWarning(t, recs, "j1", jaddr)
	c.wait(t, entries)
	if err := <-added; err != nil && !errors.Is(err, djinn.ErrUnavailable) {
		t.Fatalf("add the joiner: %v", err)
	}
}

// removalDisk closes removed once an append holds a configuration without
// node id after one with it: its removal.
type removalDisk struct {
	raft.LogStore
	id      string
	member  bool // a configuration with id was appended
	once    sync.Once
	removed chan struct{}
}

func (d *removalDisk) StoreLogs(ls []*raft.Log) error {
	if err := d.LogStore.StoreLogs(ls); err != nil {
		return err
	}
	for _, e := range ls {
		if e.Type != raft.LogConfiguration {
			continue
		}
		has := hasServer(raft.DecodeConfiguration(e.Data), d.id)
		if d.member && !has {
			d.once.Do(func() { close(d.removed) })
		}
		d.member = d.member || has
	}
	return nil
}

// TestRemovedNodeRestartsAndWaits: a node removed from its cluster that
// restarts on its data directory, whose log ends in its removal, starts
// (its log's configuration may be stale), warns that it is not in it and
// waits; added back (djinn member add) it catches up.
func TestRemovedNodeRestartsAndWaits(t *testing.T) {
	l, _ := steady(t, true, nil)
	t.Cleanup(func() { l.Close() })
	rd := &removalDisk{id: "f1", removed: make(chan struct{})}
	fdir := t.TempDir()
	c := newCounter()
	f, err := Open(Config{
		DataDir: fdir, NodeID: "f1", RaftAddr: "127.0.0.1:0",
		HeartbeatTimeout: 500 * time.Millisecond, ElectionTimeout: 500 * time.Millisecond,
		wrapLogs: func(s raft.LogStore) raft.LogStore { rd.LogStore = s; return rd },
	}, c)
	if err != nil {
		t.Fatal(err)
	}
	faddr := f.RaftAddr()
	untilLeading(t, "add the follower", func(ctx context.Context) error { return l.AddVoter(ctx, "f1", faddr) })
	untilLeading(t, "write", func(ctx context.Context) error { _, err := propose(ctx, l); return err })
	c.wait(t, 1)
	untilLeading(t, "remove the follower", func(ctx context.Context) error { return l.RemoveServer(ctx, "f1") })
	// The leader sends the removal to the follower as it stops
	// replicating to it.
	select {
	case <-rd.removed:
	case <-time.After(20 * time.Second):
		t.Fatal("the removed node never received its removal")
	}
	f.Close()

	f2, c2, recs, err := reopenLogged(fdir, faddr)
	if err != nil {
		t.Fatalf("a removed node restarting: %v", err)
	}
	defer f2.Close()
	if f2.ID() != "f1" {
		t.Fatalf("the removed node restarted as %s", f2.ID())
	}
	wantOutsideWarning(t, recs, "f1", faddr)
	if ms, err := f2.Members(); err != nil || hasMember(ms, "f1") || !hasMember(ms, l.ID()) {
		t.Fatalf("the removed node's members: %v, %v; want the leader's, without it", ms, err)
	}

	untilLeading(t, "add the node back", func(ctx context.Context) error { return l.AddVoter(ctx, "f1", faddr) })
	untilLeading(t, "write", func(ctx context.Context) error { _, err := propose(ctx, l); return err })
	c2.wait(t, 2)
}

// reopenLogged opens a node again on dir at the Raft address addr, with
// steady timeouts, its log recorded.
func reopenLogged(dir, addr string) (*Node, *counter, *strangerLog, error) {
	recs := newStrangerLog()
	c := newCounter()
	n, err := Open(Config{
		DataDir: dir, RaftAddr: addr, Logger: slog.New(recs),
		HeartbeatTimeout: 500 * time.Millisecond, ElectionTimeout: 500 * time.Millisecond,
	}, c)
	return n, c, recs, err
}
