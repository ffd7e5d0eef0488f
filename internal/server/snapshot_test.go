package server_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/internal/server"
	"github.com/djinn-go/djinn/internal/server/servertest"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// saveFile saves the cluster c is dialled to into a file of the test's.
func saveFile(t *testing.T, c *client.Client) (string, *client.SnapshotInfo) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "djinn.snap")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var info *client.SnapshotInfo
	retryUnavailable(t, "save a snapshot", func(ctx context.Context) error {
		if _, err := f.Seek(0, 0); err != nil {
			return err
		}
		if err := f.Truncate(0); err != nil {
			return err
		}
		info, err = c.SaveSnapshot(ctx, f)
		return err
	})
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	return path, info
}

// counts is a member's resource counts by name.
func counts(t *testing.T, s *server.Server) map[string]int64 {
	t.Helper()
	st, err := servertest.Status(djinnpb.NewAdminClient(servertest.Conn(t, s.Addr())))
	if err != nil {
		t.Fatal(err)
	}
	return st.GetCounts()
}

// TestSnapshotSaveAndRestore: DESIGN.md 7a — a snapshot saved from a live
// cluster, through a follower, restores into a new data directory as a new
// cluster (a new service id; the saved one becomes a previous id) that
// holds every acknowledged resource of every service, and that a second
// member joins. Every lease keeps, from the restore on, the time it had
// left at the save: a lease whose granted expiration passed while the
// file waited is still there, and its remaining time at the restore is at
// least what it had at the save.
func TestSnapshotSaveAndRestore(t *testing.T) {
	t.Parallel()
	ss := servertest.StartCluster(t, 3, func(c *server.Config) {
		c.Raftcfg.HeartbeatTimeout = server.Duration(300 * time.Millisecond)
		c.Raftcfg.ElectionTimeout = server.Duration(300 * time.Millisecond)
		c.Lease.Checkpoint = server.Duration(100 * time.Millisecond) // horizons close to expirations
		c.LookupJoin.Enabled = false                                 // the counts are the test's resources alone
	})
	l := leaderOf(t, ss...)
	var follower *server.Server
	for _, s := range ss {
		if s != l {
			follower = s
		}
	}
	c := servertest.Dial(t, follower.Addr(), servertest.Operator(t, ss[0]))
	h := holdLeases(t, c)
	ctx := testContext(t)
	short, err := c.Mailbox().Register(ctx, 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.renewals.RenewForDesired(ctx, h.mreg.Lease, djinn.Forever); err != nil {
		t.Fatal(err)
	}
	saved := counts(t, l)
	path, info := saveFile(t, c)
	if info.ServiceID != c.ServiceID() || info.Index == 0 || info.Bytes == 0 {
		t.Fatalf("saved %+v of cluster %s", info, c.ServiceID())
	}
	setAtSave := djinn.Remaining(h.locks.Lease().Expiration(), info.SavedAt)

	// The file waits past the short lease's granted expiration.
	servertest.Eventually(t, "the short lease's expiration to pass", func() bool {
		return time.Now().After(short.Lease.Expiration().Add(time.Second))
	})
	dir := filepath.Join(t.TempDir(), "restored")
	if _, err := server.RestoreSnapshot(path, dir); err != nil {
		t.Fatal(err)
	}
	restoredAt := time.Now()
	cfg := servertest.Config(t)
	cfg.DataDir = dir
	cfg.LookupJoin.Enabled = false // counts only what was saved: its services do not register again
	restored := servertest.Start(t, cfg)
	c2 := servertest.Dial(t, restored.Addr())

	if id := c2.ServiceID(); id.IsZero() || id == info.ServiceID {
		t.Errorf("restored cluster's service id %s, want a new one (saved %s)", id, info.ServiceID)
	}
	if ms, err := c2.Members(ctx, false); err != nil || !slices.Contains(ms.Previous, info.ServiceID) {
		t.Errorf("restored cluster's previous ids: %+v, %v; want the saved %s", ms, err, info.ServiceID)
	}
	got := counts(t, restored)
	for k, want := range saved {
		if (k == "lookup_items" || k == "lds_registrars") && got[k] >= want {
			continue // the new cluster's registrar: its own item, and found by the lds
		}
		if got[k] != want {
			t.Errorf("restored %s: %d, want %d as saved (saved %v, restored %v)", k, got[k], want, saved, got)
		}
	}
	checkRestored(t, ctx, c2, h, setAtSave, restoredAt)
	if err := short.Lease.Renew(ctx, c2, time.Minute); err != nil {
		t.Errorf("a lease whose granted expiration passed while the file waited: %v; want it kept, its time counted from the restore", err)
	}

	// The restored node seeds a cluster: a member joins and gets the state.
	jcfg := servertest.JoinConfig(t, restored)
	jcfg.LookupJoin.Enabled = false
	joiner := servertest.Start(t, jcfg)
	servertest.Eventually(t, "the joiner to hold the restored state", func() bool {
		return maps.Equal(counts(t, joiner), counts(t, restored))
	})
}

// checkRestored finds every resource of h at the restored cluster, renews
// every lease there through the references the saved cluster made, and
// checks that the lock set's lease has, from the restore on, at least the
// time it had left at the save.
func checkRestored(t *testing.T, ctx context.Context, c2 *client.Client, h *heldLeases, setAtSave time.Duration, restoredAt time.Time) {
	t.Helper()
	reg, err := c2.Mailbox().Registration(ctx, h.mreg.ID)
	if err != nil || reg.Stored != 1 {
		t.Errorf("mailbox registration: %+v, %v; want it with its stored event", reg, err)
	}
	mgr, err := c2.TransactionManager(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := mgr.GetState(ctx, h.tx.ID(), h.tx.Secret()); err != nil || st != client.TxnActive {
		t.Errorf("transaction: %v, %v; want active", st, err)
	}
	ls, err := c2.LockService(ctx)
	if err != nil {
		t.Fatal(err)
	}
	d, err := ls.Set(h.locks.ID()).Describe(ctx)
	if err != nil || len(d.Holders) != 1 || d.Holders[0].Counts[client.LockW] != 1 {
		t.Errorf("lock set: %+v, %v; want the owner's write lock", d, err)
	} else if left := d.Lease.Expiration().Sub(restoredAt); left < setAtSave-time.Second {
		t.Errorf("lock set lease: %v left after the restore, %v at the save", left, setAtSave)
	}
	r, err := c2.Lookup(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if it, err := r.Lookup(ctx, client.ServiceTemplate{ID: &h.item.ID}); err != nil || it == nil {
		t.Errorf("lookup item: %v, %v", it, err)
	}
	set, err := c2.RenewalService().Set(ctx, h.renewals.ID())
	if err != nil {
		t.Fatal(err)
	}
	if cl, err := set.Leases(ctx); err != nil || len(cl) != 1 || !cl[0].Lease.Equal(h.mreg.Lease) {
		t.Errorf("renewal set: %v, %v; want the mailbox lease in it", cl, err)
	}
	lds, err := c2.LookupDiscovery(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lds.Registration(ctx, h.lds.EventRegistration().Lease); err != nil {
		t.Errorf("lds registration: %v", err)
	}
	for i, l := range h.leases {
		if err := l.Renew(ctx, c2, time.Minute); err != nil {
			t.Errorf("renew the %s through the reference the saved cluster made: %v", h.names[i], err)
		}
	}
}

// TestRestoreRefusesDamage: a damaged, truncated, foreign or future file is
// refused with an error saying so, and so is a data directory that holds
// a node already; nothing is left to restore. Saving needs the operator
// role.
func TestRestoreRefusesDamage(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, servertest.Config(t))
	c := servertest.Dial(t, s.Addr(), servertest.Operator(t, s))
	if _, err := c.Mailbox().Register(testContext(t), time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := servertest.Dial(t, s.Addr()).SaveSnapshot(testContext(t), io.Discard); !errors.Is(err, djinn.ErrPermissionDenied) {
		t.Errorf("save without the operator role: %v, want permission denied", err)
	}
	path, _ := saveFile(t, c)
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	variant := func(name string, b []byte) string {
		p := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	flipped := bytes.Clone(good)
	flipped[len(flipped)/2] ^= 1
	future := bytes.Clone(good)
	future[11] = 9
	for _, c := range []struct {
		name, path, dir, want string
	}{
		{"a byte flipped", variant("flipped", flipped), "", "checksum mismatch"},
		{"truncated", variant("truncated", good[:len(good)-10]), "", "truncated"},
		{"not a snapshot", variant("text", []byte("hello")), "", "not a djinn snapshot file"},
		{"another version", variant("future", future), "", "version 9"},
		{"no such file", filepath.Join(t.TempDir(), "none"), "", "no such file"},
		{"a data directory in use", path, s.DataDir(), "holds a node's state"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := c.dir
			if dir == "" {
				dir = filepath.Join(t.TempDir(), "d")
			}
			_, err := server.RestoreSnapshot(c.path, dir)
			if !errors.Is(err, djinn.ErrInvalidArgument) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("%v; want an invalid argument saying %q", err, c.want)
			}
			if _, err := os.Stat(filepath.Join(dir, "restore.snap")); err == nil && c.dir == "" {
				t.Fatal("a refused file was left to restore")
			}
		})
	}
}
