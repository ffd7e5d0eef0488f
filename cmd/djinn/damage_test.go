package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/djinn-go/djinn/proto/djinnpb"
)

// runBinary runs the binary to its end and returns its exit status and output.
func runBinary(t *testing.T, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, djinnBinary(t), args...).CombinedOutput()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0, string(out)
	case errors.As(err, &exit) && ctx.Err() == nil:
		return exit.ExitCode(), string(out)
	}
	t.Fatalf("djinn %v: %v\n%s", args, err, out)
	return 0, ""
}

// tailSegment returns the log segment being appended to and where its
// written bytes end.
func tailSegment(t *testing.T, dir string) (string, int) {
	t.Helper()
	segs, err := filepath.Glob(filepath.Join(dir, "raft", "wal", "*.wal"))
	if err != nil || len(segs) == 0 {
		t.Fatalf("no log segments: %v", err)
	}
	slices.Sort(segs)
	data, err := os.ReadFile(segs[len(segs)-1])
	if err != nil {
		t.Fatal(err)
	}
	end := len(data)
	for end > 0 && data[end-1] == 0 {
		end--
	}
	return segs[len(segs)-1], (end + 7) / 8 * 8
}

// serveArgs returns djinn serve's arguments for the node, extra first.
func (n *node) serveArgs(extra ...string) []string {
	return append(append([]string{"serve"}, extra...), "--data-dir", n.dir, "--listen", n.listen, "--admin", n.admin, "--raft", n.raft, "--discovery", n.discovery)
}

