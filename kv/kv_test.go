package kv_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/kv"
	"github.com/djinn-go/djinn/participant"
	"github.com/djinn-go/djinn/participant/participanttest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// raft's transport and the WAL leave background goroutines that
		// exit shortly after Shutdown (the integration test runs a server).
		goleak.IgnoreTopFunction("github.com/hashicorp/raft.(*NetworkTransport).listen"),
		goleak.IgnoreTopFunction("github.com/hashicorp/raft-wal.(*WAL).runRotate"),
		goleak.IgnoreAnyFunction("github.com/hashicorp/raft.(*netPipeline).decodeResponses"),
		goleak.IgnoreAnyFunction("github.com/hashicorp/raft.(*NetworkTransport).handleConn"),
	)
}

var bg = context.Background()

type fixture struct {
	t   *testing.T
	db  *kv.DB
	mgr *participanttest.Manager
	st  participant.Store
}

func open(t *testing.T, st participant.Store, mgr *participanttest.Manager) *fixture {
	t.Helper()
	db, err := kv.Open(kv.Config{Participant: participant.Config{Endpoint: "127.0.0.1:7", Store: st, Managers: mgr}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return &fixture{t: t, db: db, mgr: mgr, st: st}
}

// restartable is a FileStore in a temporary directory with a manager that
// cannot be reached, so that a prepared transaction stays prepared across
// a restart: the set-up of the restart tests.
type restartable struct {
	t   *testing.T
	dir string
	st  *participant.FileStore
	mgr *participanttest.Manager
}

func newRestartable(t *testing.T) *restartable {
	r := &restartable{t: t, dir: t.TempDir(), mgr: participanttest.NewManager()}
	r.mgr.FailGetState(djinn.Errorf(djinn.Unavailable, "manager unreachable"))
	r.open()
	return r
}

func (r *restartable) open() {
	st, err := participant.OpenFileStore(r.dir)
	if err != nil {
		r.t.Fatal(err)
	}
	r.st = st
	r.t.Cleanup(func() { st.Close() })
}

// restart closes db and the store, and opens the store again.
func (r *restartable) restart(db *kv.DB) {
	db.Close()
	r.st.Close()
	r.open()
}

func start(t *testing.T) *fixture {
	return open(t, participant.NewMemStore(), participanttest.NewManager())
}

func (f *fixture) put(tx *participant.Tx, k, v string) {
	f.t.Helper()
	if err := f.db.Put(bg, tx, k, []byte(v)); err != nil {
		f.t.Fatalf("put %s: %v", k, err)
	}
}

// get returns k's value as tx sees it, "-" when absent.
func (f *fixture) get(tx *participant.Tx, k string) string {
	f.t.Helper()
	v, ok, err := f.db.Get(bg, tx, k)
	if err != nil {
		f.t.Fatalf("get %s: %v", k, err)
	}
	if !ok {
		return "-"
	}
	return string(v)
}

func (f *fixture) list(tx *participant.Tx, prefix string) string {
	f.t.Helper()
	es, err := f.db.List(bg, tx, prefix)
	if err != nil {
		f.t.Fatalf("list %s: %v", prefix, err)
	}
	var parts []string
	for _, e := range es {
		parts = append(parts, e.Key+"="+string(e.Value))
	}
	return strings.Join(parts, " ")
}

// commit drives tx to COMMITTED here as a manager would.
func (f *fixture) commit(tx *participant.Tx) participant.State {
	f.t.Helper()
	v, err := f.db.Participant().Prepare(bg, *tx)
	if err != nil {
		f.t.Fatal(err)
	}
	if v == participant.Prepared {
		if err := f.db.Participant().Commit(bg, *tx); err != nil {
			f.t.Fatal(err)
		}
	}
	return v
}

func (f *fixture) abort(tx *participant.Tx) {
	f.t.Helper()
	if err := f.db.Participant().Abort(bg, *tx); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) tx() *participant.Tx {
	tx := f.mgr.Create()
	return &tx
}

func wantLocked(t *testing.T, err error, key string) {
	t.Helper()
	if !errors.Is(err, djinn.ErrUnavailable) || !strings.Contains(err.Error(), fmt.Sprintf("%q", key)) {
		t.Fatalf("error %v: want a lock conflict (Unavailable) naming %q", err, key)
	}
}

// TestSemantics has one row per rule of the store's transaction semantics
// (TX.3's defaults, as the package documentation states them).
func TestSemantics(t *testing.T) {
	rows := []struct {
		name string
		run  func(t *testing.T, f *fixture)
	}{
		{"TX.3 without a transaction a write applies at once", func(t *testing.T, f *fixture) {
			f.put(nil, "a", "1")
			if got := f.get(nil, "a"); got != "1" {
				t.Fatalf("get a: %s", got)
			}
			if found, err := f.db.Delete(bg, nil, "a"); err != nil || !found {
				t.Fatalf("delete a: %v %v", found, err)
			}
			if got := f.get(nil, "a"); got != "-" {
				t.Fatalf("get a after delete: %s", got)
			}
		}},
		{"TX.1.2 TX.3 changes under a transaction are seen only inside it until it commits", func(t *testing.T, f *fixture) {
			f.put(nil, "a", "old")
			tx := f.tx()
			f.put(tx, "a", "new")
			f.put(tx, "b", "2")
			if found, err := f.db.Delete(bg, tx, "c"); err != nil || found {
				t.Fatalf("delete of an absent key: %v %v", found, err)
			}
			if got := f.get(nil, "a") + f.get(nil, "b"); got != "old-" {
				t.Fatalf("outside: %s", got)
			}
			if got := f.list(nil, ""); got != "a=old" {
				t.Fatalf("list outside: %s", got)
			}
			if got := f.get(tx, "a") + f.get(tx, "b"); got != "new2" {
				t.Fatalf("inside: %s", got)
			}
			if got := f.list(tx, ""); got != "a=new b=2" {
				t.Fatalf("list inside: %s", got)
			}
			if v := f.commit(tx); v != participant.Prepared {
				t.Fatalf("vote %v", v)
			}
			if got := f.list(nil, ""); got != "a=new b=2" {
				t.Fatalf("after commit: %s", got)
			}
		}},
		{"TX.2.6 an aborted transaction's changes vanish and its locks go", func(t *testing.T, f *fixture) {
			f.put(nil, "a", "old")
			tx := f.tx()
			f.put(tx, "a", "new")
			if _, err := f.db.Delete(bg, tx, "a"); err != nil {
				t.Fatal(err)
			}
			if got := f.get(tx, "a"); got != "-" {
				t.Fatalf("inside after delete: %s", got)
			}
			f.abort(tx)
			if got := f.get(nil, "a"); got != "old" {
				t.Fatalf("after abort: %s", got)
			}
			f.put(nil, "a", "next")
		}},
		{"TX.3 a key written by an ACTIVE transaction is locked against other writes, which fail at once", func(t *testing.T, f *fixture) {
			t1, t2 := f.tx(), f.tx()
			f.put(t1, "k", "1")
			wantLocked(t, f.db.Put(bg, t2, "k", []byte("2")), "k")
			_, err := f.db.Delete(bg, t2, "k")
			wantLocked(t, err, "k")
			wantLocked(t, f.db.Put(bg, nil, "k", []byte("3")), "k")
			_, _, err = f.db.Get(bg, t2, "k")
			wantLocked(t, err, "k")
			f.put(t2, "other", "ok") // t2 goes on
			if got := f.get(nil, "k"); got != "-" {
				t.Fatalf("a read without a transaction sees %s, want the committed value", got)
			}
			f.commit(t1)
			f.put(t2, "k", "2")
		}},
		{"TX.3 a key read under a transaction is locked against other writes until it votes", func(t *testing.T, f *fixture) {
			f.put(nil, "k", "0")
			t1, t2 := f.tx(), f.tx()
			if got := f.get(t1, "k"); got != "0" {
				t.Fatalf("read %s", got)
			}
			f.get(t2, "k") // readers share
			wantLocked(t, f.db.Put(bg, t2, "k", []byte("2")), "k")
			wantLocked(t, f.db.Put(bg, nil, "k", []byte("3")), "k")
			f.put(t1, "other", "x")
			f.commit(t1) // PREPARED drops its read locks
			f.put(t2, "k", "2")
		}},
		{"TX.3 a prefix listed under a transaction is locked against other transactions' new keys", func(t *testing.T, f *fixture) {
			t1, t2 := f.tx(), f.tx()
			if got := f.list(t1, "user/"); got != "" {
				t.Fatalf("list %q", got)
			}
			wantLocked(t, f.db.Put(bg, t2, "user/ann", []byte("1")), "user/ann")
			f.put(t2, "group/x", "1")
			_, err := f.db.List(bg, t1, "group/")
			wantLocked(t, err, "group/x")
			f.commit(t1)
			f.put(t2, "user/ann", "1")
		}},
		{"TX.2.6 a transaction that only read votes NOTCHANGED and releases its locks", func(t *testing.T, f *fixture) {
			f.put(nil, "k", "0")
			tx := f.tx()
			f.get(tx, "k")
			f.list(tx, "")
			if v := f.commit(tx); v != participant.NotChanged {
				t.Fatalf("vote %v, want NOTCHANGED", v)
			}
			f.put(nil, "k", "1")
		}},
		{"TX.2.6 operations under a transaction that is not ACTIVE fail", func(t *testing.T, f *fixture) {
			tx := f.tx()
			f.put(tx, "k", "1")
			f.commit(tx)
			err := f.db.Put(bg, tx, "k", []byte("2"))
			if !errors.Is(err, djinn.ErrCannotJoin) {
				t.Fatalf("put after commit: %v", err)
			}
		}},
		{"TX.2.3 an operation under a transaction the manager refuses fails with its error and changes nothing", func(t *testing.T, f *fixture) {
			tx := f.tx()
			f.mgr.SetState(*tx, participant.Aborted)
			if err := f.db.Put(bg, tx, "k", []byte("1")); !errors.Is(err, djinn.ErrCannotJoin) {
				t.Fatalf("put: %v", err)
			}
			f.put(nil, "k", "free")
		}},
		{"arguments are checked: empty or long keys, long values", func(t *testing.T, f *fixture) {
			for _, err := range []error{
				f.db.Put(bg, nil, "", nil),
				f.db.Put(bg, nil, strings.Repeat("k", kv.DefaultMaxKeyBytes+1), nil),
				f.db.Put(bg, nil, "k", make([]byte, kv.DefaultMaxValueBytes+1)),
			} {
				if !errors.Is(err, djinn.ErrInvalidArgument) {
					t.Fatalf("error %v, want invalid argument", err)
				}
			}
			_, _, err := f.db.Get(bg, nil, "")
			if !errors.Is(err, djinn.ErrInvalidArgument) {
				t.Fatalf("get of an empty key: %v", err)
			}
		}},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) { r.run(t, start(t)) })
	}
}

