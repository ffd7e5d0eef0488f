package server_test

import (
	"strings"
	"testing"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/internal/server"
	"github.com/djinn-go/djinn/internal/server/servertest"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// kvPrincipals is a server under mutual TLS whose key/value store holds at
// most 100 bytes per principal, and alice's and bob's clients of it.
type kvPrincipals struct {
	t          *testing.T
	pki        *servertest.PKI
	cfg        server.Config
	srv        *server.Server
	alice, bob djinnpb.KeyValueClient
	aliceTM    djinnpb.TransactionManagerClient
	bobTM      djinnpb.TransactionManagerClient
}

func newKVPrincipals(t *testing.T) *kvPrincipals {
	t.Helper()
	p := &kvPrincipals{t: t, pki: servertest.NewPKI(t), cfg: servertest.Config(t)}
	p.cfg.TLS = server.TLSConfig{Cert: p.pki.ServerCert, Key: p.pki.ServerKey, CA: p.pki.CA, ClientAuth: true}
	p.cfg.KV.MaxBytesPerPrincipal = 100
	p.start()
	return p
}

// start starts the server (again) and connects alice and bob.
func (p *kvPrincipals) start() {
	p.t.Helper()
	p.srv = servertest.Start(p.t, p.cfg)
	for _, as := range []struct {
		cn string
		kv *djinnpb.KeyValueClient
		tm *djinnpb.TransactionManagerClient
	}{{"alice", &p.alice, &p.aliceTM}, {"bob", &p.bob, &p.bobTM}} {
		c := servertest.Dial(p.t, p.srv.Addr(), client.WithTLS(p.pki.TLSFor(p.pki.NewClient(p.t, as.cn)))).ClientConn()
		*as.kv, *as.tm = djinnpb.NewKeyValueClient(c), djinnpb.NewTransactionManagerClient(c)
	}
}

func (p *kvPrincipals) put(kv djinnpb.KeyValueClient, txn *djinnpb.KVTransaction, key, value string) {
	p.t.Helper()
	if _, err := kv.Put(testContext(p.t), &djinnpb.KVPutRequest{Key: key, Value: []byte(value), Txn: txn}); err != nil {
		p.t.Fatalf("put %s: %v", key, err)
	}
}

// get returns key's value, "-" when not found.
func (p *kvPrincipals) get(kv djinnpb.KeyValueClient, key string) string {
	p.t.Helper()
	r, err := kv.Get(testContext(p.t), &djinnpb.KVGetRequest{Key: key})
	if err != nil {
		p.t.Fatalf("get %s: %v", key, err)
	}
	if !r.GetFound() {
		return "-"
	}
	return string(r.GetValue())
}

func (p *kvPrincipals) list(kv djinnpb.KeyValueClient) string {
	p.t.Helper()
	r, err := kv.List(testContext(p.t), &djinnpb.KVListRequest{})
	if err != nil {
		p.t.Fatalf("list: %v", err)
	}
	var parts []string
	for _, e := range r.GetEntries() {
		parts = append(parts, e.GetKey()+"="+string(e.GetValue()))
	}
	return strings.Join(parts, " ")
}

// txn creates a transaction with tm, as its principal.
func (p *kvPrincipals) txn(tm djinnpb.TransactionManagerClient) (uint64, *djinnpb.KVTransaction) {
	p.t.Helper()
	c, err := tm.Create(testContext(p.t), &djinnpb.CreateTransactionRequest{LeaseDurationNanos: int64(time.Hour)})
	if err != nil {
		p.t.Fatal(err)
	}
	return c.GetId(), &djinnpb.KVTransaction{Manager: c.GetManager(), Id: c.GetId(), Secret: c.GetSecret()}
}

// complete commits or aborts a transaction, waiting until the participant
// knows.
func (p *kvPrincipals) complete(tm djinnpb.TransactionManagerClient, id uint64, commit bool) {
	p.t.Helper()
	wait := int64(time.Minute)
	do := tm.Abort
	if commit {
		do = tm.Commit
	}
	if _, err := do(testContext(p.t), &djinnpb.CompleteTransactionRequest{Id: id, WaitForNanos: &wait}); err != nil {
		p.t.Fatalf("complete transaction %d (commit %v): %v", id, commit, err)
	}
}

// TestKVKeysBelongToPrincipals has one row per rule of the key/value
// store's keys under mutual TLS — DESIGN.md 7: every resource belongs to a
// principal and others get "not found"; one principal's load never
// starves another's.
func TestKVKeysBelongToPrincipals(t *testing.T) {
	t.Parallel()
	rows := []struct {
		name string
		run  func(t *testing.T, p *kvPrincipals)
	}{
		{"DESIGN 7 bob cannot get or delete alice's key: not found, as a key never written", func(t *testing.T, p *kvPrincipals) {
			p.put(p.alice, nil, "k", "alice's")
			if got := p.get(p.bob, "k"); got != "-" {
				t.Fatalf("bob reads alice's key: %q", got)
			}
			r, err := p.bob.Delete(testContext(t), &djinnpb.KVDeleteRequest{Key: "k"})
			never, err2 := p.bob.Delete(testContext(t), &djinnpb.KVDeleteRequest{Key: "never-written"})
			if err != nil || err2 != nil || r.GetFound() || never.GetFound() {
				t.Fatalf("bob deletes alice's key: %v %v; a key never written: %v %v", r, err, never, err2)
			}
			if got := p.get(p.alice, "k"); got != "alice's" {
				t.Fatalf("alice's key after bob's delete: %q", got)
			}
		}},
		{"DESIGN 7 bob's listing shows only his keys, as he named them", func(t *testing.T, p *kvPrincipals) {
			p.put(p.alice, nil, "a", "1")
			p.put(p.bob, nil, "b", "2")
			if ga, gb := p.list(p.alice), p.list(p.bob); ga != "a=1" || gb != "b=2" {
				t.Fatalf("alice lists %q, bob %q", ga, gb)
			}
		}},
		{"DESIGN 7 bob's put of alice's key name is his own key: hers stays", func(t *testing.T, p *kvPrincipals) {
			p.put(p.alice, nil, "k", "alice's")
			p.put(p.bob, nil, "k", "bob's")
			if ga, gb := p.get(p.alice, "k"), p.get(p.bob, "k"); ga != "alice's" || gb != "bob's" {
				t.Fatalf("alice reads %q, bob %q", ga, gb)
			}
		}},
		{"DESIGN 7 TX.3 the same key name under both principals' transactions: no conflict, the manager commits and aborts each", func(t *testing.T, p *kvPrincipals) {
			ia, ta := p.txn(p.aliceTM)
			ib, tb := p.txn(p.bobTM)
			p.put(p.alice, ta, "k", "alice's")
			p.put(p.bob, tb, "k", "bob's")
			p.complete(p.aliceTM, ia, true)
			p.complete(p.bobTM, ib, false)
			if ga, gb := p.get(p.alice, "k"), p.get(p.bob, "k"); ga != "alice's" || gb != "-" {
				t.Fatalf("after alice's commit and bob's abort: alice reads %q, bob %q", ga, gb)
			}
			ib, tb = p.txn(p.bobTM)
			p.put(p.bob, tb, "k", "bob's")
			p.complete(p.bobTM, ib, true)
			if ga, gb := p.get(p.alice, "k"), p.get(p.bob, "k"); ga != "alice's" || gb != "bob's" {
				t.Fatalf("after bob's commit: alice reads %q, bob %q", ga, gb)
			}
		}},
		{"DESIGN 7 bob's put past his bound is refused, naming the key, his bytes and the limit; alice's succeeds; across a restart", func(t *testing.T, p *kvPrincipals) {
			p.put(p.bob, nil, "k", strings.Repeat("v", 89))
			_, err := p.bob.Put(testContext(t), &djinnpb.KVPutRequest{Key: "j", Value: []byte(strings.Repeat("v", 11))})
			wantErr(t, "bob's put past his bound", err, djinn.ErrResourceExhausted, `key "j" with a value of 11 bytes: your keys and values would take 102 bytes of the key/value store, over each caller's limit of 100`)
			p.put(p.alice, nil, "j", strings.Repeat("v", 99))
			p.srv.Close()
			p.start()
			_, err = p.bob.Put(testContext(t), &djinnpb.KVPutRequest{Key: "j", Value: []byte(strings.Repeat("v", 11))})
			wantErr(t, "after a restart, bob's put past his bound", err, djinn.ErrResourceExhausted, "would take 102 bytes")
			if ga, gb := p.get(p.alice, "j"), p.get(p.bob, "j"); ga != strings.Repeat("v", 99) || gb != "-" {
				t.Fatalf("after a restart alice reads %q, bob %q", ga, gb)
			}
			p.put(p.bob, nil, "j", strings.Repeat("v", 9))
		}},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			t.Parallel()
			r.run(t, newKVPrincipals(t))
		})
	}
}
