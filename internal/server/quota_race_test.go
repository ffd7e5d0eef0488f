package server_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/internal/server"
	"github.com/djinn-go/djinn/internal/server/servertest"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// TestQuotaHoldsUnderConcurrentCreators (issue 17, finding 6): a
// principal's quota is checked where commands apply, so the principal's
// own creators racing for its last places never pass it: exactly its
// quota is created, the rest refused, and another principal goes on.
func TestQuotaHoldsUnderConcurrentCreators(t *testing.T) {
	t.Parallel()
	const creators, each = 8, 4
	_, as := quotaServer(t, servertest.NewPKI(t), "")
	alice := djinnpb.NewLockServiceClient(as("alice"))
	var (
		wg               sync.WaitGroup
		mu               sync.Mutex
		created, refused int
	)
	for range creators {
		wg.Go(func() {
			for range each {
				_, err := alice.CreateOwner(testContext(t), &djinnpb.CreateLockOwnerRequest{LeaseDurationNanos: int64(time.Hour)})
				mu.Lock()
				switch {
				case err == nil:
					created++
				case errors.Is(err, djinn.ErrResourceExhausted):
					refused++
				default:
					t.Errorf("alice creates a lock owner: %v", err)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if created != perPrincipal || refused != creators*each-perPrincipal {
		t.Fatalf("alice's %d concurrent creations: %d created, %d refused; want exactly her quota of %d created", creators*each, created, refused, perPrincipal)
	}
	bob := djinnpb.NewLockServiceClient(as("bob"))
	if _, err := bob.CreateOwner(testContext(t), &djinnpb.CreateLockOwnerRequest{LeaseDurationNanos: int64(time.Hour)}); err != nil {
		t.Fatalf("bob's lock owner beside alice's full quota: %v", err)
	}
}

// TestLeaseQuota (issue 17, finding 6): the leases quota bounds what a
// principal holds under leases of every kind together, whatever each
// kind's own quota leaves; another principal goes on.
func TestLeaseQuota(t *testing.T) {
	t.Parallel()
	pki := servertest.NewPKI(t)
	cfg := servertest.Config(t)
	cfg.TLS = server.TLSConfig{Cert: pki.ServerCert, Key: pki.ServerKey, CA: pki.CA, ClientAuth: true}
	cfg.Quota.Leases = 3
	srv := servertest.Start(t, cfg)
	as := func(cn string) *client.Client {
		return servertest.Dial(t, srv.Addr(), client.WithTLS(pki.TLSFor(pki.NewClient(t, cn))))
	}
	dave := as("dave")
	if _, err := dave.Mailbox().Register(testContext(t), time.Hour); err != nil {
		t.Fatalf("dave's mailbox registration: %v", err)
	}
	ls := djinnpb.NewLockServiceClient(dave.ClientConn())
	for i := range 2 {
		if _, err := ls.CreateOwner(testContext(t), &djinnpb.CreateLockOwnerRequest{LeaseDurationNanos: int64(time.Hour)}); err != nil {
			t.Fatalf("dave's lock owner %d: %v", i+1, err)
		}
	}
	_, err := ls.CreateSet(testContext(t), &djinnpb.CreateLockSetRequest{LeaseDurationNanos: int64(time.Hour)})
	wantErr(t, "dave's fourth lease, a lock set", err, djinn.ErrResourceExhausted, "quota leases")
	if _, err := as("erin").Mailbox().Register(testContext(t), time.Hour); err != nil {
		t.Fatalf("erin's registration beside dave's full lease quota: %v", err)
	}
}
