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
