package server_test

import (
	"math"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

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
	}{
		{"commit -1ns", -1},
		{"commit min int64", math.MinInt64},
		{"abort -1ns", -1},
		{"abort min int64", math.MinInt64},
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
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "waitFor") {
			t.Errorf("%s: %v, want InvalidArgument naming waitFor", tt.name, err)
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

