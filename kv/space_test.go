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

// spaced opens a DB on st holding at most 1000 bytes, 100 per namespace.
func spaced(t *testing.T, st participant.Store, mgr *participanttest.Manager) *fixture {
	t.Helper()
	db, err := kv.Open(kv.Config{Participant: participant.Config{Endpoint: "127.0.0.1:7", Store: st, Managers: mgr}, MaxBytes: 1000, MaxBytesPerNamespace: 100})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return &fixture{t: t, db: db, mgr: mgr, st: st}
}

func sput(t *testing.T, s *kv.Space, tx *participant.Tx, k, v string) {
	t.Helper()
	if err := s.Put(bg, tx, k, []byte(v)); err != nil {
		t.Fatalf("%q: put %s: %v", s.Namespace(), k, err)
	}
}

// sget returns k's value in s as tx sees it, "-" when absent.
func sget(t *testing.T, s *kv.Space, tx *participant.Tx, k string) string {
	t.Helper()
	v, ok, err := s.Get(bg, tx, k)
	if err != nil {
		t.Fatalf("%q: get %s: %v", s.Namespace(), k, err)
	}
	if !ok {
		return "-"
	}
	return string(v)
}

func slist(t *testing.T, s *kv.Space, tx *participant.Tx, prefix string) string {
	t.Helper()
	es, err := s.List(bg, tx, prefix)
	if err != nil {
		t.Fatalf("%q: list %s: %v", s.Namespace(), prefix, err)
	}
	var parts []string
	for _, e := range es {
		parts = append(parts, e.Key+"="+string(e.Value))
	}
	return strings.Join(parts, " ")
}

// wantOwnFull checks that err refuses key as a namespace's limit does,
// naming the key, the bytes the namespace would hold and the limit.
func wantOwnFull(t *testing.T, err error, key, bytes string) {
	t.Helper()
	for _, want := range []string{`key "` + key + `"`, "would take " + bytes + " bytes", "limit of 100", "[kv] max-bytes-per-principal"} {
		if !errors.Is(err, djinn.ErrResourceExhausted) || !strings.Contains(err.Error(), want) {
			t.Fatalf("error %v: want ResourceExhausted with %q", err, want)
		}
	}
}

