package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"math"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/internal/grpcerr"
	"github.com/djinn-go/djinn/internal/server/servertest"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// The tests of this file run the client alone, against fakeRenewal, an
// in-memory stand-in that records what reaches it; renewal_server_test.go
// runs it against a real djinn server.

// fakeRenewal answers the lease renewal service's calls from memory: enough
// to see what the client sends and how it reads the answers, nothing of the
// renewing itself.
type fakeRenewal struct {
	djinnpb.UnimplementedLeaseRenewalServiceServer
	svc      djinn.ID
	landlord djinn.Ref

	mu    sync.Mutex
	calls []string                            // guarded by mu: the methods called, in order
	sets  map[djinn.ID]*fakeSet               // guarded by mu
	last  map[string]proto.Message            // guarded by mu: the last request of each method
	reply map[djinn.ID][]*djinnpb.ClientLease // guarded by mu: GetLeases answers, by set
	page  int                                 // guarded by mu: GetLeases's page, 0 for all
	stuck bool                                // guarded by mu: GetLeases names the same next on every page
	back  bool                                // guarded by mu: the next page after the first names a next before its after (once)
}

type fakeSet struct {
	lease     *djinnpb.Lease
	leases    map[djinn.ID]*djinnpb.Lease // by cookie
	listeners [2]*djinnpb.RenewalListener
}

var _ djinnpb.LeaseRenewalServiceServer = (*fakeRenewal)(nil)

// startFake serves a fakeRenewal on a loopback port until the test ends and
// returns it with a client of it that reaches it through a Pool.
func startFake(t *testing.T) (*fakeRenewal, *client.RenewalService) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeRenewal{
		svc:      djinn.NewID(),
		landlord: djinn.Ref{Endpoint: ln.Addr().String(), Service: djinn.NewID(), Object: djinn.NewID()},
		sets:     map[djinn.ID]*fakeSet{},
		last:     map[string]proto.Message{},
		reply:    map[djinn.ID][]*djinnpb.ClientLease{},
	}
	srv := grpc.NewServer()
	djinnpb.RegisterLeaseRenewalServiceServer(srv, f)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	pool := client.NewPool()
	t.Cleanup(func() {
		pool.Close()
		srv.Stop()
		<-done
	})
	return f, client.NewRenewalService(pool, ln.Addr().String())
}

func (f *fakeRenewal) record(method string, req proto.Message) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, method)
	f.last[method] = req
}

// Calls returns the methods called so far.
func (f *fakeRenewal) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

func (f *fakeRenewal) lastRequest(method string) proto.Message {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.last[method]
}

func (f *fakeRenewal) setRef(id djinn.ID) *djinnpb.Ref {
	return &djinnpb.Ref{Endpoint: f.landlord.Endpoint, ServiceId: f.svc[:], ObjectId: id[:]}
}

// set finds a set; f.mu is held.
func (f *fakeRenewal) setLocked(b []byte) (djinn.ID, *fakeSet, error) {
	id, err := djinn.IDFromBytes("set id", b)
	if err != nil {
		return id, nil, grpcerr.Status(err)
	}
	s, ok := f.sets[id]
	if !ok {
		return id, nil, grpcerr.Status(djinn.Errorf(djinn.NoSuchObject, "renewal set %s: no such set", id))
	}
	return id, s, nil
}

