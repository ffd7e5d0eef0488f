package server_test

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/djinn-go/djinn/internal/grpcerr"
	"github.com/djinn-go/djinn/internal/server/servertest"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// TestCompleteRefusesNegativeWaitFor (TX.2.5, DESIGN.md 8): a commit or
// abort whose waitFor is negative is refused before it does anything —
// answered InvalidArgument naming the value, the transaction still ACTIVE
// — not carried out and then answered as if refused.
func TestCompleteRefusesNegativeWaitFor(t *testing.T) {
	t.Parallel()
	srv := servertest.Start(t, servertest.Config(t))
	tm := djinnpb.NewTransactionManagerClient(unaryConn(t, srv.Addr()))
	ctx := testContext(t)
	for _, tt := range []struct {
		name    string
		waitFor int64
		named   string // as the error names it
	}{
		// -1ns is no Any (a lease duration's): it is named as sent.
		{"commit -1ns", -1, "waitFor -1ns"},
		{"commit min int64", math.MinInt64, "waitFor -2562047h47m16.854775808s"},
		{"abort -1ns", -1, "waitFor -1ns"},
		{"abort min int64", math.MinInt64, "waitFor -2562047h47m16.854775808s"},
	} {
		created, err := tm.Create(ctx, &djinnpb.CreateTransactionRequest{LeaseDurationNanos: int64(time.Minute)})
		if err != nil {
			t.Fatal(err)
		}
		req := &djinnpb.CompleteTransactionRequest{Id: created.GetId(), WaitForNanos: &tt.waitFor}
		if strings.HasPrefix(tt.name, "commit") {
			_, err = tm.Commit(ctx, req)
		} else {
			_, err = tm.Abort(ctx, req)
		}
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tt.named) {
			t.Errorf("%s: %v, want InvalidArgument naming %q", tt.name, err, tt.named)
		}
		st, err := tm.GetState(ctx, &djinnpb.TransactionRequest{Id: created.GetId(), Secret: created.GetSecret()})
		if err != nil {
			t.Fatal(err)
		}
		if st.GetState() != djinnpb.TransactionState_TRANSACTION_STATE_ACTIVE {
			t.Errorf("%s: refused, yet the transaction is %v; want it ACTIVE", tt.name, st.GetState())
		}
	}
}

// TestPromoteChecksParticipants (TX.2.2, DESIGN.md 8): Promote refuses a
// participant reference Join would refuse — a service or object id not of
// 16 bytes, missing; a drop reference with such an id — naming it, instead
// of recording a participant no call can reach (and whose key, cut to 16
// bytes, could stand for another).
func TestPromoteChecksParticipants(t *testing.T) {
	t.Parallel()
	srv := servertest.Start(t, servertest.Config(t))
	tm := djinnpb.NewTransactionManagerClient(unaryConn(t, srv.Addr()))
	ctx := testContext(t)
	good := func() *djinnpb.Ref { return anyListener() }
	for _, tt := range []struct {
		name string
		edit func(*djinnpb.PromoteRequest)
		want string
	}{
		{"service id missing", func(r *djinnpb.PromoteRequest) { r.Participants[0].ServiceId = nil }, "participant 0 service id: missing"},
		{"service id 17 bytes", func(r *djinnpb.PromoteRequest) { r.Participants[0].ServiceId = make([]byte, 17) }, "participant 0 service id: 17 bytes"},
		{"object id missing", func(r *djinnpb.PromoteRequest) { r.Participants[0].ObjectId = nil }, "participant 0 object id: missing"},
		{"object id 15 bytes", func(r *djinnpb.PromoteRequest) { r.Participants[0].ObjectId = make([]byte, 15) }, "participant 0 object id: 15 bytes"},
		{"second participant's object id 1 MB", func(r *djinnpb.PromoteRequest) {
			p := good()
			p.ObjectId = make([]byte, 1<<20)
			r.Participants, r.CrashCounts = append(r.Participants, p), append(r.CrashCounts, 1)
		}, "participant 1 object id: 1048576 bytes"},
		{"drop's service id 17 bytes", func(r *djinnpb.PromoteRequest) {
			r.Drop = good()
			r.Drop.ServiceId = make([]byte, 17)
		}, "drop service id: 17 bytes"},
	} {
		created, err := tm.Create(ctx, &djinnpb.CreateTransactionRequest{LeaseDurationNanos: int64(time.Minute)})
		if err != nil {
			t.Fatal(err)
		}
		req := &djinnpb.PromoteRequest{Id: created.GetId(), Secret: created.GetSecret(), Participants: []*djinnpb.Ref{good()}, CrashCounts: []int64{1}}
		tt.edit(req)
		_, err = tm.Promote(ctx, req)
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want InvalidArgument naming %q", tt.name, err, tt.want)
		}
		d, err := tm.Describe(ctx, &djinnpb.TransactionRequest{Id: created.GetId(), Secret: created.GetSecret()})
		if err != nil {
			t.Fatal(err)
		}
		if n := len(d.GetParticipants()); n != 0 {
			t.Errorf("%s: the transaction has %d participants after the call, want 0", tt.name, n)
		}
	}
}