// register makes k mailbox registrations at the server p: acknowledged,
// logged state.
func register(t *testing.T, p *proc, k int) {
	t.Helper()
	mb := djinnpb.NewEventMailboxClient(dial(t, p.addr))
	for range k {
		if _, err := mb.Register(ctxT(t), &djinnpb.MailboxRegisterRequest{LeaseDurationNanos: int64(time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
}

// refused runs djinn with args and checks that it exits with status 1
// saying each of wants.
func refused(t *testing.T, args []string, wants ...string) {
	t.Helper()
	code, out := runBinary(t, args...)
	for _, want := range wants {
		if code != 1 || !strings.Contains(out, want) {
			t.Fatalf("djinn %s: exit %d, want 1 with %q in:\n%s", args[0], code, want, out)
		}
	}
}

func flipAt(t *testing.T, path string, off int) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data[off] ^= 0x20
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestServeRefusesDamage: djinn serve on a data directory whose log's last
// record was damaged after a clean shutdown, or whose key/value store has
// a damaged frame before others, exits with status 1 and a message naming
// the file and offset and how to recover; djinn repair says what it
// drops, and the server then starts (README, Disk damage).
func TestServeRefusesDamage(t *testing.T) {
	n := newNode(t)
	p := n.start(t)
	register(t, p, 5)
	p.stop(t)

	seg, end := tailSegment(t, n.dir)
	flipAt(t, seg, end-20) // in the last entry, before the commit frame
	serve := n.serveArgs()
	refused(t, serve, seg+" at offset", "stopped cleanly", "to recover", "djinn repair --data-dir "+n.dir)
	code, out := runBinary(t, "repair", "--data-dir", n.dir)
	if code != 0 || !strings.Contains(out, "acknowledged: lost to this node") || !strings.Contains(out, filepath.Join(n.dir, "damaged-1")) {
		t.Fatalf("repair: exit %d:\n%s", code, out)
	}
	n.start(t).stop(t)

	kvLog := filepath.Join(n.dir, "kv", "store.log")
	flipAt(t, kvLog, 40) // in the first crash-count frame, the header's 34 bytes before it
	code, out = runBinary(t, serve...)
	if code != 1 || !strings.Contains(out, kvLog+" at offset 34") || !strings.Contains(out, "djinn repair --data-dir "+n.dir) {
		t.Fatalf("damaged key/value store: exit %d:\n%s", code, out)
	}
	code, out = runBinary(t, "repair", "--data-dir", n.dir)
	if code != 0 || !strings.Contains(out, "dropped 17 damaged bytes at offset 34") {
		t.Fatalf("repair of the key/value store: exit %d:\n%s", code, out)
	}
	n.start(t).stop(t)
}

// TestServeRefusesACutKVStore: djinn serve on a data directory whose
// key/value store was cut to half after a SIGKILL — its acknowledged
// writes after the cut gone, however whole the rest looks — exits with
// status 1 naming kv/store.log, the offset and djinn repair, rather than
// serve fewer keys; djinn repair says where the store was cut, and the
// server then starts. A store rolled back to a copy from before the last
// clean stop, or after a SIGKILL to one from before the last start, is
// refused too (README, Disk damage).
func TestServeRefusesACutKVStore(t *testing.T) {
	n := newNode(t)
	p := n.start(t)
	kvc := djinnpb.NewKeyValueClient(dial(t, p.addr))
	for i := range 20 {
		if _, err := kvc.Put(ctxT(t), &djinnpb.KVPutRequest{Key: fmt.Sprintf("k%02d", i), Value: []byte("v")}); err != nil {
			t.Fatal(err)
		}
	}
	p.kill()
	kvLog := filepath.Join(n.dir, "kv", "store.log")
	fi, err := os.Stat(kvLog)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(kvLog, fi.Size()/2); err != nil {
		t.Fatal(err)
	}
	refused(t, n.serveArgs(), kvLog+" at offset", "cut short", "to recover", "djinn repair --data-dir "+n.dir)
	code, out := runBinary(t, "repair", "--data-dir", n.dir)
	if code != 0 || !strings.Contains(out, "the log was cut short at offset") {
		t.Fatalf("repair of a cut key/value store: exit %d:\n%s", code, out)
	}
	n.start(t).stop(t)

	// Rolled back to a copy from before the last clean stop.
	old, err := os.ReadFile(kvLog)
	if err != nil {
		t.Fatal(err)
	}
	p = n.start(t)
	if _, err := djinnpb.NewKeyValueClient(dial(t, p.addr)).Put(ctxT(t), &djinnpb.KVPutRequest{Key: "later", Value: []byte("v")}); err != nil {
		t.Fatal(err)
	}
	p.stop(t)
	if err := os.WriteFile(kvLog, old, 0o600); err != nil {
		t.Fatal(err)
	}
	refused(t, n.serveArgs(), kvLog+" at offset", "older than this store's last clean close", "djinn repair --data-dir "+n.dir)

	// Rolled back to a copy from before the last start, after a SIGKILL.
	if code, out = runBinary(t, "repair", "--data-dir", n.dir); code != 0 {
		t.Fatalf("repair of a rolled-back key/value store: exit %d:\n%s", code, out)
	}
	n.start(t).stop(t)
	if old, err = os.ReadFile(kvLog); err != nil {
		t.Fatal(err)
	}
	p = n.start(t)
	if _, err := djinnpb.NewKeyValueClient(dial(t, p.addr)).Put(ctxT(t), &djinnpb.KVPutRequest{Key: "after-kill", Value: []byte("v")}); err != nil {
		t.Fatal(err)
	}
	p.kill()
	if err := os.WriteFile(kvLog, old, 0o600); err != nil {
		t.Fatal(err)
	}
	refused(t, n.serveArgs(), kvLog+" at offset", "older than this store was when last opened", "djinn repair --data-dir "+n.dir)
}

// TestServeRefusesLostFiles: djinn serve on a data directory that lost
// its key/value store (kv/store.log removed or emptied) or its node-id
// file, beside a log that holds acknowledged state, exits with status 1
// naming the file and how to recover — it does not start with an empty
// store, its acknowledged writes gone, nor under a new id its log does
// not know; djinn repair, asked, starts an empty store and says so
// (README, Disk damage).
func TestServeRefusesLostFiles(t *testing.T) {
	n := newNode(t)
	p := n.start(t)
	kvc := djinnpb.NewKeyValueClient(dial(t, p.addr))
	if _, err := kvc.Put(ctxT(t), &djinnpb.KVPutRequest{Key: "k", Value: []byte("v")}); err != nil {
		t.Fatal(err)
	}
	p.stop(t)
	serve := n.serveArgs()

	kvLog := filepath.Join(n.dir, "kv", "store.log")
	for _, damage := range []func() error{
		func() error { return os.Remove(kvLog) },
		func() error { return os.WriteFile(kvLog, nil, 0o600) },
	} {
		if err := damage(); err != nil {
			t.Fatal(err)
		}
		refused(t, serve, kvLog+": the key/value store is gone", "to recover: restore "+kvLog, "djinn repair --data-dir "+n.dir)
	}
	code, out := runBinary(t, "repair", "--data-dir", n.dir)
	if code != 0 || !strings.Contains(out, kvLog+": gone or empty; an empty store was started in its place") {
		t.Fatalf("repair of a lost key/value store: exit %d:\n%s", code, out)
	}
	n.start(t).stop(t)

	idFile := filepath.Join(n.dir, "node-id")
	if err := os.Remove(idFile); err != nil {
		t.Fatal(err)
	}
	code, out = runBinary(t, serve...)
	if code != 1 || !strings.Contains(out, idFile+": the node's id is gone") || !strings.Contains(out, "--node-id") {
		t.Fatalf("lost node-id: exit %d, want 1 naming %s and --node-id:\n%s", code, idFile, out)
	}
}

// TestServeRefusesDamagedIdentity: djinn serve on a data directory whose
// node-id file was cut short or zeroed, or whose join-secret file is gone,
// beside its log, exits with status 1 naming the file and how to recover
// (for node-id, the member the log has at this node's Raft address) — it
// does not start never ready under an id its log does not know, nor with a
// new secret; with the file restored it starts (README, Disk damage).
func TestServeRefusesDamagedIdentity(t *testing.T) {
	n := newNode(t)
	n.start(t).stop(t)
	serve := n.serveArgs()

	idFile := filepath.Join(n.dir, "node-id")
	kept, err := os.ReadFile(idFile)
	if err != nil {
		t.Fatal(err)
	}
	id := strings.TrimSpace(string(kept))
	for _, tc := range []struct{ name, text, says string }{
		{"cut to half", id[:len(id)/2], idFile + ": holds node id"},
		{"zeroed", strings.Repeat("\x00", len(kept)), idFile + ": holds no node id"},
	} {
		if err := os.WriteFile(idFile, []byte(tc.text), 0o600); err != nil {
			t.Fatal(err)
		}
		refused(t, serve, tc.says, "to recover: restore "+idFile, "--node-id "+id)
	}
	if err := os.WriteFile(idFile, kept, 0o600); err != nil {
		t.Fatal(err)
	}
	n.start(t).stop(t)

	secretFile := filepath.Join(n.dir, "join-secret")
	kept, err = os.ReadFile(secretFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(secretFile); err != nil {
		t.Fatal(err)
	}
	refused(t, serve, secretFile+": the join secret is gone", "to recover: restore "+secretFile, "--join-secret-file")
	if err := os.WriteFile(secretFile, kept, 0o600); err != nil {
		t.Fatal(err)
	}
	n.start(t).stop(t)
}

// TestServeTurnsKVOn: a node that ran without its key/value store
// (--kv=false) starts an empty one when it is turned on — a store never
// made, not one lost — and serves writes to it.
func TestServeTurnsKVOn(t *testing.T) {
	n := newNode(t)
	n.start(t, "--kv=false").stop(t)
	p := n.start(t)
	defer p.stop(t)
	kvc := djinnpb.NewKeyValueClient(dial(t, p.addr))
	if _, err := kvc.Put(ctxT(t), &djinnpb.KVPutRequest{Key: "k", Value: []byte("v")}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(n.dir, "kv", "off")); !os.IsNotExist(err) {
		t.Errorf("the store is made but the mark of none is still there: %v", err)
	}
}

// TestServeKVOffKeepsALostStoreRefused: only a first start without the
// key/value store marks it as never made; a store lost and then a start
// with --kv=false does not make the loss pass for a store never made.
func TestServeKVOffKeepsALostStoreRefused(t *testing.T) {
	n := newNode(t)
	p := n.start(t)
	kvc := djinnpb.NewKeyValueClient(dial(t, p.addr))
	if _, err := kvc.Put(ctxT(t), &djinnpb.KVPutRequest{Key: "k", Value: []byte("v")}); err != nil {
		t.Fatal(err)
	}
	p.stop(t)
	kvLog := filepath.Join(n.dir, "kv", "store.log")
	if err := os.Remove(kvLog); err != nil {
		t.Fatal(err)
	}
	n.start(t, "--kv=false").stop(t)
	code, out := runBinary(t, "serve", "--data-dir", n.dir, "--listen", n.listen, "--admin", n.admin, "--raft", n.raft, "--discovery", n.discovery)
	if code != 1 || !strings.Contains(out, kvLog+": the key/value store is gone") {
		t.Fatalf("a lost store after a start with --kv=false: exit %d, want 1 refusing it:\n%s", code, out)
	}
}

// TestServeRefusesALogCutAfterACrash: after an unclean stop, a log whose
// last batches read as never written, though the log-end record says they
// reached the disk, is refused naming the record — without it, that end
// would pass for a write the crash interrupted; djinn repair reports the
// entries lost and the server then starts (README, Disk damage).
func TestServeRefusesALogCutAfterACrash(t *testing.T) {
	n := newNode(t)
	p := n.start(t)
	register(t, p, 5)
	// A clean stop brings the record to the log's end; without its
	// clean-shutdown record the directory is as a crash leaves it.
	p.stop(t)
	if err := os.Remove(filepath.Join(n.dir, "raft", "clean-shutdown")); err != nil {
		t.Fatal(err)
	}
	seg, end := tailSegment(t, n.dir)
	data, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	clear(data[(end-1)/512*512 : end]) // the last written sector: the last batch reads as torn
	if err := os.WriteFile(seg, data, 0o600); err != nil {
		t.Fatal(err)
	}
	serve := n.serveArgs()
	refused(t, serve, seg, filepath.Join(n.dir, "raft", "log-end")+" records that entries up to", "acknowledged", "djinn repair --data-dir "+n.dir)
	code, out := runBinary(t, "repair", "--data-dir", n.dir)
	if code != 0 || !strings.Contains(out, "log-end record says") || !strings.Contains(out, "acknowledged: lost to this node") {
		t.Fatalf("repair: exit %d:\n%s", code, out)
	}
	n.start(t).stop(t)
}

// TestServeRefusesAnOlderLogMetadata: djinn serve on a data directory
// whose log metadata (raft/wal/wal-meta.db) was restored from a copy taken
// before the log moved on to newer segments exits with status 1 naming
// the file, instead of serving the log cut short and never becoming ready;
// djinn repair rebuilds the log from its segments, losing nothing (README,
// Disk damage).
func TestServeRefusesAnOlderLogMetadata(t *testing.T) {
	n := newNode(t)
	cfg := filepath.Join(t.TempDir(), "djinn.toml")
	if err := os.WriteFile(cfg, []byte("[raft-tuning]\nwal-segment-size = 65536\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := n.start(t, "--config", cfg)
	register(t, p, 1)
	p.stop(t)
	meta := filepath.Join(n.dir, "raft", "wal", "wal-meta.db")
	old, err := os.ReadFile(meta)
	if err != nil {
		t.Fatal(err)
	}

	// Each registration is a log entry: enough of them fill the 64 KiB
	// segment, and the log moves on to a new one.
	p = n.start(t, "--config", cfg)
	mb := djinnpb.NewEventMailboxClient(dial(t, p.addr))
	for i := 0; segmentCount(t, n.dir) < 2; i++ {
		if i == 100000 {
			t.Fatal("the log never moved on to a second segment")
		}
		if _, err := mb.Register(ctxT(t), &djinnpb.MailboxRegisterRequest{LeaseDurationNanos: int64(time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	p.stop(t)
	if err := os.WriteFile(meta, old, 0o600); err != nil {
		t.Fatal(err)
	}

	serve := n.serveArgs("--config", cfg)
	refused(t, serve, meta+": the log's metadata is older than its segments", "djinn repair --data-dir "+n.dir)
	code, out := runBinary(t, "repair", "--data-dir", n.dir)
	if code != 0 || !strings.Contains(out, "older than its segments") || strings.Contains(out, "lost to this node") {
		t.Fatalf("repair: exit %d, want 0 rebuilding the log with nothing lost:\n%s", code, out)
	}
	n.start(t, "--config", cfg).stop(t)
}

// segmentCount returns how many log segment files dir holds.
func segmentCount(t *testing.T, dir string) int {
	t.Helper()
	segs, err := filepath.Glob(filepath.Join(dir, "raft", "wal", "*.wal"))
	if err != nil {
		t.Fatal(err)
	}
	return len(segs)
}

// TestServeRefusesALostSegment: djinn serve on a data directory whose
// last log segment, holding acknowledged registrations, was removed after
// a SIGKILL exits with status 1 naming the segment and `djinn repair`,
// rather than start without those registrations; djinn repair says which
// entries it dropped, and the server then starts (README, Disk damage).
func TestServeRefusesALostSegment(t *testing.T) {
	n := newNode(t)
	cfg := filepath.Join(t.TempDir(), "djinn.toml")
	if err := os.WriteFile(cfg, []byte("[raft-tuning]\nwal-segment-size = 65536\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := n.start(t, "--config", cfg)
	// Registrations until the log starts a second segment, then three in it.
	walDir := filepath.Join(n.dir, "raft", "wal")
	for i := 0; ; i++ {
		if segs, _ := filepath.Glob(filepath.Join(walDir, "*.wal")); len(segs) > 1 {
			break
		}
		if i == 100000 {
			t.Fatal("100000 registrations and the log has one segment of 64 KiB")
		}
		register(t, p, 1)
	}
	for range 3 {
		register(t, p, 1)
	}
	p.kill()
	seg, _ := tailSegment(t, n.dir)
	if err := os.Remove(seg); err != nil {
		t.Fatal(err)
	}
	serve := n.serveArgs("--config", cfg)
	refused(t, serve, seg+": the log's last segment is gone", "acknowledged: they are lost", "to recover", "djinn repair --data-dir "+n.dir)
	code, out := runBinary(t, "repair", "--data-dir", n.dir)
	if code != 0 || !strings.Contains(out, "acknowledged: lost to this node") {
		t.Fatalf("repair: exit %d:\n%s", code, out)
	}
	n.start(t, "--config", cfg).stop(t)
}

// TestServeRefusesAnOlderTermAndVote: djinn serve on a data directory
// whose log metadata was put back from a copy taken before an election —
// the same segments, raft's term and vote older — exits with status 1
// naming the file and the term record, rather than let the node vote a
// second time in a term it voted in; djinn repair writes the record's term
// and vote back, losing nothing, and the server then starts (README, Disk
// damage).
func TestServeRefusesAnOlderTermAndVote(t *testing.T) {
	n := newNode(t)
	p := n.start(t)
	register(t, p, 1)
	p.stop(t)
	meta := filepath.Join(n.dir, "raft", "wal", "wal-meta.db")
	old, err := os.ReadFile(meta)
	if err != nil {
		t.Fatal(err)
	}
	p = n.start(t) // its election raises the term
	register(t, p, 1)
	p.stop(t)
	if err := os.WriteFile(meta, old, 0o600); err != nil {
		t.Fatal(err)
	}

	refused(t, n.serveArgs(), meta+": the log's metadata holds raft's term", filepath.Join(n.dir, "raft", "term")+" records term",
		"vote a second time", "djinn repair --data-dir "+n.dir)
	code, out := runBinary(t, "repair", "--data-dir", n.dir)
	if code != 0 || !strings.Contains(out, "written back into the metadata") || strings.Contains(out, "lost to this node") {
		t.Fatalf("repair: exit %d, want 0 writing the term and vote back with nothing lost:\n%s", code, out)
	}
	n.start(t).stop(t)
}
