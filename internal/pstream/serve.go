// Package pstream carries a manager's calls to a participant — prepare,
// prepareAndCommit, commit, abort (TX.2.6) — over one gRPC stream,
// TransactionParticipant/Calls, instead of a unary call each: every call
// names an id of the manager's choosing and its answer comes back with it
// as soon as it is ready, in any order, so one stream carries as many
// calls at once as the manager has.
//
// Serve is the participant's side, used by participant.Server and by
// djinn serve's participant service; Caller is the manager's. A
// participant that does not serve the stream answers UNIMPLEMENTED, and
// Caller then makes the unary calls.
package pstream

import (
	"context"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/grpcerr"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// MaxInFlight bounds the calls of one stream a participant works on at
// once, each on a goroutine of the stream's, started as needed and kept
// until the stream ends; past it (and past receiveAhead calls read and
// waiting) the participant reads no more until one is answered, and
// gRPC's flow control holds the manager back.
const MaxInFlight = 256

// receiveAhead bounds the calls of a stream read and waiting to be handed
// to its goroutines.
const receiveAhead = 64

// Handler makes one call: the vote for a prepare or prepareAndCommit, 0
// for a commit or abort, or an error with its djinn kind. ctx ends with
// the stream.
type Handler func(ctx context.Context, op djinnpb.ParticipantOp, req *djinnpb.ParticipantRequest) (djinnpb.TransactionState, error)

// Serve answers the calls of one stream with handle until the manager
// ends the stream, it breaks, or stop is closed (the participant is
// shutting down: the stream ends Unavailable, and the manager calls again
// later), working on up to MaxInFlight of them at once. A call that names
// no known operation, no transaction or, as the stream's first, no
// manager is answered INVALID_ARGUMENT, alone; a call without a manager
// stands for the last one the stream named. Serve returns once every call
// it took has been answered or, at stop, abandoned. stop may be nil.
func Serve(stream grpc.BidiStreamingServer[djinnpb.ParticipantCall, djinnpb.ParticipantAnswer], handle Handler, stop <-chan struct{}) error {
	ctx, cancel := context.WithCancel(stream.Context())
	s := &server{stream: stream, handle: handle, ctx: ctx, work: make(chan task)}
	defer func() {
		cancel()
		close(s.work)
		s.wg.Wait()
	}()
	// Buffered: the receiving goroutine reads on while this loop hands
	// calls out, rather than both meeting once per call. What is read
	// and not yet handed out when the stream ends is dropped, as a call
	// still in Recv is: the manager hears the stream end, and calls again.
	calls := make(chan *djinnpb.ParticipantCall, receiveAhead)
	go receive(ctx, stream, calls)
	for {
		var call *djinnpb.ParticipantCall
		select {
		case call = <-calls:
		case <-ctx.Done():
			return nil // the stream ended
		case <-stop:
			return status.Error(codes.Unavailable, "the participant is shutting down; call again")
		}
		if call == nil {
			return nil // the manager ended the stream, or it broke
		}
		req, err := s.request(call)
		if err != nil {
			s.answer(call.GetCall(), 0, err)
			continue
		}
		s.dispatch(task{call.GetCall(), call.GetOp(), req})
	}
}

// receive hands the stream's calls to Serve, and a nil call when it ends.
func receive(ctx context.Context, stream grpc.BidiStreamingServer[djinnpb.ParticipantCall, djinnpb.ParticipantAnswer], calls chan<- *djinnpb.ParticipantCall) {
	for {
		call, err := stream.Recv()
		if err != nil {
			call = nil
		}
		select {
		case calls <- call:
		case <-ctx.Done():
			return
		}
		if call == nil {
			return
		}
	}
}

type server struct {
	stream grpc.BidiStreamingServer[djinnpb.ParticipantCall, djinnpb.ParticipantAnswer]
	handle Handler
	ctx    context.Context // the calls': ends with the stream, or at stop
	// work hands calls to the stream's idle goroutines; started counts
	// them (only the receiving loop touches it).
	work    chan task
	started int
	wg      sync.WaitGroup
	// manager is the last manager the stream named; only the receiving
	// loop uses it.
	manager *djinnpb.Ref
	sendMu  sync.Mutex
}

// request checks a call and gives its request the stream's manager when
// it names none.
func (s *server) request(call *djinnpb.ParticipantCall) (*djinnpb.ParticipantRequest, error) {
	switch call.GetOp() {
	case djinnpb.ParticipantOp_PARTICIPANT_OP_PREPARE, djinnpb.ParticipantOp_PARTICIPANT_OP_PREPARE_AND_COMMIT,
		djinnpb.ParticipantOp_PARTICIPANT_OP_COMMIT, djinnpb.ParticipantOp_PARTICIPANT_OP_ABORT:
	default:
		return nil, djinn.Errorf(djinn.InvalidArgument, "participant call %d: operation %v is none of prepare, commit, abort, prepareAndCommit", call.GetCall(), call.GetOp())
	}
	req := call.GetRequest()
	switch {
	case req == nil:
		return nil, djinn.Errorf(djinn.InvalidArgument, "participant call %d: no request: name the participant and the transaction", call.GetCall())
	case req.GetManager() != nil:
		s.manager = req.GetManager()
		return req, nil
	case s.manager == nil:
		return nil, djinn.Errorf(djinn.InvalidArgument, "participant call %d: no manager, and none named before on this stream: name it in the stream's first call", call.GetCall())
	}
	return &djinnpb.ParticipantRequest{ParticipantId: req.GetParticipantId(), Manager: s.manager, Id: req.GetId(), Secret: req.GetSecret()}, nil
}

// task is a call to make.
type task struct {
	id  uint64
	op  djinnpb.ParticipantOp
	req *djinnpb.ParticipantRequest
}

// dispatch gives t to an idle goroutine, or a new one while there are
// fewer than MaxInFlight, or else waits for one to be free.
func (s *server) dispatch(t task) {
	select {
	case s.work <- t:
		return
	default:
	}
	if s.started < MaxInFlight {
		s.started++
		s.wg.Add(1)
		go s.worker(t)
		return
	}
	select {
	case s.work <- t:
	case <-s.ctx.Done():
	}
}

// worker makes calls until the stream ends.
func (s *server) worker(t task) {
	defer s.wg.Done()
	for {
		vote, err := s.handle(s.ctx, t.op, t.req)
		if err == nil || s.ctx.Err() == nil {
			// A call cut short by the stream's end is not answered: the
			// manager hears the stream end, and calls again.
			s.answer(t.id, vote, err)
		}
		var ok bool
		if t, ok = <-s.work; !ok {
			return
		}
	}
}

// answer sends a call's answer; a stream that broke meanwhile takes none,
// and the manager asks again.
func (s *server) answer(id uint64, vote djinnpb.TransactionState, err error) {
	a := &djinnpb.ParticipantAnswer{Call: id, Vote: vote, Error: grpcerr.ToProto(err)}
	if err != nil {
		a.Vote = 0
	}
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	_ = s.stream.Send(a)
}
