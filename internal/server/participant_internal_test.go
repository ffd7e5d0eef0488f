package server

import (
	"bytes"
	"context"
	"log/slog"
	"runtime"
	"testing"
	"time"

	"github.com/djinn-go/djinn/internal/txn"
	"github.com/djinn-go/djinn/kv"
	"github.com/djinn-go/djinn/participant"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// goroutine returns the id of the goroutine that calls it.
func goroutine() string {
	b := make([]byte, 64)
	b = b[:runtime.Stack(b, false)]
	id, _, _ := bytes.Cut(bytes.TrimPrefix(b, []byte("goroutine ")), []byte(" "))
	return string(id)
}

// TestOwnParticipantCalledInPlace: the manager's call to the key/value
// participant of its own server is a function call — made, and answered,
// on the goroutine that asks (one of the manager's workers), before Call
// returns: no gRPC, no message, no goroutine of its own. A participant of
// another server goes through the Calls stream instead.
func TestOwnParticipantCalledInPlace(t *testing.T) {
	cfg := Default()
	cfg.DataDir, cfg.Listen, cfg.Admin, cfg.Raft, cfg.Lookup.Discovery = t.TempDir(), "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	cfg.Raftcfg.HeartbeatTimeout, cfg.Raftcfg.ElectionTimeout = Duration(100*time.Millisecond), Duration(100*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := Open(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	c, err := s.txn.Create(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	mgr := s.ref(TxnID)()
	if err := s.kv.Put(ctx, &participant.Tx{Manager: mgr, ID: c.ID, Secret: c.Secret}, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	own := refProto(s.kv.Participant().Ref())
	p := participants{s: s}
	for _, op := range []txn.Op{txn.OpPrepare, txn.OpCommit} {
		caller, answered := goroutine(), ""
		var got djinnpb.TransactionState
		var gotErr error
		p.Call(ctx, time.Minute, op, own, mgr, c.ID, c.Secret, func(v djinnpb.TransactionState, err error) {
			answered, got, gotErr = goroutine(), v, err
		})
		if answered != caller {
			t.Fatalf("%v to the server's own participant: answered on goroutine %q, asked on %q; want in place, before Call returned", op, answered, caller)
		}
		if gotErr != nil || (op == txn.OpPrepare && got != txn.Prepared) {
			t.Fatalf("%v: %v %v", op, got, gotErr)
		}
	}
	if v, ok, err := s.kv.Get(ctx, nil, "k"); err != nil || !ok || string(v) != "v" {
		t.Fatalf("the committed write: %q %v %v", v, ok, err)
	}
	// The participant as it joined before this node came back at another
	// address: its ids name it, not the endpoint; still in place.
	moved := refProto(s.kv.Participant().Ref())
	moved.Endpoint = "127.0.0.1:1"
	mctx, mcancel := context.WithCancel(ctx)
	answered := make(chan string, 1)
	p.Call(mctx, time.Minute, txn.OpAbort, moved, mgr, c.ID+1000, c.Secret, func(djinnpb.TransactionState, error) { answered <- goroutine() })
	select {
	case g := <-answered:
		if g != goroutine() {
			t.Fatalf("abort to the server's own participant joined at another endpoint: answered on goroutine %q; want in place", g)
		}
	default:
		t.Fatalf("abort to the server's own participant joined at another endpoint: not answered before Call returned; want in place")
	}
	mcancel()
	// Another server's participant: the call goes out, and is answered
	// later, elsewhere.
	other := &djinnpb.Ref{Endpoint: "127.0.0.1:1", ServiceId: make([]byte, 16), ObjectId: make([]byte, 16)}
	cctx, ccancel := context.WithCancel(ctx)
	done := make(chan string, 1)
	p.Call(cctx, time.Minute, txn.OpAbort, other, mgr, c.ID, c.Secret, func(djinnpb.TransactionState, error) { done <- goroutine() })
	ccancel()
	if g := <-done; g == goroutine() {
		t.Fatalf("a call to another server's participant was answered in place")
	}
}

// TestKVPerPrincipalBound: under mutual TLS each principal may hold a
// sixteenth of [kv] max-bytes unless configured — DESIGN.md 7: one
// principal's load never starves another's; without it the one anonymous
// principal is bounded by max-bytes alone, unless configured.
func TestKVPerPrincipalBound(t *testing.T) {
	rows := []struct {
		name     string
		max, per int64
		mutual   bool
		want     int64
	}{
		{name: "DESIGN 7 the default under mutual TLS: a sixteenth of the default max-bytes", mutual: true, want: kv.DefaultMaxBytes / 16},
		{name: "DESIGN 7 a sixteenth of a configured max-bytes", max: 1600, mutual: true, want: 100},
		{name: "DESIGN 7 configured", max: 1600, per: 500, mutual: true, want: 500},
		{name: "DESIGN 7 without mutual TLS: none of its own", max: 1600, want: 0},
		{name: "DESIGN 7 without mutual TLS, configured", per: 7, want: 7},
	}
	for _, r := range rows {
		c := KVConfig{MaxBytes: r.max, MaxBytesPerPrincipal: r.per}
		if got := c.perPrincipal(r.mutual); got != r.want {
			t.Errorf("%s: %d, want %d", r.name, got, r.want)
		}
	}
}
