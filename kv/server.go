package kv

import (
	"context"

	"google.golang.org/grpc"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/internal/grpcerr"
	"github.com/djinn-go/djinn/internal/wire"
	"github.com/djinn-go/djinn/participant"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// Server serves a DB as the KeyValue gRPC service. Errors travel with
// their djinn kinds.
type Server struct {
	djinnpb.UnimplementedKeyValueServer
	db *DB
	ns func(context.Context) string
}

var _ djinnpb.KeyValueServer = (*Server)(nil)

// A ServerOption configures a Server.
type ServerOption func(*Server)

// WithNamespace gives each call the namespace ns returns for its context
// (see Space): typically the caller's identity, as the server's
// authentication put it in the context. Each caller then sees only its own
// keys; another's key is not found, exactly as a key never written.
// Without it every call uses the default namespace, the DB's own.
func WithNamespace(ns func(ctx context.Context) string) ServerOption {
	return func(s *Server) { s.ns = ns }
}

// NewServer returns the service for db.
func NewServer(db *DB, opts ...ServerOption) *Server {
	s := &Server{db: db, ns: func(context.Context) string { return "" }}
	for _, o := range opts {
		o(s)
	}
	return s
}

// space returns the namespace of a call.
func (s *Server) space(ctx context.Context) *Space { return s.db.Space(s.ns(ctx)) }

// Register registers the KeyValue service on g. The DB's participant is
// served separately, by a participant.Server registered on the same gRPC
// server (its Endpoint must be g's address).
func (s *Server) Register(g grpc.ServiceRegistrar) { djinnpb.RegisterKeyValueServer(g, s) }

// TxFromProto converts a request's transaction (nil: none).
func TxFromProto(t *djinnpb.KVTransaction) (*participant.Tx, error) {
	if t == nil {
		return nil, nil
	}
	mgr, err := client.RefFromProto("transaction manager", t.GetManager())
	if err != nil {
		return nil, err
	}
	if mgr.Endpoint == "" {
		return nil, djinn.Errorf(djinn.InvalidArgument, "transaction manager: endpoint missing")
	}
	secret, err := wire.TxnSecret(t.GetSecret())
	if err != nil {
		return nil, err
	}
	return &participant.Tx{Manager: mgr, ID: t.GetId(), Secret: secret}, nil
}

// TxToProto converts a transaction for a request (nil: none).
func TxToProto(tx *participant.Tx) *djinnpb.KVTransaction {
	if tx == nil {
		return nil
	}
	kt := &djinnpb.KVTransaction{Manager: client.RefToProto(tx.Manager), Id: tx.ID}
	if !tx.Secret.IsZero() {
		kt.Secret = tx.Secret[:]
	}
	return kt
}

// Put implements djinnpb.KeyValueServer.
func (s *Server) Put(ctx context.Context, req *djinnpb.KVPutRequest) (*djinnpb.KVPutResponse, error) {
	tx, err := TxFromProto(req.GetTxn())
	if err == nil {
		err = s.space(ctx).Put(ctx, tx, req.GetKey(), req.GetValue())
	}
	if err != nil {
		return nil, grpcerr.Status(err)
	}
	return &djinnpb.KVPutResponse{}, nil
}

// Get implements djinnpb.KeyValueServer.
func (s *Server) Get(ctx context.Context, req *djinnpb.KVGetRequest) (*djinnpb.KVGetResponse, error) {
	tx, err := TxFromProto(req.GetTxn())
	if err != nil {
		return nil, grpcerr.Status(err)
	}
	v, found, err := s.space(ctx).Get(ctx, tx, req.GetKey())
	if err != nil {
		return nil, grpcerr.Status(err)
	}
	return &djinnpb.KVGetResponse{Value: v, Found: found}, nil
}

// Delete implements djinnpb.KeyValueServer.
func (s *Server) Delete(ctx context.Context, req *djinnpb.KVDeleteRequest) (*djinnpb.KVDeleteResponse, error) {
	tx, err := TxFromProto(req.GetTxn())
	if err != nil {
		return nil, grpcerr.Status(err)
	}
	found, err := s.space(ctx).Delete(ctx, tx, req.GetKey())
	if err != nil {
		return nil, grpcerr.Status(err)
	}
	return &djinnpb.KVDeleteResponse{Found: found}, nil
}

// List implements djinnpb.KeyValueServer. A response holds no more than
// a client receives by default: a request that pages (after or max given)
// gets a page and the next to go on from; one that does not gets the
// whole listing, or ResourceExhausted saying to page when it would not
// fit (such a client would not read a next, so a page would silently
// lose the rest).
func (s *Server) List(ctx context.Context, req *djinnpb.KVListRequest) (*djinnpb.KVListResponse, error) {
	tx, err := TxFromProto(req.GetTxn())
	if err != nil {
		return nil, grpcerr.Status(err)
	}
	pg, err := pageOf(req)
	if err != nil {
		return nil, grpcerr.Status(err)
	}
	sp := s.space(ctx)
	es, more, err := sp.d.list(ctx, tx, sp.ns, req.GetPrefix(), pg)
	if err != nil {
		return nil, grpcerr.Status(err)
	}
	resp := &djinnpb.KVListResponse{Entries: make([]*djinnpb.KVEntry, len(es))}
	for i, e := range es {
		resp.Entries[i] = &djinnpb.KVEntry{Key: e.Key, Value: e.Value}
	}
	if more {
		resp.Next = es[len(es)-1].Key
	}
	return resp, nil
}
