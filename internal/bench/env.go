package bench

import (
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/internal/batch"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// Env is what a bench is given by its caller.
type Env struct {
	// Server is the gRPC address of the server measured.
	Server string
	// Dial connects to a server, with the caller's TLS settings.
	Dial func(ctx context.Context, addr string) (*client.Client, error)
	// Progress takes progress lines and clean-up failures.
	Progress io.Writer
	// ReadyWait bounds how long a bench waits, before it measures, for a
	// server that answers but is still starting (client.ErrNotReady) to
	// be ready; zero skips the check (servers that are not djinn's).
	ReadyWait time.Duration
	// Result, when set, is given each result as soon as it is measured.
	Result func(Result)
	// Plain, when set, starts the plain gRPC server whose empty call is
	// the ceiling a workload is set beside (plain.go); nil serves one in
	// the bench's own process.
	Plain Plain
}

func (e Env) progress(format string, args ...any) {
	if e.Progress != nil {
		fmt.Fprintf(e.Progress, format+"\n", args...)
	}
}

// measured adds r to rep and hands it to the caller.
func (e Env) measured(rep *Report, r Result) {
	rep.Results = append(rep.Results, r)
	if e.Result != nil {
		e.Result(r)
	}
}

// Conns are connections to one server that a load's clients share: client
// c uses the connection c mod their number.
type Conns struct {
	ccs     []*grpc.ClientConn
	clients []*client.Client
}

// dialConns dials addr n times, once the server there is ready: no bench
// measures a server still starting.
func dialConns(ctx context.Context, env Env, addr string, n int) (*Conns, error) {
	c := &Conns{}
	for i := range n {
		cl, err := env.Dial(ctx, addr)
		if err == nil && i == 0 && env.ReadyWait > 0 {
			err = env.awaitReady(ctx, cl)
		}
		if err != nil {
			if cl != nil {
				cl.Close()
			}
			c.Close()
			return nil, err
		}
		c.clients = append(c.clients, cl)
		c.ccs = append(c.ccs, cl.ClientConn())
	}
	return c, nil
}

// awaitReady waits, for at most ReadyWait, until the server cl is dialled
// to is ready, saying once on Progress what it waits for.
func (e Env) awaitReady(ctx context.Context, cl *client.Client) error {
	say := func(err error) { e.progress("waiting up to %s for the server to be ready: %v", e.ReadyWait, err) }
	_, err := client.WaitReady(ctx, e.ReadyWait, say, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, cl.Ready(ctx)
	})
	return err
}

// For returns client c's connection.
func (c *Conns) For(client int) *grpc.ClientConn { return c.ccs[client%len(c.ccs)] }

// Len returns the number of connections.
func (c *Conns) Len() int { return len(c.ccs) }

// Close closes the connections.
func (c *Conns) Close() {
	for _, cl := range c.clients {
		cl.Close()
	}
	c.clients, c.ccs = nil, nil
}

// emptyCall measures the plain gRPC empty call (a health check) at n
// clients: the baseline of a workload.
func emptyCall(ctx context.Context, conns *Conns, n int, d time.Duration) (Baseline, error) {
	m, err := Load{Clients: n, Duration: d, Step: func(ctx context.Context, c int, rec *Recorder) error {
		t0 := time.Now()
		if _, err := healthpb.NewHealthClient(conns.For(c)).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
			return err
		}
		rec.Op(time.Since(t0))
		return nil
	}}.Run(ctx)
	if err != nil {
		return Baseline{}, fmt.Errorf("empty call: %w", err)
	}
	return Baseline{PerS: m.PerS(m.Ops), P50ms: m.Percentile("", 0.50), P99ms: m.Percentile("", 0.99)}, nil
}

// parallel calls fn(c, i) for every i in [0, n) on workers goroutines,
// goroutine c making its calls as client c, and returns the first error;
// an error stops the others. It is how a bench sets up what it measures.
func parallel(ctx context.Context, workers, n int, fn func(ctx context.Context, c, i int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		next  atomic.Int64
		mu    sync.Mutex
		first error
		wg    sync.WaitGroup
	)
	for c := range min(workers, n) {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := fn(ctx, c, i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					cancel()
					return
				}
			}
		})
	}
	wg.Wait()
	if first != nil {
		return first
	}
	return ctx.Err()
}

// progressEvery writes how many of total are done every 5 seconds, until
// the function it returns is called.
func progressEvery(env Env, what string, total int, done *atomic.Int64) (stop func()) {
	start := time.Now()
	quit := make(chan struct{})
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		tick := time.NewTicker(5 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-quit:
				return
			case <-tick.C:
				d, s := done.Load(), time.Since(start).Seconds()
				env.progress("%s: %d of %d in %.0f s (%.0f/s)", what, d, total, s, float64(d)/s)
			}
		}
	}()
	return func() {
		close(quit)
		<-exited
	}
}

// cancelLeases cancels the leases of what a bench created, in batches,
// however the bench ended; what fails is reported as progress.
func cancelLeases(env Env, cc *grpc.ClientConn, what string, cookies [][]byte) {
	ctx, stop := context.WithTimeout(context.Background(), 5*time.Minute)
	defer stop()
	var live [][]byte
	for _, c := range cookies {
		if c != nil {
			live = append(live, c)
		}
	}
	ll := djinnpb.NewLandlordClient(cc)
	for lo := 0; lo < len(live); lo += batch.MaxLeases {
		req := &djinnpb.CancelAllRequest{}
		for _, c := range live[lo:min(lo+batch.MaxLeases, len(live))] {
			req.Cookies = append(req.Cookies, c...)
		}
		resp, err := ll.CancelAll(ctx, req)
		if err != nil {
			env.progress("cancel the bench's %s: %v", what, err)
			return
		}
		if len(resp.GetErrors()) > 0 {
			env.progress("cancel the bench's %s: %d failed, the first: %s", what, len(resp.GetErrors()), resp.GetErrors()[0].GetError().GetMessage())
		}
	}
}
