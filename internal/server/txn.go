package server

import (
	"context"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/internal/txn"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// TxnID is the object id of the transaction manager.
var TxnID = djinn.ID{'t', 'x', 'n'}

// txnRPC serves the TransactionManager.
type txnRPC struct {
	djinnpb.UnimplementedTransactionManagerServer
	s *Server
}

func (r *txnRPC) Create(ctx context.Context, req *djinnpb.CreateTransactionRequest) (*djinnpb.CreatedTransaction, error) {
	var parent uint64
	if pm := req.GetParentManager(); pm != nil {
		self := r.s.ref(TxnID)()
		if string(pm.GetServiceId()) != string(self.Service[:]) || string(pm.GetObjectId()) != string(self.Object[:]) {
			return nil, djinn.Errorf(djinn.Unsupported, "parent manager %x/%x: nesting under another manager's transaction is not supported yet", pm.GetServiceId(), pm.GetObjectId())
		}
		if req.GetParentId() == 0 {
			return nil, djinn.Errorf(djinn.InvalidArgument, "parent id: missing")
		}
		parent = req.GetParentId()
	}
	c, err := r.s.txn.CreateNested(ctx, parent, time.Duration(req.GetLeaseDurationNanos()))
	if err != nil {
		return nil, err
	}
	return &djinnpb.CreatedTransaction{Id: c.ID, Lease: c.Lease, Manager: refProto(r.s.ref(TxnID)())}, nil
}

func (r *txnRPC) Join(ctx context.Context, req *djinnpb.JoinTransactionRequest) (*djinnpb.JoinTransactionResponse, error) {
	if err := r.s.txn.Join(ctx, req.GetId(), req.GetParticipant(), req.GetCrashCount()); err != nil {
		return nil, err
	}
	anc, err := r.s.txn.Ancestors(req.GetId())
	if err != nil {
		return nil, err
	}
	return &djinnpb.JoinTransactionResponse{Ancestors: anc}, nil
}

func (r *txnRPC) GetState(ctx context.Context, req *djinnpb.TransactionRequest) (*djinnpb.TransactionStateResponse, error) {
	st, err := r.s.txn.GetState(ctx, req.GetId())
	if err != nil {
		return nil, err
	}
	return &djinnpb.TransactionStateResponse{State: st}, nil
}

func waitFor(req *djinnpb.CompleteTransactionRequest) *time.Duration {
	if req.WaitForNanos == nil {
		return nil
	}
	d := time.Duration(req.GetWaitForNanos())
	return &d
}

func (r *txnRPC) Commit(ctx context.Context, req *djinnpb.CompleteTransactionRequest) (*djinnpb.CompleteTransactionResponse, error) {
	if err := r.s.txn.Commit(ctx, req.GetId(), waitFor(req)); err != nil {
		return nil, err
	}
	return &djinnpb.CompleteTransactionResponse{}, nil
}

func (r *txnRPC) Abort(ctx context.Context, req *djinnpb.CompleteTransactionRequest) (*djinnpb.CompleteTransactionResponse, error) {
	if err := r.s.txn.Abort(ctx, req.GetId(), waitFor(req)); err != nil {
		return nil, err
	}
	return &djinnpb.CompleteTransactionResponse{}, nil
}

func (r *txnRPC) Promote(ctx context.Context, req *djinnpb.PromoteRequest) (*djinnpb.PromoteResponse, error) {
	if err := r.s.txn.Promote(ctx, req.GetId(), req.GetParticipants(), req.GetCrashCounts(), req.GetDrop()); err != nil {
		return nil, err
	}
	return &djinnpb.PromoteResponse{}, nil
}

func (r *txnRPC) Describe(ctx context.Context, req *djinnpb.TransactionRequest) (*djinnpb.TransactionDescription, error) {
	return r.s.txn.Describe(ctx, req.GetId())
}

// participants calls transaction participants over the connection pool.
type participants struct {
	pool *client.Pool
}

func (p participants) client(ref *djinnpb.Ref) (djinnpb.TransactionParticipantClient, error) {
	conn, err := p.pool.Conn(ref.GetEndpoint())
	if err != nil {
		return nil, djinn.Errorf(djinn.Unavailable, "participant %s: %v", ref.GetEndpoint(), err)
	}
	return djinnpb.NewTransactionParticipantClient(conn), nil
}

func request(ref *djinnpb.Ref, mgr djinn.Ref, id uint64) *djinnpb.ParticipantRequest {
	return &djinnpb.ParticipantRequest{ParticipantId: ref.GetObjectId(), Manager: refProto(mgr), Id: id}
}

func (p participants) Prepare(ctx context.Context, ref *djinnpb.Ref, mgr djinn.Ref, id uint64) (djinnpb.TransactionState, error) {
	c, err := p.client(ref)
	if err != nil {
		return 0, err
	}
	resp, err := c.Prepare(ctx, request(ref, mgr, id))
	return resp.GetVote(), err
}

func (p participants) PrepareAndCommit(ctx context.Context, ref *djinnpb.Ref, mgr djinn.Ref, id uint64) (djinnpb.TransactionState, error) {
	c, err := p.client(ref)
	if err != nil {
		return 0, err
	}
	resp, err := c.PrepareAndCommit(ctx, request(ref, mgr, id))
	return resp.GetVote(), err
}

func (p participants) Commit(ctx context.Context, ref *djinnpb.Ref, mgr djinn.Ref, id uint64) error {
	c, err := p.client(ref)
	if err != nil {
		return err
	}
	_, err = c.Commit(ctx, request(ref, mgr, id))
	return err
}

func (p participants) Abort(ctx context.Context, ref *djinnpb.Ref, mgr djinn.Ref, id uint64) error {
	c, err := p.client(ref)
	if err != nil {
		return err
	}
	_, err = c.Abort(ctx, request(ref, mgr, id))
	return err
}

var _ txn.Participants = participants{}