func (f *fakeRenewal) CreateSet(_ context.Context, r *djinnpb.CreateSetRequest) (*djinnpb.RenewalSet, error) {
	f.record("CreateSet", r)
	d := min(time.Duration(r.GetLeaseDurationNanos()), time.Hour)
	if d < 0 {
		d = time.Hour
	}
	cookie, id := djinn.NewID(), djinn.NewID()
	s := &fakeSet{
		lease:  &djinnpb.Lease{Landlord: client.RefToProto(f.landlord), Cookie: cookie[:], DurationNanos: int64(d)},
		leases: map[djinn.ID]*djinnpb.Lease{},
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sets[id] = s
	return &djinnpb.RenewalSet{Set: f.setRef(id), Lease: s.lease}, nil
}

func (f *fakeRenewal) GetSet(_ context.Context, r *djinnpb.SetRequest) (*djinnpb.RenewalSet, error) {
	f.record("GetSet", r)
	f.mu.Lock()
	defer f.mu.Unlock()
	id, s, err := f.setLocked(r.GetSetId())
	if err != nil {
		return nil, err
	}
	return &djinnpb.RenewalSet{
		Set: f.setRef(id), Lease: s.lease, Leases: int64(len(s.leases)),
		ExpirationWarning: s.listeners[client.ExpirationWarningEventID],
		RenewalFailure:    s.listeners[client.RenewalFailureEventID],
	}, nil
}

func (f *fakeRenewal) RenewFor(_ context.Context, r *djinnpb.RenewForRequest) (*djinnpb.RenewForResponse, error) {
	f.record("RenewFor", r)
	f.mu.Lock()
	defer f.mu.Unlock()
	_, s, err := f.setLocked(r.GetSetId())
	if err != nil {
		return nil, err
	}
	s.leases[djinn.ID(r.GetLease().GetCookie())] = r.GetLease()
	return &djinnpb.RenewForResponse{}, nil
}

func (f *fakeRenewal) Remove(_ context.Context, r *djinnpb.RemoveRequest) (*djinnpb.RemoveResponse, error) {
	f.record("Remove", r)
	f.mu.Lock()
	defer f.mu.Unlock()
	_, s, err := f.setLocked(r.GetSetId())
	if err != nil {
		return nil, err
	}
	cookie := djinn.ID(r.GetLease().GetCookie())
	l, ok := s.leases[cookie]
	if !ok {
		return &djinnpb.RemoveResponse{}, nil
	}
	delete(s.leases, cookie)
	return &djinnpb.RemoveResponse{Lease: l}, nil
}

// GetLeases answers f.reply's leases of the set, a page of at most
// f.page of them when the request has a max (f.page 0: all), each page's
// next the number of leases before the following one (f.stuck: the
// first page's, always; f.back: once, the key before its after).
func (f *fakeRenewal) GetLeases(_ context.Context, r *djinnpb.GetLeasesRequest) (*djinnpb.GetLeasesResponse, error) {
	f.record("GetLeases", r)
	f.mu.Lock()
	defer f.mu.Unlock()
	id, _, err := f.setLocked(r.GetSetId())
	if err != nil {
		return nil, err
	}
	all := f.reply[id]
	if r.GetMax() == 0 || f.page == 0 {
		return &djinnpb.GetLeasesResponse{Leases: all, Total: int64(len(all))}, nil
	}
	start := 0
	if a := r.GetAfter(); len(a) > 0 && !f.stuck {
		start = int(a[0])
	}
	end := min(start+f.page, len(all))
	resp := &djinnpb.GetLeasesResponse{Leases: all[start:end], Total: int64(len(all))}
	if end < len(all) {
		resp.Next = []byte{byte(end)}
	}
	if f.back && start > 0 {
		resp.Next, f.back = []byte{byte(start - 1)}, false
	}
	return resp, nil
}

func (f *fakeRenewal) listen(id int64, setID []byte, l *djinnpb.RenewalListener) (*djinnpb.EventRegistration, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	sid, s, err := f.setLocked(setID)
	if err != nil {
		return nil, err
	}
	s.listeners[id] = l
	return &djinnpb.EventRegistration{EventId: id, Source: f.setRef(sid), Lease: s.lease, Sequence: 41}, nil
}

func (f *fakeRenewal) SetExpirationWarningListener(_ context.Context, r *djinnpb.SetExpirationWarningListenerRequest) (*djinnpb.EventRegistration, error) {
	f.record("SetExpirationWarningListener", r)
	return f.listen(client.ExpirationWarningEventID, r.GetSetId(), &djinnpb.RenewalListener{
		Listener: r.GetListener(), Handback: r.GetHandback(), MinWarningNanos: r.GetMinWarningNanos(), NextSequence: 42,
	})
}

func (f *fakeRenewal) SetRenewalFailureListener(_ context.Context, r *djinnpb.SetRenewalFailureListenerRequest) (*djinnpb.EventRegistration, error) {
	f.record("SetRenewalFailureListener", r)
	return f.listen(client.RenewalFailureEventID, r.GetSetId(), &djinnpb.RenewalListener{
		Listener: r.GetListener(), Handback: r.GetHandback(), NextSequence: 42,
	})
}

func (f *fakeRenewal) clear(id int64, setID []byte) (*djinnpb.ClearListenerResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, s, err := f.setLocked(setID)
	if err != nil {
		return nil, err
	}
	s.listeners[id] = nil
	return &djinnpb.ClearListenerResponse{}, nil
}

func (f *fakeRenewal) ClearExpirationWarningListener(_ context.Context, r *djinnpb.SetRequest) (*djinnpb.ClearListenerResponse, error) {
	f.record("ClearExpirationWarningListener", r)
	return f.clear(client.ExpirationWarningEventID, r.GetSetId())
}

func (f *fakeRenewal) ClearRenewalFailureListener(_ context.Context, r *djinnpb.SetRequest) (*djinnpb.ClearListenerResponse, error) {
	f.record("ClearRenewalFailureListener", r)
	return f.clear(client.RenewalFailureEventID, r.GetSetId())
}

func ctxFor(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), servertest.Timeout)
	t.Cleanup(cancel)
	return ctx
}

