package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// The ceiling a workload is set beside: the empty call of a plain gRPC
// server — grpc-go with the health service and nothing else: no
// interceptor, no authorization, no metrics — in a process of its own,
// measured in the same run, at the same concurrency and over as many
// connections as the workload's. djinn's own empty call (its health
// check, through its interceptors) is reported beside it.

// PlainReady is the line a plain server prints, followed by its address,
// once it serves.
const PlainReady = "plain gRPC server listening on "

// ServePlain serves a plain gRPC server on lis until ctx ends: the health
// service, nothing else.
func ServePlain(ctx context.Context, lis net.Listener) error {
	g := grpc.NewServer()
	healthpb.RegisterHealthServer(g, health.NewServer())
	go func() {
		<-ctx.Done()
		g.Stop()
	}()
	return g.Serve(lis)
}

// Plain starts a plain gRPC server and returns its address and a function
// that stops it.
type Plain func(ctx context.Context) (addr string, stop func(), err error)

// PlainProcess returns a Plain that runs the server as a process of its
// own: the program at path with args, which serves on 127.0.0.1:0 and
// prints PlainReady and its address on its standard output.
func PlainProcess(path string, args ...string) Plain {
	return func(ctx context.Context) (string, func(), error) {
		ctx, cancel := context.WithCancel(ctx)
		cmd := exec.CommandContext(ctx, path, args...)
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err == nil {
			err = cmd.Start()
		}
		if err != nil {
			cancel()
			return "", nil, fmt.Errorf("plain gRPC server: %w", err)
		}
		stop := func() {
			cancel()
			_ = cmd.Wait()
		}
		line, err := bufio.NewReader(out).ReadString('\n')
		addr, ok := strings.CutPrefix(strings.TrimSpace(line), PlainReady)
		if err != nil || !ok {
			stop()
			return "", nil, fmt.Errorf("plain gRPC server: it said %q (%v), not where it listens", line, err)
		}
		go func() { _, _ = io.Copy(io.Discard, out) }()
		return addr, stop, nil
	}
}

// plainInProcess serves the plain server in this process: for tests, and
// when no program for it is given (the figure then says so).
func plainInProcess(ctx context.Context) (string, func(), error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = ServePlain(ctx, lis)
	}()
	return lis.Addr().String(), func() { cancel(); <-done }, nil
}

// plainEmpty measures the plain server's empty call at n clients over
// conns connections for d.
func (e Env) plainEmpty(ctx context.Context, n, conns int, d time.Duration) (Baseline, error) {
	start, where := e.Plain, "its own process"
	if start == nil {
		start, where = plainInProcess, "the bench's process"
	}
	addr, stop, err := start(ctx)
	if err != nil {
		return Baseline{}, err
	}
	defer stop()
	var ccs []*grpc.ClientConn
	defer func() {
		for _, cc := range ccs {
			cc.Close()
		}
	}()
	for range conns {
		cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return Baseline{}, err
		}
		ccs = append(ccs, cc)
	}
	m, err := Load{Clients: n, Duration: d, Step: func(ctx context.Context, c int, rec *Recorder) error {
		t0 := time.Now()
		if _, err := healthpb.NewHealthClient(ccs[c%len(ccs)]).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
			return err
		}
		rec.Op(time.Since(t0))
		return nil
	}}.Run(ctx)
	if err != nil {
		return Baseline{}, fmt.Errorf("plain gRPC empty call: %w", err)
	}
	return Baseline{PerS: m.PerS(m.Ops), P50ms: m.Percentile("", 0.50), P99ms: m.Percentile("", 0.99), Server: "plain gRPC server in " + where}, nil
}
