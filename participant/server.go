package participant

import (
	"context"
	"sync"

	"google.golang.org/grpc"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/internal/grpcerr"
	"github.com/djinn-go/djinn/internal/pstream"
	"github.com/djinn-go/djinn/internal/wire"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// Server serves the TransactionParticipant gRPC service (TX.2.3) for the
// participants added to it, on any gRPC server: a call goes to the
// participant whose object id it names, and one for an object not here
// gets djinn.ErrNoSuchObject. Errors travel with their djinn kinds
// (converted here, whatever the gRPC server's interceptors), so the manager
// tells UnknownTransaction from a failure. Besides the unary calls it
// serves Calls, the stream on which a djinn manager sends them all, many
// at once. It is safe for concurrent use.
type Server struct {
	djinnpb.UnimplementedTransactionParticipantServer

	mu    sync.RWMutex
	parts map[djinn.ID]*Participant // guarded by mu

	stop     chan struct{} // closed by Shutdown
	stopOnce sync.Once
}

var _ djinnpb.TransactionParticipantServer = (*Server)(nil)

// NewServer returns a server with no participants.
func NewServer() *Server {
	return &Server{parts: map[djinn.ID]*Participant{}, stop: make(chan struct{})}
}

// Shutdown ends the Calls streams managers hold open to s (their calls
// under way are abandoned; the managers call again, elsewhere or later),
// so that a graceful stop of the gRPC server does not wait for them: call
// it before GracefulStop. Unary calls are served on.
func (s *Server) Shutdown() { s.stopOnce.Do(func() { close(s.stop) }) }

// Register registers the service on g. Make g with client.ServerKeepalive,
// so that it accepts the keepalive pings of the managers' connections
// (gRPC's default policy closes an idle connection after a few).
func (s *Server) Register(g grpc.ServiceRegistrar) {
	djinnpb.RegisterTransactionParticipantServer(g, s)
}

// Add serves p, replacing a participant with the same object id (one
// restarted in this process).
func (s *Server) Add(p *Participant) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.parts[p.Ref().Object] = p
}

// Remove stops serving p.
func (s *Server) Remove(p *Participant) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.parts[p.Ref().Object] == p {
		delete(s.parts, p.Ref().Object)
	}
}

// request finds the participant and transaction a call names.
func (s *Server) request(req *djinnpb.ParticipantRequest) (*Participant, Tx, error) {
	id, err := djinn.IDFromBytes("participant id", req.GetParticipantId())
	if err != nil {
		return nil, Tx{}, err
	}
	mgr, err := client.RefFromProto("manager", req.GetManager())
	if err != nil {
		return nil, Tx{}, err
	}
	s.mu.RLock()
	p := s.parts[id]
	s.mu.RUnlock()
	if p == nil {
		return nil, Tx{}, djinn.Errorf(djinn.NoSuchObject, "participant %s: no such participant here", id)
	}
	secret, err := wire.TxnSecret(req.GetSecret())
	if err != nil {
		return nil, Tx{}, err
	}
	return p, Tx{Manager: mgr, ID: req.GetId(), Secret: secret}, nil
}

// Prepare implements djinnpb.TransactionParticipantServer.
func (s *Server) Prepare(ctx context.Context, req *djinnpb.ParticipantRequest) (*djinnpb.PrepareResponse, error) {
	p, tx, err := s.request(req)
	if err != nil {
		return nil, grpcerr.Status(err)
	}
	v, err := p.Prepare(ctx, tx)
	if err != nil {
		return nil, grpcerr.Status(err)
	}
	return &djinnpb.PrepareResponse{Vote: v.Proto()}, nil
}

// PrepareAndCommit implements djinnpb.TransactionParticipantServer.
func (s *Server) PrepareAndCommit(ctx context.Context, req *djinnpb.ParticipantRequest) (*djinnpb.PrepareResponse, error) {
	p, tx, err := s.request(req)
	if err != nil {
		return nil, grpcerr.Status(err)
	}
	v, err := p.PrepareAndCommit(ctx, tx)
	if err != nil {
		return nil, grpcerr.Status(err)
	}
	return &djinnpb.PrepareResponse{Vote: v.Proto()}, nil
}

// Calls implements djinnpb.TransactionParticipantServer: the calls of one
// manager over one stream, answered as each is done.
func (s *Server) Calls(stream djinnpb.TransactionParticipant_CallsServer) error {
	return pstream.Serve(stream, s.Call, s.stop)
}

// Call makes one call of a manager to the participant req names, as the
// unary methods and Calls do, and returns djinn errors: for a gRPC
// service that hosts participants among other objects of its own.
func (s *Server) Call(ctx context.Context, op djinnpb.ParticipantOp, req *djinnpb.ParticipantRequest) (djinnpb.TransactionState, error) {
	p, tx, err := s.request(req)
	if err != nil {
		return 0, err
	}
	switch op {
	case djinnpb.ParticipantOp_PARTICIPANT_OP_PREPARE:
		v, err := p.Prepare(ctx, tx)
		return v.Proto(), err
	case djinnpb.ParticipantOp_PARTICIPANT_OP_PREPARE_AND_COMMIT:
		v, err := p.PrepareAndCommit(ctx, tx)
		return v.Proto(), err
	case djinnpb.ParticipantOp_PARTICIPANT_OP_COMMIT:
		return 0, p.Commit(ctx, tx)
	case djinnpb.ParticipantOp_PARTICIPANT_OP_ABORT:
		return 0, p.Abort(ctx, tx)
	}
	return 0, djinn.Errorf(djinn.InvalidArgument, "participant call %v: unknown", op)
}

// Commit implements djinnpb.TransactionParticipantServer.
func (s *Server) Commit(ctx context.Context, req *djinnpb.ParticipantRequest) (*djinnpb.ParticipantResponse, error) {
	p, tx, err := s.request(req)
	if err != nil {
		return nil, grpcerr.Status(err)
	}
	if err := p.Commit(ctx, tx); err != nil {
		return nil, grpcerr.Status(err)
	}
	return &djinnpb.ParticipantResponse{}, nil
}

// Abort implements djinnpb.TransactionParticipantServer.
func (s *Server) Abort(ctx context.Context, req *djinnpb.ParticipantRequest) (*djinnpb.ParticipantResponse, error) {
	p, tx, err := s.request(req)
	if err != nil {
		return nil, grpcerr.Status(err)
	}
	if err := p.Abort(ctx, tx); err != nil {
		return nil, grpcerr.Status(err)
	}
	return &djinnpb.ParticipantResponse{}, nil
}
