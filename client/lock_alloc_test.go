package client

import (
	"context"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/djinn-go/djinn"
)

// oneConn is a Connector with one connection for every endpoint.
type oneConn struct{ cc *grpc.ClientConn }

func (c oneConn) Conn(string) (*grpc.ClientConn, error) { return c.cc, nil }

// A lock call's owner is sent in one allocation, and a set's calls on one
// connection share its generated client: Lock and Unlock allocate no
// holder bytes or client of their own.
func TestLockCallAllocations(t *testing.T) {
	cc, err := grpc.NewClient("127.0.0.1:1", grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	h := HeldByOwnerCookie(djinn.ID{1, 2, 3})
	ctx := context.Background()
	if n := testing.AllocsPerRun(200, func() {
		if pb, err := h.proto(ctx); err != nil || len(pb.GetOwner()) != 16 {
			t.Fatalf("owner holder: %v %v", pb, err)
		}
	}); n != 1 {
		t.Errorf("an owner holder as sent: %v allocations, want 1", n)
	}
	set := NewLockService(oneConn{cc}, testLockRef()).Set(djinn.ID{9})
	if n := testing.AllocsPerRun(200, func() {
		if _, err := set.client(); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("a set's client on the same connection: %v allocations, want 0", n)
	}
}
