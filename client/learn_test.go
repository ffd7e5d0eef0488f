package client

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// members answers Members with the member list of the cluster with
// service id svc, and counts the questions.
type members struct {
	djinnpb.UnimplementedAdminServer
	svc   djinn.ID
	asked atomic.Int32
}

func (m *members) Members(context.Context, *djinnpb.MembersRequest) (*djinnpb.MembersResponse, error) {
	m.asked.Add(1)
	return &djinnpb.MembersResponse{ServiceId: m.svc[:]}, nil
}

// DESIGN.md 7a: an endpoint that is no member of a djinn cluster with a
// reference's service id keeps being reached at that endpoint. Learn
// returns once it answers, without error; the answer is kept, so no later
// Learn or ConnFor asks again, and ConnFor gives the endpoint's
// connection.
func TestLearnNotACluster(t *testing.T) {
	other := &members{svc: djinn.NewID()}
	for _, row := range []struct {
		name     string
		register func(*grpc.Server)
		asked    *atomic.Int32 // nil: not counted
	}{
		{"no member list (Unimplemented)", func(*grpc.Server) {}, nil},
		{"the member list of another service", func(s *grpc.Server) { djinnpb.RegisterAdminServer(s, other) }, &other.asked},
	} {
		t.Run(row.name, func(t *testing.T) {
			addr := serve(t, row.register)
			p := NewPool()
			defer p.Close()
			ref := djinn.Ref{Endpoint: addr, Service: djinn.NewID(), Object: djinn.NewID()}
			for i := range 3 {
				if err := p.Learn(t.Context(), ref); err != nil {
					t.Fatalf("Learn %d: %v", i+1, err)
				}
			}
			cc, err := p.ConnFor(ref)
			if err != nil {
				t.Fatal(err)
			}
			if at, _ := p.Conn(addr); cc != at {
				t.Error("ConnFor after Learn: not the endpoint's connection")
			}
			if p.Follows(ref.Service) {
				t.Error("the pool follows a cluster for a service no cluster serves")
			}
			p.mu.Lock()
			l := p.learning[ref.Service]
			never := l != nil && l.never
			p.mu.Unlock()
			if !never {
				t.Error("the answer (no cluster's) was not kept")
			}
			if row.asked != nil {
				if n := row.asked.Load(); n != 1 {
					t.Errorf("the endpoint was asked %d times, want once", n)
				}
			}
		})
	}
}

// blackHole accepts connections on a loopback port and never answers
// them; accepted hears of each. The connections close when the test ends.
func blackHole(t *testing.T) (addr string, accepted <-chan struct{}) {
	t.Helper()
	ln := listen(t)
	ch := make(chan struct{}, 16)
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
	)
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	})
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String(), ch
}

// Learn waits for an endpoint's answer no longer than its context: at an
// endpoint that takes the connection and never answers, it returns when
// ctx ends, Unavailable with ctx's error, and ConnFor gives the
// endpoint's connection. Close does not wait for the question either.
func TestLearnBoundedByContext(t *testing.T) {
	addr, accepted := blackHole(t)
	p := NewPool()
	ref := djinn.Ref{Endpoint: addr, Service: djinn.NewID(), Object: djinn.NewID()}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- p.Learn(ctx, ref) }()
	select {
	case <-accepted: // the question is out
	case err := <-done:
		t.Fatalf("Learn at a black hole returned before its context ended: %v", err)
	}
	cancel()
	err := <-done
	if !errors.Is(err, djinn.ErrUnavailable) || !errors.Is(err, context.Canceled) {
		t.Errorf("Learn at a black hole, its context cancelled: %v, want Unavailable and context.Canceled", err)
	}
	if p.Follows(ref.Service) {
		t.Error("the pool follows a cluster nobody named")
	}
	if cc, err := p.ConnFor(ref); err != nil {
		t.Error(err)
	} else if at, _ := p.Conn(addr); cc != at {
		t.Error("ConnFor after a Learn that found nothing: not the endpoint's connection")
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.Learn(t.Context(), ref); !errors.Is(err, djinn.ErrUnavailable) {
		t.Errorf("Learn after Close: %v, want Unavailable", err)
	}
}