// TestAddUnknownEventsChecksSources (EM.4.1, DESIGN.md 8): an unknown
// event whose source ids are not 16 bytes is refused naming them. Taken,
// its key — the ids cut or padded to 16 bytes — could stand for another
// source: the mailbox would drop that source's stored events, and refuse
// its next ones, for a key the caller never meant.
func TestAddUnknownEventsChecksSources(t *testing.T) {
	t.Parallel()
	srv := servertest.Start(t, servertest.Config(t))
	conn := unaryConn(t, srv.Addr())
	mb, el := djinnpb.NewEventMailboxClient(conn), djinnpb.NewEventListenerClient(conn)
	ctx := testContext(t)
	src := anyListener()
	for _, tt := range []struct {
		name string
		edit func(*djinnpb.Ref)
		want string
	}{
		{"service id 17 bytes", func(r *djinnpb.Ref) { r.ServiceId = append(r.ServiceId, 0) }, "unknown event 0 source service id: 17 bytes"},
		{"object id 17 bytes", func(r *djinnpb.Ref) { r.ObjectId = append(r.ObjectId, 0) }, "unknown event 0 source object id: 17 bytes"},
		{"service id missing", func(r *djinnpb.Ref) { r.ServiceId = nil }, "unknown event 0 source service id: missing"},
		{"object id 8 bytes", func(r *djinnpb.Ref) { r.ObjectId = r.ObjectId[:8] }, "unknown event 0 source object id: 8 bytes"},
	} {
		reg, err := mb.Register(ctx, &djinnpb.MailboxRegisterRequest{LeaseDurationNanos: int64(time.Minute)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := el.Notify(ctx, &djinnpb.NotifyRequest{ListenerId: reg.GetListener().GetObjectId(),
			Event: &djinnpb.RemoteEvent{Source: src, EventId: 7, Sequence: 1}}); err != nil {
			t.Fatal(err)
		}
		bad := proto.Clone(src).(*djinnpb.Ref)
		tt.edit(bad)
		_, err = mb.AddUnknownEvents(ctx, &djinnpb.AddUnknownEventsRequest{RegistrationId: reg.GetRegistrationId(),
			Events: []*djinnpb.EventKey{{Source: bad, EventId: 7}}})
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want InvalidArgument naming %q", tt.name, err, tt.want)
		}
		got, err := mb.GetRegistration(ctx, &djinnpb.MailboxRegistrationRequest{RegistrationId: reg.GetRegistrationId()})
		if err != nil {
			t.Fatal(err)
		}
		if got.GetStoredEvents() != 1 || len(got.GetUnknownEvents()) != 0 {
			t.Errorf("%s: after the call %d events stored and %d unknown, want 1 and 0", tt.name, got.GetStoredEvents(), len(got.GetUnknownEvents()))
		}
	}
}

// TestHandbacksAreBounded (EV.2.3.2; DESIGN.md: handbacks are opaque,
// size-capped bytes): every registration that takes a handback — the
// lookup service's Notify, the lookup discovery service's Register, the
// renewal service's listeners — refuses one over 64 KiB naming its size,
// and takes one of 64 KiB. Each event carries the handback back, and the
// log and every member keep it as long as the registration lives.
func TestHandbacksAreBounded(t *testing.T) {
	t.Parallel()
	srv := servertest.Start(t, servertest.Config(t))
	conn := unaryConn(t, srv.Addr())
	ctx := testContext(t)
	lk, ld, rs := djinnpb.NewLookupServiceClient(conn), djinnpb.NewLookupDiscoveryServiceClient(conn), djinnpb.NewLeaseRenewalServiceClient(conn)
	set, err := rs.CreateSet(ctx, &djinnpb.CreateSetRequest{LeaseDurationNanos: int64(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		call func(handback []byte) error
	}{
		{"lookup Notify", func(h []byte) error {
			_, err := lk.Notify(ctx, &djinnpb.LookupNotifyRequest{Template: &djinnpb.ServiceTemplate{}, Transitions: 7, Listener: anyListener(), Handback: h, LeaseDurationNanos: int64(time.Minute)})
			return err
		}},
		{"lookup discovery Register", func(h []byte) error {
			_, err := ld.Register(ctx, &djinnpb.LDSRegisterRequest{Locators: []string{"jini://127.0.0.1:1"}, Listener: anyListener(), Handback: h, LeaseDurationNanos: int64(time.Minute)})
			return err
		}},
		{"renewal SetRenewalFailureListener", func(h []byte) error {
			_, err := rs.SetRenewalFailureListener(ctx, &djinnpb.SetRenewalFailureListenerRequest{SetId: set.GetSet().GetObjectId(), Listener: anyListener(), Handback: h})
			return err
		}},
	} {
		if err := tt.call(make([]byte, 64<<10)); err != nil {
			t.Errorf("%s with a handback of 64 KiB: %v, want it taken", tt.name, err)
		}
		for _, n := range []int{64<<10 + 1, 1 << 20} {
			err := tt.call(make([]byte, n))
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), fmt.Sprintf("handback of %d bytes", n)) {
				t.Errorf("%s with a handback of %d bytes: %v, want InvalidArgument naming its size", tt.name, n, err)
			}
		}
	}
}

// TestLockModeOutOfRange (CS lock modes, DESIGN.md 8): a lock mode the
// enum does not have is refused naming the number sent — proto enums are
// open, so 261 arrives as 261 — never cut to a byte and taken as another
// mode (261 was a write lock, 257 an intention-read one).
func TestLockModeOutOfRange(t *testing.T) {
	t.Parallel()
	srv := servertest.Start(t, servertest.Config(t))
	ls := djinnpb.NewLockServiceClient(unaryConn(t, srv.Addr()))
	ctx := testContext(t)
	set, holders := heldLockSet(ctx, t, ls, 2)
	free, err := ls.CreateSet(ctx, &djinnpb.CreateLockSetRequest{LeaseDurationNanos: int64(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	w := djinnpb.LockMode_LOCK_MODE_WRITE
	for _, tt := range []struct {
		name string
		call func() error
		want string
	}{
		{"lock 261", func() error {
			_, err := ls.Lock(ctx, &djinnpb.LockRequest{SetId: free.GetSetId(), Holder: holders[1], Mode: 256 + w})
			return err
		}, "mode 261"},
		{"lock -1", func() error {
			_, err := ls.Lock(ctx, &djinnpb.LockRequest{SetId: free.GetSetId(), Holder: holders[1], Mode: -1})
			return err
		}, "mode -1"},
		{"change mode to 257", func() error {
			_, err := ls.ChangeMode(ctx, &djinnpb.ChangeModeRequest{SetId: set.GetSetId(), Holder: holders[0], Held: w, Mode: 257})
			return err
		}, "mode 257"},
		{"change mode from 261", func() error {
			_, err := ls.ChangeMode(ctx, &djinnpb.ChangeModeRequest{SetId: set.GetSetId(), Holder: holders[0], Held: 256 + w, Mode: djinnpb.LockMode_LOCK_MODE_READ})
			return err
		}, "held mode 261"},
		{"unlock 261", func() error {
			_, err := ls.Unlock(ctx, &djinnpb.UnlockRequest{SetId: set.GetSetId(), Holder: holders[0], Mode: 256 + w})
			return err
		}, "mode 261"},
	} {
		if err := tt.call(); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tt.want+":") {
			t.Errorf("%s: %v, want InvalidArgument naming %s", tt.name, err, tt.want)
		}
	}
	// Nothing changed: the free set is free, the held one still held in W.
	d, err := ls.Describe(ctx, &djinnpb.LockSetRequest{SetId: free.GetSetId()})
	if err != nil {
		t.Fatal(err)
	}
	if len(d.GetHolders()) != 0 {
		t.Errorf("the free set after the refused calls: held by %v", d.GetHolders())
	}
	if _, err := ls.Unlock(ctx, &djinnpb.UnlockRequest{SetId: set.GetSetId(), Holder: holders[0], Mode: w}); err != nil {
		t.Errorf("the held write lock after the refused calls: %v", err)
	}
}

// TestCreateRefusesParentWithoutManager (TX.2.2): a Create that names a
// parent transaction (its id or its secret) but not the parent's manager
// is refused naming them — not answered with a top-level transaction,
// whose commit would not wait for the parent the caller meant.
func TestCreateRefusesParentWithoutManager(t *testing.T) {
	t.Parallel()
	srv := servertest.Start(t, servertest.Config(t))
	tm := djinnpb.NewTransactionManagerClient(unaryConn(t, srv.Addr()))
	ctx := testContext(t)
	parent, err := tm.Create(ctx, &djinnpb.CreateTransactionRequest{LeaseDurationNanos: int64(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		req  *djinnpb.CreateTransactionRequest
		want string
	}{
		{"parent id and secret", &djinnpb.CreateTransactionRequest{LeaseDurationNanos: int64(time.Minute), ParentId: parent.GetId(), ParentSecret: parent.GetSecret()},
			fmt.Sprintf("parent id %d and a parent secret of 16 bytes without a parent manager", parent.GetId())},
		{"parent id alone", &djinnpb.CreateTransactionRequest{LeaseDurationNanos: int64(time.Minute), ParentId: 7}, "parent id 7 and a parent secret of 0 bytes"},
		{"parent secret alone", &djinnpb.CreateTransactionRequest{LeaseDurationNanos: int64(time.Minute), ParentSecret: parent.GetSecret()}, "parent id 0 and a parent secret of 16 bytes"},
	} {
		_, err := tm.Create(ctx, tt.req)
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want InvalidArgument naming %q", tt.name, err, tt.want)
		}
	}
	list, err := tm.List(ctx, &djinnpb.ListTransactionsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(list.GetTransactions()); n != 1 {
		t.Errorf("after the refused calls the manager lists %d transactions, want the parent alone", n)
	}
}

// TestResumeAfterPastLastRefused (DESIGN.md 8: never silent loss): a pull
// or a delivery stream — one registration's or the shared form's — that
// resumes after an index past the last event stored is refused, naming
// both. Taken, the events stored next up to that index were skipped, and
// the first acknowledgement after them forgot them undelivered.
func TestResumeAfterPastLastRefused(t *testing.T) {
	t.Parallel()
	srv := servertest.Start(t, servertest.Config(t))
	conn := unaryConn(t, srv.Addr())
	mb, el := djinnpb.NewEventMailboxClient(conn), djinnpb.NewEventListenerClient(conn)
	ctx := testContext(t)
	reg, err := mb.Register(ctx, &djinnpb.MailboxRegisterRequest{LeaseDurationNanos: int64(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := el.Notify(ctx, &djinnpb.NotifyRequest{ListenerId: reg.GetListener().GetObjectId(),
		Event: &djinnpb.RemoteEvent{Source: anyListener(), EventId: 1, Sequence: 1}}); err != nil {
		t.Fatal(err)
	}
	id := reg.GetRegistrationId()
	want := "after index 5: past the last event stored for mailbox registration"
	for _, tt := range []struct {
		name string
		call func() error
	}{
		{"pull", func() error {
			s, err := mb.Pull(ctx, &djinnpb.PullRequest{RegistrationId: id, AfterIndex: 5})
			if err != nil {
				return err
			}
			_, err = s.Recv()
			return err
		}},
		{"delivery stream", func() error {
			s, err := mb.Deliveries(ctx)
			if err != nil {
				return err
			}
			if err := s.Send(&djinnpb.DeliveriesRequest{RegistrationId: id, AfterIndex: 5}); err != nil {
				return err
			}
			_, err = s.Recv()
			return err
		}},
		{"shared delivery stream", func() error {
			s, err := mb.Deliveries(ctx)
			if err != nil {
				return err
			}
			if err := s.Send(&djinnpb.DeliveriesRequest{Add: []*djinnpb.DeliveryCursor{{RegistrationId: id, AfterIndex: 5}}}); err != nil {
				return err
			}
			for {
				r, err := s.Recv()
				if err != nil {
					return err
				}
				for _, rd := range r.GetRegistrations() {
					if rd.GetEnded() {
						return grpcerr.Status(grpcerr.FromProto(rd.GetError()))
					}
				}
			}
		}},
	} {
		if err := tt.call(); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), want) {
			t.Errorf("%s after index 5, the last stored 1: %v, want InvalidArgument naming both", tt.name, err)
		}
	}
	// Resuming after the last one stored is fine: the next one comes.
	s, err := mb.Pull(ctx, &djinnpb.PullRequest{RegistrationId: id, AfterIndex: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := el.Notify(ctx, &djinnpb.NotifyRequest{ListenerId: reg.GetListener().GetObjectId(),
		Event: &djinnpb.RemoteEvent{Source: anyListener(), EventId: 1, Sequence: 2}}); err != nil {
		t.Fatal(err)
	}
	if r, err := s.Recv(); err != nil || len(r.GetEvents()) == 0 || r.GetEvents()[0].GetIndex() != 2 {
		t.Errorf("pull after the last index stored: %v, %v; want event 2 once stored", r, err)
	}
}

// TestUnknownEventsBounded (EM.4.1, DESIGN.md 8: bounded memory): the
// unknown-event list a caller grows with AddUnknownEvents holds at most
// 4096 keys — past that the call is refused and adds nothing; a key it
// holds already adds nothing — and a key's source endpoint at most 300
// bytes. Unbounded, every member kept it, and GetRegistration, which
// answers it whole, soon could not.
func TestUnknownEventsBounded(t *testing.T) {
	t.Parallel()
	srv := servertest.Start(t, servertest.Config(t))
	mb := djinnpb.NewEventMailboxClient(unaryConn(t, srv.Addr()))
	ctx := testContext(t)
	reg, err := mb.Register(ctx, &djinnpb.MailboxRegisterRequest{LeaseDurationNanos: int64(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	src := anyListener()
	keys := func(from, n int) []*djinnpb.EventKey {
		var out []*djinnpb.EventKey
		for i := range n {
			out = append(out, &djinnpb.EventKey{Source: src, EventId: int64(from + i)})
		}
		return out
	}
	add := func(ks []*djinnpb.EventKey) error {
		_, err := mb.AddUnknownEvents(ctx, &djinnpb.AddUnknownEventsRequest{RegistrationId: reg.GetRegistrationId(), Events: ks})
		return err
	}
	if err := add(keys(0, 4000)); err != nil {
		t.Fatal(err)
	}
	if err := add(keys(0, 4096)); err != nil { // 96 new ones: 4096 in all
		t.Fatalf("keys up to the bound: %v", err)
	}
	if err := add(keys(4096, 1)); status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "would hold 4097, at most 4096") {
		t.Errorf("a key past the bound: %v, want ResourceExhausted naming 4097", err)
	}
	if err := add(keys(10, 1)); err != nil {
		t.Errorf("a key held already, at the bound: %v", err)
	}
	long := proto.Clone(src).(*djinnpb.Ref)
	long.Endpoint = strings.Repeat("h", 296) + ":4160"
	if err := add([]*djinnpb.EventKey{{Source: long, EventId: 1}}); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "endpoint of 301 bytes") {
		t.Errorf("a source endpoint of 301 bytes: %v, want InvalidArgument naming its size", err)
	}
	got, err := mb.GetRegistration(ctx, &djinnpb.MailboxRegistrationRequest{RegistrationId: reg.GetRegistrationId()})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(got.GetUnknownEvents()); n != 4096 {
		t.Errorf("the registration lists %d unknown events, want 4096", n)
	}
}

// TestRefsHandedInAreChecked (DESIGN.md 8): a reference a client hands in
// — a transaction's participant, a lookup listener, a mailbox's delivery
// target — is refused InvalidArgument naming its endpoint when the
// endpoint is none a client could dial: a host with a space or a user
// name, a name in brackets, port 0. Such endpoints were taken before;
// stored then, they still replay (the state's own tests).
func TestRefsHandedInAreChecked(t *testing.T) {
	t.Parallel()
	srv := servertest.Start(t, servertest.Config(t))
	cc := unaryConn(t, srv.Addr())
	tm, ls, mb := djinnpb.NewTransactionManagerClient(cc), djinnpb.NewLookupServiceClient(cc), djinnpb.NewEventMailboxClient(cc)
	ctx := testContext(t)
	reg, err := mb.Register(ctx, &djinnpb.MailboxRegisterRequest{LeaseDurationNanos: int64(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	for _, endpoint := range []string{"exa mple.com:4160", "me@example.com:4160", "[example.com]:4160", "example.com:0", "example.com/x:4160", "ex\x00ample.com:4160"} {
		ref := anyListener()
		ref.Endpoint = endpoint
		created, err := tm.Create(ctx, &djinnpb.CreateTransactionRequest{LeaseDurationNanos: int64(time.Minute)})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			what string
			call func() error
		}{
			{"txn join", func() error {
				_, err := tm.Join(ctx, &djinnpb.JoinTransactionRequest{Id: created.GetId(), Secret: created.GetSecret(), Participant: ref, CrashCount: 1})
				return err
			}},
			{"txn promote", func() error {
				_, err := tm.Promote(ctx, &djinnpb.PromoteRequest{Id: created.GetId(), Secret: created.GetSecret(), Participants: []*djinnpb.Ref{ref}, CrashCounts: []int64{1}})
				return err
			}},
			{"lookup notify", func() error {
				_, err := ls.Notify(ctx, &djinnpb.LookupNotifyRequest{Template: &djinnpb.ServiceTemplate{}, Transitions: 1, Listener: ref, LeaseDurationNanos: int64(time.Minute)})
				return err
			}},
			{"mailbox enable", func() error {
				_, err := mb.EnableDelivery(ctx, &djinnpb.EnableDeliveryRequest{RegistrationId: reg.GetRegistrationId(), Target: ref})
				return err
			}},
		} {
			if err := c.call(); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), strconv.Quote(endpoint)) {
				t.Errorf("%s with endpoint %q: %v, want InvalidArgument naming it", c.what, endpoint, err)
			}
		}
	}
}
