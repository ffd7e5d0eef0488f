package replica

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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

// TestRemovedNodeRefused: a node removed from its cluster that restarts
// on its data directory, whose log's configuration no longer has it, is
// refused saying how to join again — not started to wait, never ready,
// for a leader that will never send it anything.
func TestRemovedNodeRefused(t *testing.T) {
	l, f, _ := twoNodes(t)
	fdir, fid, faddr := f.cfg.DataDir, f.ID(), f.RaftAddr()
	untilLeading(t, "remove the follower", func(ctx context.Context) error { return l.RemoveServer(ctx, fid) })
	// The leader sends the removal to the follower as it stops
	// replicating to it; the follower learns of it a moment later.
	timeout := time.After(20 * time.Second)
	for ms, err := f.Members(); err != nil || hasMember(ms, fid); ms, err = f.Members() {
		select {
		case <-timeout:
			t.Fatalf("the removed node's configuration still has it: %v, %v", ms, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
	f.Close()
	_, err := Open(Config{DataDir: fdir, RaftAddr: faddr}, newCounter())
	wantErrText(t, "a removed node restarting", err, disk.ErrDamaged, filepath.Join(fdir, "node-id"),
		fmt.Sprintf("holds node id %q, but the cluster configuration", fid), l.ID()+" at "+l.RaftAddr(),
		fmt.Sprintf("if node %s was removed from the cluster", fid), "--join")
}
