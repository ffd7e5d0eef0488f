package server_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/internal/server"
	"github.com/djinn-go/djinn/internal/server/servertest"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// BenchmarkFairness measures one principal's lookup registrations — a
// register and, untimed, a cancel — while the server is quiet, and while
// another principal floods it: eight callers registering until their
// quota refuses them, then cancelling their oldest registration and
// registering again, without pause. It reports the measured principal's
// p50 and p99 (the goal: a flooded p99 under twice the quiet one).
//
//	go test -run XXX -bench Fairness -benchtime 2000x ./internal/server
func BenchmarkFairness(b *testing.B) {
	for _, flood := range []bool{false, true} {
		name := "quiet"
		if flood {
			name = "flood"
		}
		b.Run(name, func(b *testing.B) {
			pki := servertest.NewPKI(b)
			cfg := servertest.Config(b)
			cfg.TLS = server.TLSConfig{Cert: pki.ServerCert, Key: pki.ServerKey, CA: pki.CA, ClientAuth: true}
			cfg.Quota.LookupItems = 1000
			srv := servertest.Start(b, cfg)
			as := func(cn string) *grpc.ClientConn {
				return servertest.Dial(b, srv.Addr(), client.WithTLS(pki.TLSFor(pki.NewClient(b, cn)))).ClientConn()
			}
			ctx, stop := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			if flood {
				refused := floodLookup(ctx, &wg, as("flooder"), 8)
				defer func() {
					b.ReportMetric(float64(refused()), "flooder-refusals")
				}()
			}
			p50, p99 := registerLatencies(b, as("measured"))
			stop()
			wg.Wait()
			b.ReportMetric(float64(p50.Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(p99.Microseconds())/1000, "p99-ms")
		})
	}
}

// registerLatencies registers b.N lookup items as conn's principal, each
// cancelled after, and returns the registrations' p50 and p99.
func registerLatencies(b *testing.B, conn *grpc.ClientConn) (p50, p99 time.Duration) {
	reg, ll := djinnpb.NewLookupServiceClient(conn), djinnpb.NewLandlordClient(conn)
	lat := make([]time.Duration, 0, b.N)
	for b.Loop() {
		start := time.Now()
		r, err := reg.Register(context.Background(), &djinnpb.RegisterRequest{Item: item(djinn.NewID(), "measured"), LeaseDurationNanos: int64(time.Minute)})
		lat = append(lat, time.Since(start))
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if _, err := ll.Cancel(context.Background(), &djinnpb.CancelRequest{Cookie: r.GetLease().GetCookie()}); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	slices.Sort(lat)
	return lat[len(lat)/2], lat[len(lat)*99/100]
}

// floodLookup starts n callers that register lookup items as conn's
// principal until ctx ends: past its quota each cancels its oldest and
// goes on. It returns a function that counts the refusals.
func floodLookup(ctx context.Context, wg *sync.WaitGroup, conn *grpc.ClientConn, n int) func() int {
	reg, ll := djinnpb.NewLookupServiceClient(conn), djinnpb.NewLandlordClient(conn)
	var mu sync.Mutex
	refused := 0
	for range n {
		wg.Go(func() {
			var mine [][]byte
			for ctx.Err() == nil {
				r, err := reg.Register(ctx, &djinnpb.RegisterRequest{Item: item(djinn.NewID(), "flood"), LeaseDurationNanos: int64(time.Minute)})
				switch {
				case err == nil:
					mine = append(mine, r.GetLease().GetCookie())
				case errors.Is(err, djinn.ErrResourceExhausted) && len(mine) > 0:
					mu.Lock()
					refused++
					mu.Unlock()
					_, _ = ll.Cancel(ctx, &djinnpb.CancelRequest{Cookie: mine[0]})
					mine = mine[1:]
				case errors.Is(err, djinn.ErrResourceExhausted):
					mu.Lock()
					refused++
					mu.Unlock()
				}
			}
		})
	}
	return func() int {
		mu.Lock()
		defer mu.Unlock()
		return refused
	}
}