// TestDurableAcrossRestart: committed data and prepared transactions
// survive a restart over a FileStore; a prepared transaction holds its
// locks again, and the roll decision (TX.2.8.1) rolls it forward.
func TestDurableAcrossRestart(t *testing.T) {
	r := newRestartable(t)
	mgr := r.mgr
	f := open(t, r.st, mgr)
	f.put(nil, "plain", "1")
	tx := f.tx()
	f.put(tx, "k", "prepared")
	f.put(tx, "plain", "2")
	if v, err := f.db.Participant().Prepare(bg, *tx); err != nil || v != participant.Prepared {
		t.Fatalf("prepare: %v %v", v, err)
	}
	r.restart(f.db)
	f = open(t, r.st, mgr)
	if got := f.get(nil, "plain") + f.get(nil, "k"); got != "1-" {
		t.Fatalf("after restart: %s", got)
	}
	wantLocked(t, f.db.Put(bg, nil, "k", []byte("x")), "k")
	mgr.FailGetState(nil)
	mgr.SetState(*tx, participant.Committed)
	// The roll decision retries with backoff; the manager's commit would
	// settle it too. Do what the manager does.
	if err := f.db.Participant().Commit(bg, *tx); err != nil {
		t.Fatal(err)
	}
	if got := f.get(nil, "plain") + f.get(nil, "k"); got != "2prepared" {
		t.Fatalf("after roll forward: %s", got)
	}
	f.put(nil, "k", "free")
}