func testRef() djinn.Ref {
	return djinn.Ref{Endpoint: "127.0.0.1:9", Service: djinn.NewID(), Object: djinn.NewID()}
}

func testLease(expiration time.Time) *client.Lease {
	return client.NewLease(testRef(), djinn.NewID(), expiration)
}

// TestRenewalArguments checks the argument rules of LR.2 the client
// enforces before calling: a refused call never reaches the service, an
// accepted one does.
func TestRenewalArguments(t *testing.T) {
	f, rs := startFake(t)
	ctx := ctxFor(t)
	set, err := rs.CreateSet(ctx, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	l := testLease(time.Now().Add(time.Hour))
	listener := testRef()
	for _, tt := range []struct {
		name string
		call func() error
		want string // "" when the call is accepted; else in the error
	}{
		{"LR.2 createLeaseRenewalSet duration zero", func() error { _, err := rs.CreateSet(ctx, 0); return err }, "lease duration 0s"},
		{"LR.2 createLeaseRenewalSet duration negative", func() error { _, err := rs.CreateSet(ctx, -5*time.Second); return err }, "lease duration -5s"},
		{"LR.2 createLeaseRenewalSet duration positive", func() error { _, err := rs.CreateSet(ctx, time.Nanosecond); return err }, ""},
		{"LR.2 createLeaseRenewalSet duration Forever", func() error { _, err := rs.CreateSet(ctx, djinn.Forever); return err }, ""},
		{"LR.2 createLeaseRenewalSet duration Any", func() error { _, err := rs.CreateSet(ctx, djinn.Any); return err }, ""},
		{"LR.2 renewFor null lease", func() error { return set.RenewFor(ctx, nil, time.Hour, time.Minute) }, "lease: missing"},
		{"LR.2 renewFor two-argument null lease", func() error { return set.RenewForDesired(ctx, nil, time.Hour) }, "lease: missing"},
		{"LR.2 renewFor renew duration zero", func() error { return set.RenewFor(ctx, l, time.Hour, 0) }, "renew duration 0s"},
		{"LR.2 renewFor renew duration negative", func() error { return set.RenewFor(ctx, l, djinn.Forever, -time.Second) }, "renew duration -1s"},
		{"LR.2 renewFor renew duration Any needs desired Forever", func() error { return set.RenewFor(ctx, l, time.Hour, djinn.Any) }, "renew duration Any: allowed only when the desired duration is Forever, not 1h0m0s"},
		{"LR.2 renewFor renew duration Any with desired Forever", func() error { return set.RenewFor(ctx, l, djinn.Forever, djinn.Any) }, ""},
		{"LR.2 renewFor negative desired duration is no error", func() error { return set.RenewFor(ctx, l, -time.Hour, time.Minute) }, ""},
		{"LR.2 renewFor desired Any is no error", func() error { return set.RenewFor(ctx, l, djinn.Any, time.Minute) }, ""},
		{"LR.2 remove null lease", func() error { _, err := set.Remove(ctx, nil); return err }, "lease: missing"},
		{"LR.2.1 setExpirationWarningListener null listener", func() error {
			_, err := set.SetExpirationWarningListener(ctx, djinn.Ref{}, time.Minute, nil)
			return err
		}, "listener: missing"},
		{"LR.2.1 setExpirationWarningListener minWarning negative", func() error {
			_, err := set.SetExpirationWarningListener(ctx, listener, -time.Second, nil)
			return err
		}, "minimum warning -1s"},
		{"LR.2.1 setExpirationWarningListener minWarning Any", func() error {
			_, err := set.SetExpirationWarningListener(ctx, listener, djinn.Any, nil)
			return err
		}, "minimum warning any"},
		{"LR.2.1 setExpirationWarningListener minWarning zero", func() error {
			_, err := set.SetExpirationWarningListener(ctx, listener, 0, nil)
			return err
		}, ""},
		{"LR.2.1 setRenewalFailureListener null listener", func() error {
			_, err := set.SetRenewalFailureListener(ctx, djinn.Ref{}, nil)
			return err
		}, "listener: missing"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			before := len(f.Calls())
			err := tt.call()
			after := len(f.Calls())
			if tt.want == "" {
				if err != nil || after != before+1 {
					t.Errorf("err = %v after %d calls, want success after one call", err, after-before)
				}
				return
			}
			if !errors.Is(err, djinn.ErrInvalidArgument) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want invalid argument naming %q", err, tt.want)
			}
			if after != before {
				t.Errorf("a refused call reached the service: %v", f.Calls()[before:])
			}
		})
	}
}

