package kv_test

import (
	"context"
	"fmt"
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/djinn-go/djinn/kv"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// TestListReachesADefaultClient: over gRPC, a client that did not raise its
// receive limit (4 MiB) gets a listing of 6 MiB whole from Client.List,
// which pages; a request that does not page is refused, saying to page.
// Before, both failed with "received message larger than max".
func TestListReachesADefaultClient(t *testing.T) {
	f := start(t)
	f.putLarge("k", 6)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	kv.NewServer(f.db).Register(g)
	served := make(chan error, 1)
	go func() { served <- g.Serve(ln) }()
	t.Cleanup(func() { g.Stop(); <-served })
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ctx := context.Background()
	es, err := kv.NewClient(conn).List(ctx, nil, "k")
	if err != nil || len(es) != 6 {
		t.Fatalf("Client.List of 6 MiB: %d entries, %v; want 6", len(es), err)
	}
	for i, e := range es {
		if e.Key != fmt.Sprint("k", i) || string(e.Value) != mib {
			t.Fatalf("entry %d: key %q, %d bytes; want k%d of 1 MiB", i, e.Key, len(e.Value), i)
		}
	}
	_, err = djinnpb.NewKeyValueClient(conn).List(ctx, &djinnpb.KVListRequest{Prefix: "k"})
	wantRefused(t, "a request that does not page", err, codes.ResourceExhausted, "6 entries", "max and after")
}
