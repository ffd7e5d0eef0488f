package pstream

import (
	"context"
	"io"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/grpcerr"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// fakeStream is a participant's end of a Calls stream: it receives calls
// from a list and keeps the answers.
type fakeStream struct {
	grpc.ServerStream
	ctx     context.Context
	calls   []*djinnpb.ParticipantCall
	mu      sync.Mutex
	answers map[uint64]*djinnpb.ParticipantAnswer
}

func (f *fakeStream) Context() context.Context { return f.ctx }

func (f *fakeStream) Recv() (*djinnpb.ParticipantCall, error) {
	if len(f.calls) == 0 {
		return nil, io.EOF
	}
	c := f.calls[0]
	f.calls = f.calls[1:]
	return c, nil
}

func (f *fakeStream) Send(a *djinnpb.ParticipantAnswer) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.answers[a.GetCall()] = a
	return nil
}

// echo answers a prepare with PREPARED, naming nothing wrong, and records
// the manager each call came with.
type echo struct {
	mu       sync.Mutex
	managers map[uint64]string
}

func (e *echo) handle(_ context.Context, _ djinnpb.ParticipantOp, req *djinnpb.ParticipantRequest) (djinnpb.TransactionState, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.managers[req.GetId()] = req.GetManager().GetEndpoint()
	return djinnpb.TransactionState_TRANSACTION_STATE_PREPARED, nil
}

func serveCalls(t *testing.T, calls ...*djinnpb.ParticipantCall) (map[uint64]*djinnpb.ParticipantAnswer, *echo) {
	t.Helper()
	f := &fakeStream{ctx: t.Context(), calls: calls, answers: map[uint64]*djinnpb.ParticipantAnswer{}}
	e := &echo{managers: map[uint64]string{}}
	if err := Serve(f, e.handle, nil); err != nil {
		t.Fatal(err)
	}
	return f.answers, e
}

func pcall(id uint64, op djinnpb.ParticipantOp, m *djinnpb.Ref) *djinnpb.ParticipantCall {
	return &djinnpb.ParticipantCall{Call: id, Op: op, Request: &djinnpb.ParticipantRequest{ParticipantId: []byte("p"), Manager: m, Id: id}}
}

// A call without a manager stands for the stream's last; the stream's
// first must name one. A call with no known operation or no request is
// refused alone, naming what is missing; the others are answered.
func TestServeChecksEachCall(t *testing.T) {
	prepare := djinnpb.ParticipantOp_PARTICIPANT_OP_PREPARE
	m1, m2 := &djinnpb.Ref{Endpoint: "m1:1"}, &djinnpb.Ref{Endpoint: "m2:1"}
	answers, e := serveCalls(t,
		pcall(1, prepare, nil), // no manager yet
		pcall(2, prepare, m1),  // names m1
		pcall(3, djinnpb.ParticipantOp_PARTICIPANT_OP_COMMIT, nil), // m1
		pcall(4, djinnpb.ParticipantOp(9), m1),                     // unknown operation
		&djinnpb.ParticipantCall{Call: 5, Op: prepare},             // no request
		pcall(6, prepare, m2),                                      // names m2
		pcall(7, djinnpb.ParticipantOp_PARTICIPANT_OP_ABORT, nil),  // m2
	)
	for id, want := range map[uint64]string{1: "no manager", 4: "operation 9", 5: "no request"} {
		err := grpcerr.FromProto(answers[id].GetError())
		if djinn.KindOf(err) != djinn.InvalidArgument || !strings.Contains(err.Error(), want) {
			t.Errorf("call %d: %v, want InvalidArgument naming %q", id, err, want)
		}
	}
	for id, want := range map[uint64]string{2: "m1:1", 3: "m1:1", 6: "m2:1", 7: "m2:1"} {
		if a := answers[id]; a.GetError() != nil || e.managers[id] != want {
			t.Errorf("call %d: answer %v, manager %q; want answered for %s", id, a, e.managers[id], want)
		}
	}
	if len(answers) != 7 {
		t.Errorf("%d answers, want one per call", len(answers))
	}
}

// FuzzServeCall: whatever a call's bytes decode to, the participant's
// side answers it — a refusal naming the call, or the handler's answer —
// and never panics.
func FuzzServeCall(f *testing.F) {
	for _, c := range []*djinnpb.ParticipantCall{
		pcall(1, djinnpb.ParticipantOp_PARTICIPANT_OP_PREPARE, &djinnpb.Ref{Endpoint: "m:1"}),
		pcall(2, djinnpb.ParticipantOp_PARTICIPANT_OP_COMMIT, nil),
		{Call: 3, Op: djinnpb.ParticipantOp(42)},
		{},
	} {
		b, err := proto.Marshal(c)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var c djinnpb.ParticipantCall
		if err := proto.Unmarshal(b, &c); err != nil {
			return // gRPC refuses it before Serve sees it
		}
		answers, _ := serveCalls(t, &c)
		a, ok := answers[c.GetCall()]
		if !ok || len(answers) != 1 {
			t.Fatalf("call %v: answers %v, want one", &c, answers)
		}
		if e := a.GetError(); e != nil && djinn.Kind(e.GetKind()) != djinn.InvalidArgument {
			t.Fatalf("call %v refused as %s, want InvalidArgument", &c, e.GetKind())
		}
	})
}

// While every worker is busy, the stream is still read: up to
// receiveAhead calls wait read, and each is answered once the workers are
// free. (A handler here holds its call until the stream has been read to
// the end, which needs the calls read ahead.)
func TestServeReadsAheadWhileWorkersAreBusy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		prepare := djinnpb.ParticipantOp_PARTICIPANT_OP_PREPARE
		m := &djinnpb.Ref{Endpoint: "m:1"}
		n := MaxInFlight + 1 + receiveAhead // the workers', one being handed out, the read-ahead
		calls := make([]*djinnpb.ParticipantCall, n)
		for i := range calls {
			calls[i] = pcall(uint64(i+1), prepare, m)
		}
		read := make(chan struct{})
		f := &readStream{fakeStream: fakeStream{ctx: t.Context(), calls: calls, answers: map[uint64]*djinnpb.ParticipantAnswer{}}, read: read}
		hold := func(context.Context, djinnpb.ParticipantOp, *djinnpb.ParticipantRequest) (djinnpb.TransactionState, error) {
			<-read
			return djinnpb.TransactionState_TRANSACTION_STATE_PREPARED, nil
		}
		if err := Serve(f, hold, nil); err != nil {
			t.Fatal(err)
		}
		if len(f.answers) != n {
			t.Fatalf("%d answers, want one per call (%d)", len(f.answers), n)
		}
		for id, a := range f.answers {
			if a.GetError() != nil || a.GetVote() != djinnpb.TransactionState_TRANSACTION_STATE_PREPARED {
				t.Errorf("call %d: answer %v, want PREPARED", id, a)
			}
		}
	})
}

// readStream is a fakeStream that closes read once its calls were all read.
type readStream struct {
	fakeStream
	read chan struct{}
}

func (r *readStream) Recv() (*djinnpb.ParticipantCall, error) {
	c, err := r.fakeStream.Recv()
	if err != nil && r.read != nil {
		close(r.read)
		r.read = nil
	}
	return c, err
}
