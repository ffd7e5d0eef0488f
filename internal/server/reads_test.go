package server_test

import (
	"bufio"
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/internal/grpcerr"
	"github.com/djinn-go/djinn/internal/server"
	"github.com/djinn-go/djinn/internal/server/servertest"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// rawLookup returns a lookup client of the one server at addr over a bare
// gRPC connection: no djinn interceptor, so a refusal is not sent on to
// the leader, and an answer is that server's own.
func rawLookup(t *testing.T, addr string) djinnpb.LookupServiceClient {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return djinnpb.NewLookupServiceClient(cc)
}

func withRead(ctx context.Context, mode string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, server.ReadMetadata, mode)
}

// lookupsServed reads a member's count of the lookups it answered from its
// /metrics.
func lookupsServed(t *testing.T, s *server.Server) int {
	t.Helper()
	resp, err := http.Get("http://" + s.AdminAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "djinn_lookup_lookups_total "); ok {
			n, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return int(n)
		}
	}
	t.Fatal("no djinn_lookup_lookups_total in /metrics")
	return 0
}

// TestReadModes: DESIGN.md 7a — a follower answers a lookup that allows
// its staleness from its own state, and refuses one that does not (or that
// asks for nothing, or for a linearizable read), naming the leader; the
// leader answers a linearizable lookup; a bad mode is refused naming it.
func TestReadModes(t *testing.T) {
	t.Parallel()
	ss := followCluster(t)
	l := leaderOf(t, ss...)
	c := servertest.Dial(t, l.Addr())
	ctx := testContext(t)
	r, err := c.Lookup(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var reg *client.ServiceRegistration
	retryUnavailable(t, "register", func(ctx context.Context) (err error) {
		reg, err = r.Register(ctx, client.ServiceItem{Service: []byte("127.0.0.1:9"), Types: []string{"Stale"}}, time.Minute)
		return err
	})
	l = leaderOf(t, ss...) // where leadership is now, should it have moved
	var f *server.Server
	for _, s := range ss {
		if s != l {
			f = s
		}
	}
	servertest.Eventually(t, "the follower to apply the registration", func() bool {
		return f.Node().AppliedIndex() >= l.Node().AppliedIndex()
	})
	tmpl := &djinnpb.ServiceTemplate{ServiceId: reg.ID[:]}
	fl := rawLookup(t, f.Addr())
	if resp, err := fl.Lookup(withRead(ctx, "stale=1m"), &djinnpb.LookupRequest{Template: tmpl, MaxMatches: 1}); err != nil || resp.GetTotal() != 1 {
		t.Errorf("a follower's lookup allowing a minute's staleness: %v, %v; want the item from its own state", resp, err)
	}
	var trailer metadata.MD
	for _, mode := range []string{"", "linearizable"} {
		mctx := ctx
		if mode != "" {
			mctx = withRead(ctx, mode)
		}
		_, err := fl.Lookup(mctx, &djinnpb.LookupRequest{Template: tmpl, MaxMatches: 1}, grpc.Trailer(&trailer))
		if !errors.Is(grpcerr.FromStatus(err), djinn.ErrUnavailable) || trailer.Get(server.LeaderTrailer)[0] != l.Addr() {
			t.Errorf("a follower's lookup in mode %q: %v, trailer %v; want unavailable naming the leader", mode, err, trailer)
		}
	}
	if resp, err := rawLookup(t, l.Addr()).Lookup(withRead(ctx, "linearizable"), &djinnpb.LookupRequest{Template: tmpl, MaxMatches: 1}); err != nil || resp.GetTotal() != 1 {
		t.Errorf("the leader's linearizable lookup: %v, %v", resp, err)
	}
	for _, bad := range []string{"stale=-1s", "stale=soon", "eventually"} {
		if _, err := fl.Lookup(withRead(ctx, bad), &djinnpb.LookupRequest{Template: tmpl}); !errors.Is(grpcerr.FromStatus(err), djinn.ErrInvalidArgument) ||
			!strings.Contains(err.Error(), bad) {
			t.Errorf("read mode %q: %v, want invalid argument naming it", bad, err)
		}
	}
}

// TestStaleReadsSpreadOverTheCluster: a client's lookups that allow
// staleness are answered by every member, and see an item registered
// before; its linearizable lookups see an item just registered.
func TestStaleReadsSpreadOverTheCluster(t *testing.T) {
	t.Parallel()
	ss := followCluster(t)
	c := servertest.Dial(t, ss[0].Addr())
	ctx := testContext(t)
	r, err := c.Lookup(ctx)
	if err != nil {
		t.Fatal(err)
	}
	before := make([]int, len(ss))
	for i, s := range ss {
		before[i] = lookupsServed(t, s)
	}
	item := client.ServiceItem{Service: []byte("127.0.0.1:9"), Types: []string{"Spread"}}
	retryUnavailable(t, "register", func(ctx context.Context) error {
		_, err := r.Register(ctx, item, time.Minute)
		return err
	})
	tmpl := client.ServiceTemplate{Types: []string{"Spread"}}
	var total int
	retryUnavailable(t, "a linearizable lookup", func(ctx context.Context) (err error) {
		total, _, err = r.LookupN(client.ReadLinearizable(ctx), tmpl, 0)
		return err
	})
	if total != 1 {
		t.Fatalf("a linearizable lookup right after the registration found %d, want it seen", total)
	}
	stale := client.ReadStale(ctx, time.Minute)
	servertest.Eventually(t, "stale lookups answered by every member", func() bool {
		if _, _, err := r.LookupN(stale, tmpl, 0); err != nil && !errors.Is(err, djinn.ErrUnavailable) {
			t.Fatalf("a stale lookup: %v", err)
		}
		for i, s := range ss {
			if lookupsServed(t, s) == before[i] {
				return false
			}
		}
		return true
	})
}