// TestNamespaces has one row per rule of namespaces — DESIGN.md 7: each
// resource belongs to a principal and others get "not found"; one
// principal's load never starves another's. "cn:a" and "cn:b" stand for
// two principals, as a server names them.
func TestNamespaces(t *testing.T) {
	v := func(n int) string { return strings.Repeat("v", n) }
	rows := []struct {
		name string
		run  func(t *testing.T, f *fixture, a, b *kv.Space)
	}{
		{"DESIGN 7 another namespace's key is not found, as a key never written", func(t *testing.T, f *fixture, a, b *kv.Space) {
			sput(t, a, nil, "k", "a's")
			if got := sget(t, b, nil, "k"); got != "-" {
				t.Fatalf("b reads a's key: %q", got)
			}
			if found, err := b.Delete(bg, nil, "k"); err != nil || found {
				t.Fatalf("b deletes a's key: found %v, %v", found, err)
			}
			if got := sget(t, a, nil, "k"); got != "a's" {
				t.Fatalf("a's key after b's delete: %q", got)
			}
			if got := f.get(nil, "k"); got != "-" {
				t.Fatalf("the default namespace reads a's key: %q", got)
			}
		}},
		{"DESIGN 7 a listing shows only the caller's keys, as it named them", func(t *testing.T, f *fixture, a, b *kv.Space) {
			sput(t, a, nil, "k1", "a")
			sput(t, b, nil, "k2", "b")
			f.put(nil, "k3", "default")
			if got := slist(t, a, nil, ""); got != "k1=a" {
				t.Fatalf("a lists %q", got)
			}
			if got := slist(t, b, nil, "k"); got != "k2=b" {
				t.Fatalf("b lists %q", got)
			}
			if got := f.list(nil, ""); got != "k3=default" {
				t.Fatalf("the default namespace lists %q", got)
			}
		}},
		{"DESIGN 7 the same key name in two namespaces is two keys: no overwrite", func(t *testing.T, f *fixture, a, b *kv.Space) {
			sput(t, a, nil, "k", "a's")
			sput(t, b, nil, "k", "b's")
			if ga, gb := sget(t, a, nil, "k"), sget(t, b, nil, "k"); ga != "a's" || gb != "b's" {
				t.Fatalf("a reads %q, b reads %q", ga, gb)
			}
		}},
		{"DESIGN 7 TX.3 the same key name under two transactions of two namespaces does not conflict; commit and abort", func(t *testing.T, f *fixture, a, b *kv.Space) {
			ta, tb := f.tx(), f.tx()
			sput(t, a, ta, "k", "a's")
			sput(t, b, tb, "k", "b's")
			if got := slist(t, b, tb, ""); got != "k=b's" {
				t.Fatalf("b lists under its transaction %q", got)
			}
			f.commit(ta)
			f.abort(tb)
			if ga, gb := sget(t, a, nil, "k"), sget(t, b, nil, "k"); ga != "a's" || gb != "-" {
				t.Fatalf("after a's commit and b's abort: a reads %q, b reads %q", ga, gb)
			}
			tb = f.tx()
			sput(t, b, tb, "k", "b's")
			f.commit(tb)
			if ga, gb := sget(t, a, nil, "k"), sget(t, b, nil, "k"); ga != "a's" || gb != "b's" {
				t.Fatalf("after b's commit: a reads %q, b reads %q", ga, gb)
			}
		}},
		{"TX.3 a conflict within a namespace names the key as given, not the namespace", func(t *testing.T, f *fixture, a, b *kv.Space) {
			sput(t, a, f.tx(), "k", "1")
			err := a.Put(bg, f.tx(), "k", []byte("2"))
			wantLocked(t, err, "k")
			if strings.Contains(err.Error(), "cn:a") {
				t.Fatalf("error %v shows the namespace", err)
			}
		}},
		{"DESIGN 7 a namespace past its limit is refused while another's puts succeed", func(t *testing.T, f *fixture, a, b *kv.Space) {
			sput(t, b, nil, "k", v(89))
			wantOwnFull(t, b.Put(bg, nil, "j", []byte(v(11))), "j", "102")
			if got := sget(t, b, nil, "j"); got != "-" {
				t.Fatalf("refused put left j = %q", got)
			}
			sput(t, a, nil, "j", v(99))
			sput(t, b, nil, "j", v(9)) // exactly at b's limit
		}},
		{"DESIGN 7 a namespace's writes under a transaction count against its limit", func(t *testing.T, f *fixture, a, b *kv.Space) {
			tx := f.tx()
			sput(t, b, tx, "k", v(89))
			wantOwnFull(t, b.Put(bg, nil, "j", []byte(v(11))), "j", "102")
			sput(t, a, tx, "j", v(99))
			f.abort(tx)
			sput(t, b, nil, "j", v(99))
		}},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			f := spaced(t, participant.NewMemStore(), participanttest.NewManager())
			r.run(t, f, f.db.Space("cn:a"), f.db.Space("cn:b"))
		})
	}
}

// TestNamespacesAcrossRestart: after a restart each namespace's keys are
// its own again, and its committed data and prepared writes count against
// its limit again.
func TestNamespacesAcrossRestart(t *testing.T) {
	r := newRestartable(t)
	f := spaced(t, r.st, r.mgr)
	a, b := f.db.Space("cn:a"), f.db.Space("cn:b")
	sput(t, a, nil, "k", "a's")
	f.put(nil, "k", "default")
	sput(t, b, nil, "k", strings.Repeat("v", 49))
	tx := f.tx()
	sput(t, b, tx, "p", strings.Repeat("v", 39))
	if vote, err := f.db.Participant().Prepare(bg, *tx); err != nil || vote != participant.Prepared {
		t.Fatalf("prepare: %v %v", vote, err)
	}
	r.restart(f.db)
	f = spaced(t, r.st, r.mgr)
	a, b = f.db.Space("cn:a"), f.db.Space("cn:b")
	if ga, gd, gc := sget(t, a, nil, "k"), f.get(nil, "k"), sget(t, f.db.Space("cn:c"), nil, "k"); ga != "a's" || gd != "default" || gc != "-" {
		t.Fatalf("after restart a reads %q, the default namespace %q, c %q", ga, gd, gc)
	}
	wantOwnFull(t, b.Put(bg, nil, "j", []byte(strings.Repeat("v", 11))), "j", "102") // 50 + 40 + 12
	wantLocked(t, b.Put(bg, nil, "p", []byte("x")), "p")                             // the prepared write holds its lock again
	sput(t, a, nil, "j", strings.Repeat("v", 90))
	sput(t, b, nil, "j", strings.Repeat("v", 9))
}
