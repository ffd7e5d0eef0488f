package server_test

import (
	"crypto/tls"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/internal/quota"
	"github.com/djinn-go/djinn/internal/server"
	"github.com/djinn-go/djinn/internal/server/servertest"
	"github.com/djinn-go/djinn/kv"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// TestServiceMetricsCount: every service's series on /metrics count what
// happened — lock grants, waits, refusals and deadlocks, lookup items,
// watches, lookups and events, lookup discovery registrations, registrars
// and events, key/value operations by kind, transactions by outcome,
// mailbox and renewal state — and every series named *_total is a
// counter.
func TestServiceMetricsCount(t *testing.T) {
	t.Parallel()
	cfg := servertest.Config(t)
	cfg.LookupJoin.Enabled = false // counts only the test's own calls
	srv := servertest.Start(t, cfg)
	c := servertest.Dial(t, srv.Addr())
	ctx := testContext(t)
	before := scrape(t, srv)
	p := servertest.Populate(t, c, srv.Addr(), time.Minute)

	// Locks: Populate's grant, two more, a wait granted later, a refused
	// try and a deadlock.
	conn, err := c.Conn(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := c.TransactionManager(ctx)
	if err != nil {
		t.Fatal(err)
	}
	f := &lockFixture{t: t, c: c, ls: djinnpb.NewLockServiceClient(conn), mgr: mgr}
	s1, s2 := f.set(false, nil), f.set(false, nil)
	a, _ := f.owner(time.Minute)
	b, _ := f.owner(time.Minute)
	f.lock(s1, a, lockW)
	f.lock(s2, b, lockW)
	if f.try(s1, b, lockW) {
		t.Fatal("a try on a set another holds in W was granted")
	}
	aWait := f.waitLock(ctx, s2, a, lockW)
	if _, err := f.ls.Lock(ctx, &djinnpb.LockRequest{SetId: s1, Holder: b, Mode: lockW}); !errors.Is(err, djinn.ErrDeadlock) {
		t.Fatalf("a request closing a cycle: %v, want Deadlock", err)
	}
	if _, err := f.ls.Unlock(ctx, &djinnpb.UnlockRequest{SetId: s2, Holder: b, Mode: lockW}); err != nil {
		t.Fatal(err)
	}
	if got := answer(t, aWait); got.err != nil {
		t.Fatal(got.err)
	}

	// Lookups; transactions: Populate's committed, another aborted;
	// key/value operations of every kind.
	reg, err := c.Lookup(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if it, err := reg.Lookup(ctx, client.ServiceTemplate{Types: []string{p.ItemType}}); err != nil || it == nil {
			t.Fatalf("lookup: %v, %v", it, err)
		}
	}
	if err := p.Txn.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	aborted, err := mgr.Create(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := aborted.Abort(ctx); err != nil {
		t.Fatal(err)
	}
	kvc := kv.NewClient(conn)
	if _, _, err := kvc.Get(ctx, nil, p.Key); err != nil {
		t.Fatal(err)
	}
	if _, err := kvc.List(ctx, nil, "console/"); err != nil {
		t.Fatal(err)
	}
	if _, err := kvc.Delete(ctx, nil, p.Key); err != nil {
		t.Fatal(err)
	}

	want := map[string]float64{
		`djinn_lock_requests_total{outcome="granted"}`:  4,
		`djinn_lock_requests_total{outcome="queued"}`:   1,
		`djinn_lock_requests_total{outcome="refused"}`:  1,
		`djinn_lock_requests_total{outcome="deadlock"}`: 1,
		`djinn_lock_sets`:                             3,
		`djinn_lock_owners`:                           3,
		`djinn_lock_waiters`:                          0,
		`djinn_lock_aborted_votes`:                    0,
		`djinn_lookup_items`:                          1,
		`djinn_lookup_watches`:                        1,
		`djinn_lookup_registrations_total`:            1,
		`djinn_lookup_lookups_total`:                  2,
		`djinn_lookup_delivered_events_total`:         1, // the item matched the watch
		`djinn_lds_registrations`:                     1,
		`djinn_lds_delivered_events_total`:            1, // its discovery
		`djinn_mailbox_registrations`:                 1,
		`djinn_mailbox_stored_events`:                 2, // both events
		`djinn_renewal_sets`:                          1,
		`djinn_renewal_leases`:                        1,
		`djinn_txn_created_total`:                     2,
		`djinn_txn_outcomes_total{state="COMMITTED"}`: 1,
		`djinn_txn_outcomes_total{state="ABORTED"}`:   1,
		`djinn_txn_active`:                            0,
		`djinn_txn_remembered`:                        2, // both settled
		`djinn_kv_operations_total{op="put"}`:         2,
		`djinn_kv_operations_total{op="get"}`:         1,
		`djinn_kv_operations_total{op="list"}`:        1,
		`djinn_kv_operations_total{op="delete"}`:      1,
		`djinn_kv_keys`:                               1, // the transaction's key, committed
	}
	// Events are delivered after their calls return: wait for them, then
	// name what differs.
	var after map[string]float64
	servertest.Poll(servertest.Timeout, func() bool {
		after = scrape(t, srv)
		return after[`djinn_mailbox_stored_events`] >= 2 && after[`djinn_lds_delivered_events_total`] >= 1 && after[`djinn_lookup_delivered_events_total`] >= 1 &&
			after[`djinn_txn_remembered`]-before[`djinn_txn_remembered`] >= 2
	})
	for series, n := range want {
		if _, ok := after[series]; !ok {
			t.Errorf("%s: not exported", series)
		} else if got := after[series] - before[series]; got != n {
			t.Errorf("%s: %v (from %v to %v), want %v", series, got, before[series], after[series], n)
		}
	}
	for name, typ := range metricTypes(t, srv) {
		if strings.HasSuffix(name, "_total") && typ != "counter" {
			t.Errorf("%s is a %s: a *_total series must be a counter", name, typ)
		}
	}
}

// scrape reads srv's /metrics: each series, with its labels as exported,
// and its value.
func scrape(t *testing.T, srv *server.Server) map[string]float64 {
	t.Helper()
	return scrapeTLS(t, srv, nil)
}

// scrapeTLS is scrape of a server whose admin port serves TLS, read with
// tc.
func scrapeTLS(t *testing.T, srv *server.Server, tc *tls.Config) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for l := range strings.Lines(metricsTextTLS(t, srv, tc)) {
		l = strings.TrimSpace(l)
		i := strings.LastIndexByte(l, ' ')
		if strings.HasPrefix(l, "#") || i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(l[i+1:], 64)
		if err != nil {
			t.Fatalf("/metrics line %q: %v", l, err)
		}
		out[l[:i]] = v
	}
	return out
}

// metricTypes returns each metric family's type as /metrics declares it.
func metricTypes(t *testing.T, srv *server.Server) map[string]string {
	t.Helper()
	out := map[string]string{}
	for l := range strings.Lines(metricsText(t, srv)) {
		if f := strings.Fields(l); len(f) == 4 && f[0] == "#" && f[1] == "TYPE" {
			out[f[2]] = f[3]
		}
	}
	return out
}

func metricsText(t *testing.T, srv *server.Server) string {
	t.Helper()
	return metricsTextTLS(t, srv, nil)
}

func metricsTextTLS(t *testing.T, srv *server.Server, tc *tls.Config) string {
	t.Helper()
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: tc, DisableKeepAlives: true}, Timeout: servertest.Timeout}
	resp, err := hc.Get(srv.AdminURL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %d, %v", resp.StatusCode, err)
	}
	return string(b)
}

