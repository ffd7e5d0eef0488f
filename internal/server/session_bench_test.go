package server_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/djinn-go/djinn/client"
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

// BenchmarkSessionLockCycle measures an uncontended lock and unlock (two
// logged calls) through the client's LockSet and session, client and
// server in this process: each goroutine has its own set and owner.
// allocs/op counts both sides of both calls, the log's appends and the
// applies.
//
//	go test -run XXX -bench SessionLockCycle -benchmem ./internal/server
func BenchmarkSessionLockCycle(b *testing.B) {
	ctx := context.Background()
	ls := benchLockService(ctx, b)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		set, err := ls.CreateSet(ctx, client.LockSetOptions{Lease: time.Hour})
		if err != nil {
			b.Error(err)
			return
		}
		o, err := ls.CreateOwner(ctx, time.Hour)
		if err != nil {
			b.Error(err)
			return
		}
		h := client.HeldByOwner(o)
		for pb.Next() && lockCycle(ctx, b, set, h) {
		}
	})
}

// BenchmarkSessionLockHandOff measures the hand-off of one lock between
// two owners, client and server in this process: each of two goroutines
// loops a blocking Lock then Unlock on the same set, so an op is one
// grant, and while one holds the other waits — ns/op is the hand-off's
// latency (the holder's unlock, its apply granting the waiter, the
// waiter's answer, the waiter's unlock).
//
//	go test -run XXX -bench SessionLockHandOff -benchmem ./internal/server
func BenchmarkSessionLockHandOff(b *testing.B) {
	ctx := context.Background()
	ls := benchLockService(ctx, b)
	set, err := ls.CreateSet(ctx, client.LockSetOptions{Lease: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	var owners [2]client.LockHolder
	for i := range owners {
		o, err := ls.CreateOwner(ctx, time.Hour)
		if err != nil {
			b.Fatal(err)
		}
		owners[i] = client.HeldByOwner(o)
	}
	var next atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	var wg sync.WaitGroup
	for _, h := range owners {
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) && lockCycle(ctx, b, set, h) {
			}
		})
	}
	wg.Wait()
}

// benchLockService starts a server in this process and returns its lock
// service through a client of its own.
func benchLockService(ctx context.Context, b *testing.B) *client.LockService {
	b.Helper()
	srv := servertest.Start(b, servertest.Config(b))
	ls, err := servertest.Dial(b, srv.Addr()).LockService(ctx)
	if err != nil {
		b.Fatal(err)
	}
	return ls
}

// lockCycle locks and unlocks set's write lock for h; false (the error
// reported) when either call failed.
func lockCycle(ctx context.Context, b *testing.B, set *client.LockSet, h client.LockHolder) bool {
	if _, err := set.Lock(ctx, h, client.LockW); err != nil {
		b.Error(err)
		return false
	}
	if err := set.Unlock(ctx, h, client.LockW); err != nil {
		b.Error(err)
		return false
	}
	return true
}
