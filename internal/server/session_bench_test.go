package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/djinn-go/djinn/internal/server/servertest"
)

// BenchmarkSessionRegister measures a logged lease grant (a mailbox
// registration) made through the client's session, client and server in
// this process: allocs/op counts both sides of the call, the log's append
// and its apply.
//
//	go test -run XXX -bench SessionRegister -benchmem ./internal/server
func BenchmarkSessionRegister(b *testing.B) {
	srv := servertest.Start(b, servertest.Config(b))
	c := servertest.Dial(b, srv.Addr())
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := c.Mailbox().Register(ctx, time.Minute); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkSessionRead measures a read through the client's session (a
// registration looked up by id: authorized, answered from the leader's
// state, no log write), client and server in this process: what a
// session call costs apart from the log.
//
//	go test -run XXX -bench SessionRead -benchmem ./internal/server
func BenchmarkSessionRead(b *testing.B) {
	srv := servertest.Start(b, servertest.Config(b))
	c := servertest.Dial(b, srv.Addr())
	ctx := context.Background()
	reg, err := c.Mailbox().Register(ctx, time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := c.Mailbox().Registration(ctx, reg.ID); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