// TestRenewalClient checks what the client sends and how it reads the
// answers.
func TestRenewalClient(t *testing.T) {
	f, rs := startFake(t)
	ctx := ctxFor(t)

	sent := time.Now()
	set, err := rs.CreateSet(ctx, djinn.Forever)
	if err != nil {
		t.Fatal(err)
	}
	if got := f.lastRequest("CreateSet").(*djinnpb.CreateSetRequest).GetLeaseDurationNanos(); got != math.MaxInt64 {
		t.Errorf("CreateSet sent %d, want Forever (MaxInt64)", got)
	}
	// LE.2.3: the set's lease expires an hour (what the fake grants) after
	// the request was sent, not after the answer came.
	if exp := set.Lease().Expiration(); exp.Before(sent.Add(time.Hour)) || exp.After(time.Now().Add(time.Hour)) {
		t.Errorf("set lease expires %v, want an hour after the request", exp)
	}
	if set.ID() != set.Ref().Object || set.Ref().Service != f.svc {
		t.Errorf("set %v id %v: want the reference's object id and the service's id", set.Ref(), set.ID())
	}

	again, err := rs.Set(ctx, set.ID())
	if err != nil {
		t.Fatal(err)
	}
	other, err := rs.CreateSet(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if !again.Equal(set) || !set.Equal(again) || !again.Lease().Equal(set.Lease()) {
		t.Error("LR.2 a set read back equals the set, with an equal lease")
	}
	if set.Equal(other) || set.Equal(nil) {
		t.Error("LR.2 two sets are not equal")
	}

	l := testLease(time.Now().Add(time.Hour))
	if err := set.RenewForDesired(ctx, l, 10*time.Minute); err != nil {
		t.Fatal(err)
	}
	req := f.lastRequest("RenewFor").(*djinnpb.RenewForRequest)
	if djinn.ID(req.GetSetId()) != set.ID() || req.GetDesiredDurationNanos() != int64(10*time.Minute) ||
		req.GetRenewDurationNanos() != int64(djinn.Forever) {
		t.Errorf("LR.2 two-argument renewFor sent %v, want desired 10m and renew Forever", req)
	}
	if got, err := client.LeaseFromProto(req.GetLease(), time.Now()); err != nil || !got.Equal(l) {
		t.Errorf("RenewFor sent lease %v (%v), want %v", got, err, l)
	}
	if err := set.RenewFor(ctx, l, djinn.Forever, djinn.Any); err != nil {
		t.Fatal(err)
	}
	if req := f.lastRequest("RenewFor").(*djinnpb.RenewForRequest); req.GetDesiredDurationNanos() != math.MaxInt64 || req.GetRenewDurationNanos() != -1 {
		t.Errorf("renewFor(Forever, Any) sent %v", req)
	}

	info, err := set.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Leases != 1 || !info.Lease.Equal(set.Lease()) || info.ExpirationWarning != nil || info.RenewalFailure != nil {
		t.Errorf("info = %+v, want one lease, the set's lease and no listeners", info)
	}

	removed, err := set.Remove(ctx, client.NewLease(l.Landlord(), l.Cookie(), time.Time{}))
	if err != nil || !removed.Equal(l) {
		t.Errorf("LR.2 remove returned %v, %v; want the lease", removed, err)
	}
	if removed, err := set.Remove(ctx, l); removed != nil || err != nil {
		t.Errorf("LR.2 remove of a lease not in the set returned %v, %v; want nil, nil", removed, err)
	}

	// getLeases: Forever is the end of time, the last error keeps its kind.
	f.mu.Lock()
	desired := time.Unix(0, time.Now().Add(time.Hour).UnixNano())
	f.reply[set.ID()] = []*djinnpb.ClientLease{
		{Lease: l.Proto(time.Now()), DesiredExpirationUnixNanos: math.MaxInt64, RenewDurationNanos: -1},
		{Lease: l.Proto(time.Now()), DesiredExpirationUnixNanos: desired.UnixNano(), RenewDurationNanos: int64(time.Minute),
			LastError: &djinnpb.Error{Code: 5, Kind: string(djinn.UnknownLease), Message: "lease gone"}},
	}
	f.mu.Unlock()
	leases, err := set.Leases(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(leases) != 2 {
		t.Fatalf("%d leases, want 2", len(leases))
	}
	if c := leases[0]; !c.Lease.Equal(l) || !c.Desired.Equal(djinn.EndOfTime) || c.RenewDuration != djinn.Any || c.LastError != nil {
		t.Errorf("leases[0] = %+v", c)
	}
	if c := leases[1]; !c.Desired.Equal(desired) || c.RenewDuration != time.Minute || !errors.Is(c.LastError, djinn.ErrUnknownLease) ||
		c.LastError.Error() != "lease gone" {
		t.Errorf("leases[1] = %+v", c)
	}
	f.mu.Lock()
	f.reply[set.ID()] = []*djinnpb.ClientLease{{Lease: &djinnpb.Lease{}}}
	f.mu.Unlock()
	if _, err := set.Leases(ctx); !errors.Is(err, djinn.ErrInvalidArgument) || !strings.Contains(err.Error(), "lease landlord") {
		t.Errorf("leases with a bad lease: %v, want invalid argument naming the landlord", err)
	}

	// LR.2.1 event registrations share the set's lease and name the set.
	listener := testRef()
	reg, err := set.SetExpirationWarningListener(ctx, listener, 5*time.Minute, []byte("warn"))
	if err != nil {
		t.Fatal(err)
	}
	if reg.ID != client.ExpirationWarningEventID || !reg.Source.Equal(set.Ref()) || !reg.Lease.Equal(set.Lease()) || reg.Seq != 41 {
		t.Errorf("warning registration %+v", reg)
	}
	reg, err = set.SetRenewalFailureListener(ctx, listener, []byte("fail"))
	if err != nil {
		t.Fatal(err)
	}
	if reg.ID != client.RenewalFailureEventID || !reg.Source.Equal(set.Ref()) || !reg.Lease.Equal(set.Lease()) {
		t.Errorf("failure registration %+v", reg)
	}
	info, err = set.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if w := info.ExpirationWarning; w == nil || !w.Listener.Equal(listener) || string(w.Handback) != "warn" || w.MinWarning != 5*time.Minute || w.NextSeq != 42 {
		t.Errorf("warning listener %+v", w)
	}
	if r := info.RenewalFailure; r == nil || !r.Listener.Equal(listener) || string(r.Handback) != "fail" {
		t.Errorf("failure listener %+v", r)
	}
	if err := set.ClearExpirationWarningListener(ctx); err != nil {
		t.Fatal(err)
	}
	if err := set.ClearRenewalFailureListener(ctx); err != nil {
		t.Fatal(err)
	}
	if info, err := set.Info(ctx); err != nil || info.ExpirationWarning != nil || info.RenewalFailure != nil {
		t.Errorf("after clearing: %+v, %v", info, err)
	}

	// The service's errors keep their kind through the connection.
	gone, err := rs.Set(ctx, djinn.NewID())
	if !errors.Is(err, djinn.ErrNoSuchObject) || gone != nil {
		t.Errorf("unknown set: %v, %v; want no such object", gone, err)
	}
	f.mu.Lock()
	delete(f.sets, set.ID())
	f.mu.Unlock()
	for name, call := range map[string]func() error{
		"renewFor":  func() error { return set.RenewForDesired(ctx, l, time.Hour) },
		"remove":    func() error { _, err := set.Remove(ctx, l); return err },
		"getLeases": func() error { _, err := set.Leases(ctx); return err },
		"info":      func() error { _, err := set.Info(ctx); return err },
		"clear":     func() error { return set.ClearRenewalFailureListener(ctx) },
	} {
		if err := call(); !errors.Is(err, djinn.ErrNoSuchObject) {
			t.Errorf("LR.2 %s on a destroyed set: %v, want no such object", name, err)
		}
	}
}

// TestRenewalLeasesPages (LR.2 getLeases): Leases reads a set's leases a
// page at a time, each request asking for the most a page holds after
// the last page's next, and returns them all; a service whose pages do
// not move on is an error, not a loop. Before, one request asked for
// every lease, which a set of many could not answer in a message.
func TestRenewalLeasesPages(t *testing.T) {
	f, rs := startFake(t)
	ctx := context.Background()
	set, err := rs.CreateSet(ctx, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	for i := range 5 {
		f.reply[set.ID()] = append(f.reply[set.ID()], &djinnpb.ClientLease{Lease: testLease(time.Now().Add(time.Hour)).Proto(time.Now()),
			DesiredExpirationUnixNanos: int64(i + 1), RenewDurationNanos: int64(time.Minute)})
	}
	f.page = 2
	f.mu.Unlock()
	leases, err := set.Leases(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(leases) != 5 {
		t.Fatalf("%d leases from pages of 2, want 5", len(leases))
	}
	for i, c := range leases {
		if c.Desired.UnixNano() != int64(i+1) {
			t.Errorf("lease %d desired %d, want %d: the pages in order", i, c.Desired.UnixNano(), i+1)
		}
	}
	if got := strings.Count(strings.Join(f.Calls(), " "), "GetLeases"); got != 3 {
		t.Errorf("%d GetLeases calls for 5 leases in pages of 2, want 3", got)
	}
	if req := f.lastRequest("GetLeases").(*djinnpb.GetLeasesRequest); req.GetMax() != 100_000 || string(req.GetAfter()) != "\x04" {
		t.Errorf("last page asked with max %d after %x, want the most a page holds after the second page's next (04)", req.GetMax(), req.GetAfter())
	}

	f.mu.Lock()
	f.stuck = true
	f.mu.Unlock()
	if _, err := set.Leases(ctx); !errors.Is(err, djinn.ErrInternal) || !strings.Contains(err.Error(), "does not move on") {
		t.Errorf("pages that name the same next: %v, want an internal error saying the service does not move on", err)
	}
	// A next before the page's after would list leases again (or, going
	// back and forth, loop): pages come in key order, each next past the
	// last. Before, only a next equal to the after was refused.
	f.mu.Lock()
	f.stuck, f.back = false, true
	f.mu.Unlock()
	if ls, err := set.Leases(ctx); !errors.Is(err, djinn.ErrInternal) || !strings.Contains(err.Error(), "does not move on") {
		t.Errorf("a page whose next goes back before its after: %d leases, %v; want an internal error saying the service does not move on", len(ls), err)
	}
}

func TestRenewalNoConnector(t *testing.T) {
	rs := client.NewRenewalService(nil, "127.0.0.1:1")
	if _, err := rs.CreateSet(t.Context(), time.Minute); !errors.Is(err, djinn.ErrInvalidArgument) {
		t.Errorf("create set without a connector: %v", err)
	}
}

// renewalEvent builds a renewal set event of id with payload.
func renewalEvent(t testing.TB, id int64, payload proto.Message) *client.RemoteEvent {
	t.Helper()
	ev := &client.RemoteEvent{Source: testRef(), ID: id, Seq: 7, Handback: []byte("hb")}
	if payload != nil {
		a, err := anypb.New(payload)
		if err != nil {
			t.Fatal(err)
		}
		ev.Payload = a
	}
	return ev
}

func TestRenewalEvents(t *testing.T) {
	received := time.Now()
	l := client.NewLease(testRef(), djinn.NewID(), time.Unix(0, received.Add(time.Hour).UnixNano()))
	if err := l.SetSerialFormat(client.SerialAbsolute); err != nil {
		t.Fatal(err)
	}
	failure := &djinnpb.RenewalFailure{Lease: l.Proto(received), Error: &djinnpb.Error{Code: 5, Kind: string(djinn.UnknownLease), Message: "lease gone"}}

	t.Run("failure", func(t *testing.T) {
		ev := renewalEvent(t, client.RenewalFailureEventID, failure)
		got, err := client.RenewalFailureEventFrom(ev, received)
		if err != nil {
			t.Fatal(err)
		}
		if got.RemoteEvent != ev || !got.Lease.Equal(l) || !got.Lease.Expiration().Equal(l.Expiration()) ||
			!errors.Is(got.Err, djinn.ErrUnknownLease) || got.Err.Error() != "lease gone" {
			t.Errorf("got %+v", got)
		}
	})
	t.Run("failure without an error", func(t *testing.T) {
		got, err := client.RenewalFailureEventFrom(renewalEvent(t, client.RenewalFailureEventID, &djinnpb.RenewalFailure{Lease: l.Proto(received)}), received)
		if err != nil || got.Err != nil {
			t.Errorf("got %+v, %v; want no error in the event", got, err)
		}
	})
	t.Run("failure in the duration format", func(t *testing.T) {
		cookie := l.Cookie()
		pb := &djinnpb.RenewalFailure{Lease: &djinnpb.Lease{Landlord: client.RefToProto(l.Landlord()), Cookie: cookie[:], DurationNanos: int64(time.Minute)}}
		got, err := client.RenewalFailureEventFrom(renewalEvent(t, client.RenewalFailureEventID, pb), received)
		if err != nil || !got.Lease.Expiration().Equal(received.Add(time.Minute)) {
			t.Errorf("got %v, %v; want a lease expiring a minute after the event was received", got, err)
		}
	})
	t.Run("warning", func(t *testing.T) {
		ev := renewalEvent(t, client.ExpirationWarningEventID, &djinnpb.ExpirationWarning{SetLease: l.Proto(received)})
		got, err := client.ExpirationWarningEventFrom(ev, received)
		if err != nil {
			t.Fatal(err)
		}
		if got.RemoteEvent != ev || !got.SetLease.Equal(l) || !got.SetLease.Expiration().Equal(l.Expiration()) {
			t.Errorf("got %+v", got)
		}
	})

	for _, tt := range []struct {
		name    string
		ev      *client.RemoteEvent
		warning bool // decode as a warning, else as a failure
		want    string
	}{
		{"nil failure", nil, false, "renewal failure event: missing"},
		{"nil warning", nil, true, "expiration warning event: missing"},
		{"failure with the warning id", renewalEvent(t, client.ExpirationWarningEventID, failure), false, "event id 1"},
		{"warning with the failure id", renewalEvent(t, client.RenewalFailureEventID, &djinnpb.ExpirationWarning{}), true, "event id 0"},
		{"failure without payload", renewalEvent(t, client.RenewalFailureEventID, nil), false, "payload: missing"},
		{"warning without payload", renewalEvent(t, client.ExpirationWarningEventID, nil), true, "payload: missing"},
		{"failure with a warning payload", renewalEvent(t, client.RenewalFailureEventID, &djinnpb.ExpirationWarning{}), false, "djinn.v1.ExpirationWarning"},
		{"warning with a failure payload", renewalEvent(t, client.ExpirationWarningEventID, failure), true, "djinn.v1.RenewalFailure"},
		{"failure without lease", renewalEvent(t, client.RenewalFailureEventID, &djinnpb.RenewalFailure{}), false, "client lease: missing"},
		{"warning without lease", renewalEvent(t, client.ExpirationWarningEventID, &djinnpb.ExpirationWarning{}), true, "set lease: missing"},
		{"failure with a short cookie", renewalEvent(t, client.RenewalFailureEventID, &djinnpb.RenewalFailure{
			Lease: &djinnpb.Lease{Landlord: client.RefToProto(l.Landlord()), Cookie: []byte{1}}}), false, "cookie: 1 bytes"},
		{"failure with garbage", &client.RemoteEvent{Source: testRef(), ID: client.RenewalFailureEventID,
			Payload: &anypb.Any{TypeUrl: "type.googleapis.com/djinn.v1.RenewalFailure", Value: []byte{0xff, 0xff}}}, false, "payload"},
		{"warning with garbage", &client.RemoteEvent{Source: testRef(), ID: client.ExpirationWarningEventID,
			Payload: &anypb.Any{TypeUrl: "type.googleapis.com/djinn.v1.ExpirationWarning", Value: []byte{0x0a, 0x05}}}, true, "payload"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var err error
			if tt.warning {
				_, err = client.ExpirationWarningEventFrom(tt.ev, received)
			} else {
				_, err = client.RenewalFailureEventFrom(tt.ev, received)
			}
			if !errors.Is(err, djinn.ErrInvalidArgument) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want invalid argument naming %q", err, tt.want)
			}
		})
	}
}

// FuzzRenewalEvent feeds both renewal event decoders any event id, payload
// type and payload bytes: they answer with an event or an invalid argument
// error, and never panic.
func FuzzRenewalEvent(f *testing.F) {
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	l := client.NewLease(djinn.Ref{Endpoint: "127.0.0.1:4161", Service: djinn.ID{1}, Object: djinn.ID{2}}, djinn.ID{3}, now.Add(time.Hour))
	seed := func(id int64, m proto.Message) {
		a, err := anypb.New(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(id, a.GetTypeUrl(), a.GetValue())
	}
	seed(client.RenewalFailureEventID, &djinnpb.RenewalFailure{Lease: l.Proto(now), Error: &djinnpb.Error{Code: 5, Kind: "UNKNOWN_LEASE", Message: "gone"}})
	seed(client.RenewalFailureEventID, &djinnpb.RenewalFailure{Lease: l.Proto(now)})
	seed(client.RenewalFailureEventID, &djinnpb.RenewalFailure{Lease: &djinnpb.Lease{Landlord: client.RefToProto(l.Landlord()), Cookie: []byte{1}}})
	seed(client.ExpirationWarningEventID, &djinnpb.ExpirationWarning{SetLease: l.Proto(now)})
	seed(client.ExpirationWarningEventID, &djinnpb.ExpirationWarning{SetLease: &djinnpb.Lease{Format: 7}})
	seed(client.ExpirationWarningEventID, &djinnpb.RenewalFailure{})
	f.Add(int64(0), "", []byte(nil))
	f.Add(int64(-1), "type.googleapis.com/djinn.v1.RenewalFailure", []byte{0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, id int64, typeURL string, value []byte) {
		ev := &client.RemoteEvent{Source: l.Landlord(), ID: id, Payload: &anypb.Any{TypeUrl: typeURL, Value: value}}
		check := func(what string, got any, err error) {
			if err != nil && !errors.Is(err, djinn.ErrInvalidArgument) {
				t.Fatalf("%s: error of kind %v: %v", what, djinn.KindOf(err), err)
			}
			if (err == nil) == (got == nil) {
				t.Fatalf("%s: got %v and error %v", what, got, err)
			}
		}
		fe, err := client.RenewalFailureEventFrom(ev, now)
		if err == nil {
			if fe.Lease == nil || fe.RemoteEvent != ev {
				t.Fatalf("failure event %+v without its lease or event", fe)
			}
			check("failure", fe, nil)
		} else {
			check("failure", nil, err)
		}
		we, err := client.ExpirationWarningEventFrom(ev, now)
		if err == nil {
			if we.SetLease == nil || we.RemoteEvent != ev {
				t.Fatalf("warning event %+v without its lease or event", we)
			}
			check("warning", we, nil)
		} else {
			check("warning", nil, err)
		}
		if fe != nil && we != nil {
			t.Fatalf("event id %d decoded as both kinds", id)
		}
	})
}

// ExampleRenewalService: a program about to go away hands the lease of its
// mailbox registration to the lease renewal service, and asks for the
// warning that the set's own lease is running out to be stored in the
// mailbox too. When it comes back it reads the mailbox, and renews the
// set's lease.
func ExampleRenewalService() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	addr, stop := exampleServer(ctx) // djinn serve listens on 127.0.0.1:4161
	defer stop()
	c, err := client.Dial(ctx, addr)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	reg, err := c.Mailbox().Register(ctx, time.Hour)
	if err != nil {
		log.Fatal(err)
	}
	set, err := c.RenewalService().CreateSet(ctx, 24*time.Hour)
	if err != nil {
		log.Fatal(err)
	}
	// Keep the registration for a week, renewing it an hour at a time.
	if err := set.RenewFor(ctx, reg.Lease, 7*24*time.Hour, time.Hour); err != nil {
		log.Fatal(err)
	}
	// Warn two days before the set's lease ends: as the lease is of one
	// day, the warning comes at once, which lets this example show it.
	if _, err := set.SetExpirationWarningListener(ctx, reg.Listener, 48*time.Hour, []byte("renew the set")); err != nil {
		log.Fatal(err)
	}
	if _, err := set.SetRenewalFailureListener(ctx, reg.Listener, nil); err != nil {
		log.Fatal(err)
	}

	// Later, back again (with reg.ID and set.ID() kept): the first
	// expiration warning in the mailbox names the set's lease.
	for se, err := range reg.Pull(ctx, 0) {
		if err != nil {
			log.Fatal(err)
		}
		w, err := client.ExpirationWarningEventFrom(se.Event, time.Now())
		if err != nil {
			continue // another kind of event: a renewal failure
		}
		fmt.Printf("warning: %s, for the set's lease: %v\n", w.Handback, w.SetLease.Equal(set.Lease()))
		if err := w.SetLease.Renew(ctx, c, 24*time.Hour); err != nil {
			log.Fatal(err)
		}
		break
	}
	// Output:
	// warning: renew the set, for the set's lease: true
}
