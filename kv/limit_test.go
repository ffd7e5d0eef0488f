package kv_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/kv"
	"github.com/djinn-go/djinn/participant"
	"github.com/djinn-go/djinn/participant/participanttest"
)

// limited opens a DB on st that holds at most 100 bytes of keys and values.
func limited(t *testing.T, st participant.Store, mgr *participanttest.Manager) *fixture {
	t.Helper()
	db, err := kv.Open(kv.Config{Participant: participant.Config{Endpoint: "127.0.0.1:7", Store: st, Managers: mgr}, MaxBytes: 100})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return &fixture{t: t, db: db, mgr: mgr, st: st}
}

// wantFull checks that err refuses key as the store's limit does.
func wantFull(t *testing.T, err error, key string) {
	t.Helper()
	if !errors.Is(err, djinn.ErrResourceExhausted) || !strings.Contains(err.Error(), `key "`+key+`"`) || !strings.Contains(err.Error(), "[kv] max-bytes") {
		t.Fatalf("error %v: want ResourceExhausted naming key %q and [kv] max-bytes", err, key)
	}
}

// TestMaxBytes: the store holds a bounded number of bytes of keys and
// values, committed or written under transactions not yet decided —
// DESIGN.md 7: everything that holds memory is bounded, and excess gets
// RESOURCE_EXHAUSTED naming the limit, so that one caller cannot fill the
// server's memory and disk. (Before, any caller could put 1 MiB values
// without end.) Each key here is one byte: a value of n bytes holds n+1.
func TestMaxBytes(t *testing.T) {
	v := func(n int) string { return strings.Repeat("v", n) }
	rows := []struct {
		name string
		run  func(t *testing.T, f *fixture)
	}{
		{"a put past the limit is refused, naming its key and the limit", func(t *testing.T, f *fixture) {
			f.put(nil, "k", v(89))
			wantFull(t, f.db.Put(bg, nil, "j", []byte(v(11))), "j")
			if got := f.get(nil, "j"); got != "-" {
				t.Fatalf("refused put left j = %q", got)
			}
			f.put(nil, "j", v(9)) // exactly at the limit
		}},
		{"a value replaced no longer counts", func(t *testing.T, f *fixture) {
			f.put(nil, "k", v(89))
			f.put(nil, "k", v(99))
		}},
		{"a delete makes room, and goes through at the limit", func(t *testing.T, f *fixture) {
			f.put(nil, "k", v(99))
			if _, err := f.db.Delete(bg, nil, "k"); err != nil {
				t.Fatal(err)
			}
			f.put(nil, "j", v(99))
		}},
		{"a transaction's writes count until it aborts", func(t *testing.T, f *fixture) {
			tx := f.tx()
			f.put(tx, "k", v(89))
			wantFull(t, f.db.Put(bg, nil, "j", []byte(v(20))), "j")
			f.put(tx, "k", v(99)) // its own write replaced
			f.abort(tx)
			f.put(nil, "j", v(99))
		}},
		{"a transaction's writes count once it commits, once", func(t *testing.T, f *fixture) {
			tx := f.tx()
			f.put(tx, "k", v(89))
			f.commit(tx)
			wantFull(t, f.db.Put(bg, nil, "j", []byte(v(20))), "j")
			f.put(nil, "k", v(99))
		}},
		{"a transaction's write past the limit is refused, the transaction going on", func(t *testing.T, f *fixture) {
			f.put(nil, "k", v(89))
			tx := f.tx()
			wantFull(t, f.db.Put(bg, tx, "j", []byte(v(20))), "j")
			f.put(tx, "j", v(9))
			f.commit(tx)
			if got := f.get(nil, "j"); got != v(9) {
				t.Fatalf("j = %q after commit", got)
			}
		}},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			r.run(t, limited(t, participant.NewMemStore(), participanttest.NewManager()))
		})
	}
}

// TestMaxBytesAcrossRestart: after a restart the committed data and the
// prepared transactions' writes count against the limit again.
func TestMaxBytesAcrossRestart(t *testing.T) {
	r := newRestartable(t)
	f := limited(t, r.st, r.mgr)
	f.put(nil, "k", strings.Repeat("v", 49))
	tx := f.tx()
	f.put(tx, "p", strings.Repeat("v", 39))
	if vote, err := f.db.Participant().Prepare(bg, *tx); err != nil || vote != participant.Prepared {
		t.Fatalf("prepare: %v %v", vote, err)
	}
	r.restart(f.db)
	f = limited(t, r.st, r.mgr)
	wantFull(t, f.db.Put(bg, nil, "j", []byte(strings.Repeat("v", 11))), "j") // 50 + 40 + 12
	f.put(nil, "j", strings.Repeat("v", 9))
}
