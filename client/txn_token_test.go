package client

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc/metadata"

	"github.com/djinn-go/djinn"
)

func TestTransactionToken(t *testing.T) {
	m := NewTransactionManager(nil, testManagerRef())
	secret := djinn.NewID()
	tx := m.TransactionOf(42, secret)
	if tok := tx.Token(); tok != "42."+secret.String() {
		t.Fatalf("token %q", tok)
	}
	id, got, err := ParseTransactionToken(tx.Token())
	if err != nil || id != 42 || got != secret {
		t.Fatalf("parse %q: %d %s %v", tx.Token(), id, got, err)
	}
	if tok := m.Transaction(7).Token(); tok != "7" {
		t.Fatalf("a transaction named by id: token %q", tok)
	}
	if id, got, err := ParseTransactionToken("7"); err != nil || id != 7 || !got.IsZero() {
		t.Fatalf("parse an id alone: %d %s %v", id, got, err)
	}
	for _, bad := range []string{"", "0", "x", "7.", "7.abc", "7." + strings.Repeat("g", 32), "7." + strings.Repeat("0", 32), "-1.a"} {
		if _, _, err := ParseTransactionToken(bad); err == nil {
			t.Errorf("ParseTransactionToken(%q) accepted", bad)
		}
	}
	if _, _, err := ParseTransactionToken("7." + strings.Repeat("g", 32)); err == nil || strings.Contains(err.Error(), strings.Repeat("g", 32)) {
		t.Errorf("a bad secret is named in the error: %v", err)
	}
}

// TestWithTransactionCarriesTheSecret: the current transaction travels in
// a call's metadata with its secret, so the server that works under it
// (a participant, the lock service) can.
func TestWithTransactionCarriesTheSecret(t *testing.T) {
	m := NewTransactionManager(nil, testManagerRef())
	secret := djinn.NewID()
	ctx := WithTransaction(context.Background(), m.TransactionOf(9, secret))
	md, _ := metadata.FromOutgoingContext(ctx)
	in := metadata.NewIncomingContext(context.Background(), md)
	got, err := TransactionFromIncoming(in, nil)
	if err != nil || got.ID() != 9 || got.Secret() != secret {
		t.Fatalf("from the metadata: %v (secret %s), %v", got, got.Secret(), err)
	}
	md, _ = metadata.FromOutgoingContext(WithTransaction(ctx, m.Transaction(3)))
	if v := md.Get(TxnSecretMetadataKey); len(v) != 0 {
		t.Fatalf("a transaction named by id replaced one with a secret, which stayed: %v", v)
	}
	md.Set(TxnSecretMetadataKey, "not hex")
	if _, err := TransactionFromIncoming(metadata.NewIncomingContext(context.Background(), md), nil); err == nil {
		t.Fatal("a malformed secret accepted")
	}
}

// FuzzParseTransactionToken: what a token parses to prints as the token.
func FuzzParseTransactionToken(f *testing.F) {
	f.Add("42." + djinn.NewID().String())
	f.Add("7")
	f.Add("7.")
	f.Fuzz(func(t *testing.T, s string) {
		id, secret, err := ParseTransactionToken(s)
		if err != nil {
			return
		}
		tok := NewTransactionManager(nil, testManagerRef()).TransactionOf(id, secret).Token()
		if id2, secret2, err := ParseTransactionToken(tok); err != nil || id2 != id || secret2 != secret {
			t.Fatalf("%q parsed to %d %s, which prints as %q, which parses to %d %s %v", s, id, secret, tok, id2, secret2, err)
		}
	})
}