// TestQuotaRefusalsAreCounted: a call refused over a limit counts in
// grpc_server_handled_total with code ResourceExhausted, the series the
// quota alert reads.
func TestQuotaRefusalsAreCounted(t *testing.T) {
	t.Parallel()
	cfg := servertest.Config(t)
	cfg.Lock.MaxSets = 2
	srv := servertest.Start(t, cfg)
	locks, err := servertest.Dial(t, srv.Addr()).LockService(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err = locks.CreateSet(testContext(t), client.LockSetOptions{Lease: time.Minute}); err != nil {
			break
		}
	}
	wantErr(t, "a lock set past the limit", err, djinn.ErrResourceExhausted, "lock sets")
	const series = `grpc_server_handled_total{grpc_code="ResourceExhausted",grpc_method="CreateSet",grpc_service="djinn.v1.LockService",grpc_type="unary"}`
	if got := scrape(t, srv)[series]; got != 1 {
		t.Errorf("%s = %v, want 1", series, got)
	}
}

// TestStreamsQuotaRefusalsAreCounted (DESIGN.md 7): a stream refused over
// its principal's streams quota, under mutual TLS, counts in
// grpc_server_handled_total with code ResourceExhausted, as a unary call
// refused over a quota does: the quota alert reads that series.
func TestStreamsQuotaRefusalsAreCounted(t *testing.T) {
	t.Parallel()
	pki := servertest.NewPKI(t)
	srv, as := quotaServer(t, pki, "")
	const series = `grpc_server_handled_total{grpc_code="ResourceExhausted",grpc_method="RenewStream",grpc_service="djinn.v1.Landlord",grpc_type="bidi_stream"}`
	tc := pki.ClientTLS()
	before := scrapeTLS(t, srv, tc)[series]
	open := creators[quota.Streams](t, as("alice"), as("carol"))
	for i := range perPrincipal {
		if err := open(testContext(t)); err != nil {
			t.Fatalf("alice's stream %d of %d: %v", i+1, perPrincipal, err)
		}
	}
	err := open(testContext(t))
	wantErr(t, "alice's stream past her quota", err, djinn.ErrResourceExhausted, "quota "+string(quota.Streams))
	if got := scrapeTLS(t, srv, tc)[series]; got != before+1 {
		t.Errorf("%s = %v after one refusal, want %v", series, got, before+1)
	}
}
