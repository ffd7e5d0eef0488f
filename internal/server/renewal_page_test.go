package server_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/server"
	"github.com/djinn-go/djinn/internal/server/servertest"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// defaultReceive is what a gRPC client receives in one message unless it
// raised its limit.
const defaultReceive = 4 << 20

// fillRenewalSet adds n client leases to set, each naming a landlord at
// the longest host name an endpoint takes, so that few make many bytes.
//
// Its n calls are load, not one wait: they are bounded together by a
// multiple of servertest.Timeout (under -race on a busy machine, 15,000
// calls took longer than one).
func fillRenewalSet(t *testing.T, sets djinnpb.LeaseRenewalServiceClient, set []byte, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 6*servertest.Timeout)
	defer cancel()
	label := strings.Repeat("l", 63)
	landlord := &djinnpb.Ref{Endpoint: label + "." + label + "." + label + "." + label[:50] + ".example:7", ServiceId: idBytes(djinn.NewID()), ObjectId: idBytes(djinn.NewID())}
	const workers = 16
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				_, err := sets.RenewFor(ctx, &djinnpb.RenewForRequest{SetId: set,
					Lease:                &djinnpb.Lease{Landlord: landlord, Cookie: idBytes(djinn.NewID()), DurationNanos: int64(time.Hour)},
					DesiredDurationNanos: int64(djinn.Forever), RenewDurationNanos: int64(djinn.Any)})
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("renewFor: %v", err)
	}
}

// TestRenewalGetLeasesLargeSet (LR.2 getLeases): a set whose leases pass
// what a client receives by default (4 MiB) is read through a default
// client a page at a time — the client library's Leases returns them
// all, each page under the bound — and a request from before pages (a
// SetRequest, no max) is refused ResourceExhausted naming the lease count
// and to ask in pages, never answered a part. Before, the answer carried
// every lease and the client failed to receive it.
func TestRenewalGetLeasesLargeSet(t *testing.T) {
	t.Parallel()
	srv := servertest.Start(t, servertest.Config(t))
	c := servertest.Dial(t, srv.Addr())
	ctx := testContext(t)
	set, err := c.RenewalService().CreateSet(ctx, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	id := set.ID()
	const n = 15_000 // about 290 bytes each
	sets := djinnpb.NewLeaseRenewalServiceClient(c.ClientConn())
	fillRenewalSet(t, sets, id[:], n)
	ctx = testContext(t) // the reads' bound starts once the set is full

	var whole djinnpb.GetLeasesResponse
	err = c.ClientConn().Invoke(ctx, djinnpb.LeaseRenewalService_GetLeases_FullMethodName, &djinnpb.SetRequest{SetId: id[:]}, &whole)
	if djinn.KindOf(err) != djinn.ResourceExhausted || !strings.Contains(err.Error(), "holds 15000 leases") || !strings.Contains(err.Error(), "in pages") {
		t.Errorf("getLeases as before pages (a SetRequest) of %d leases: %v; want ResourceExhausted naming the count and to ask in pages", n, err)
	}
	first, err := sets.GetLeases(ctx, &djinnpb.GetLeasesRequest{SetId: id[:], Max: 100_000})
	if err != nil {
		t.Fatalf("first page of %d leases: %v", n, err)
	}
	if got := len(first.GetLeases()); got == 0 || got == n || len(first.GetNext()) == 0 || first.GetTotal() != n || proto.Size(first) > defaultReceive {
		t.Errorf("first page: %d leases, next %x, total %d, %d bytes; want some of the %d, a next, within %d bytes", got, first.GetNext(), first.GetTotal(), proto.Size(first), n, defaultReceive)
	}
	all, err := set.Leases(ctx)
	if err != nil || len(all) != n {
		t.Fatalf("Leases of a set of %d: %d, %v; want them all", n, len(all), err)
	}
	seen := map[djinn.ID]bool{}
	for _, l := range all {
		seen[l.Lease.Cookie()] = true
	}
	if len(seen) != n {
		t.Errorf("Leases returned %d distinct leases of %d", len(seen), n)
	}
	consoleListsFirstLeases(t, srv, n)
}

// consoleListsFirstLeases checks the console's renewal page of a server
// whose one set holds n leases, more than a page lists: it lists the
// first 500 and says how many there are. Before, it listed every lease.
func consoleListsFirstLeases(t *testing.T, srv *server.Server, n int) {
	t.Helper()
	code, v := consoleGet(t, srv, "/api/view/renewal")
	sets, _ := v["sets"].([]any)
	if code != http.StatusOK || len(sets) != 1 {
		t.Fatalf("renewal page: %d, %d sets; want the one", code, len(sets))
	}
	set, _ := sets[0].(map[string]any)
	leases, _ := set["leases"].([]any)
	if len(leases) != 500 || set["leasesTotal"] != float64(n) {
		t.Errorf("renewal page: %d leases of %v; want the first 500 of %d", len(leases), set["leasesTotal"], n)
	}
}
