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