// TestConfigNegativeRefused: a negative size bound, or a negative
// duration of the participant's, is refused with InvalidArgument naming
// the field and the value (it was taken as the default).
func TestConfigNegativeRefused(t *testing.T) {
	for _, row := range []struct {
		cfg  kv.Config
		want string
	}{
		{kv.Config{MaxKeyBytes: -1}, "key/value store config MaxKeyBytes -1: negative; give a positive size, or zero for the default (1024)"},
		{kv.Config{MaxValueBytes: -2}, "key/value store config MaxValueBytes -2: negative; give a positive size, or zero for the default (1048576)"},
		{kv.Config{MaxBytes: -3}, "key/value store config MaxBytes -3: negative; give a positive size, or zero for the default (1073741824)"},
		{kv.Config{Participant: participant.Config{Idle: -time.Second}}, "participant config Idle -1s: negative"},
	} {
		cfg := row.cfg
		cfg.Participant.Endpoint, cfg.Participant.Store, cfg.Participant.Managers = "127.0.0.1:7", participant.NewMemStore(), participanttest.NewManager()
		db, err := kv.Open(cfg)
		if err == nil {
			db.Close()
		}
		if !errors.Is(err, djinn.ErrInvalidArgument) || err == nil || !strings.Contains(err.Error(), row.want) {
			t.Errorf("Open = %v, want InvalidArgument %q", err, row.want)
		}
	}
}
