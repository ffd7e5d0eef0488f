package server

import (
	"context"
	"errors"
	"runtime/debug"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/grpcerr"
	"github.com/djinn-go/djinn/internal/principal"
	"github.com/djinn-go/djinn/internal/quota"
	"github.com/djinn-go/djinn/internal/replica"
)

// LeaderTrailer is the trailer that carries the leader's gRPC address when
// a call reached a follower.
const LeaderTrailer = "djinn-leader"

// The interceptors run in this order: the edge (names the caller and
// authorizes the call by its method's rule), the gRPC metrics (so they
// count authorized calls only, with their final status code), then the
// per-server quotas (a unary call's calls in flight, a stream's streams:
// refused inside the metrics, which count the refusal ResourceExhausted
// as they count other quotas'), then errors (turns service errors into
// statuses through the one error table, adds the leader hint, recovers a
// handler's panic). A call the edge refuses gets its status from the edge
// itself.

// unaryEdge names the caller and authorizes the call by its method's rule.
func (s *Server) unaryEdge(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (resp any, err error) {
	defer s.recoverPanic(info.FullMethod, &err)
	ctx, err = s.admit(ctx, info.FullMethod, req)
	if err != nil {
		return nil, s.edgeError(ctx, err)
	}
	return h(ctx, req)
}

// admit names the caller, unless ctx names it already (a session's call
// runs in its stream's context, which the stream's edge named by the same
// connection's certificate), and authorizes the call by its method's
// rule. It returns the context that names the caller.
func (s *Server) admit(ctx context.Context, method string, req any) (context.Context, error) {
	if !principal.Named(ctx) {
		ctx = s.withPrincipal(ctx)
	}
	rule, err := s.rule(method)
	if err == nil {
		err = s.guard.authorize(ctx, method, rule, req)
	}
	return ctx, err
}

// streamEdge is unaryEdge for streams: every request the handler receives
// is authorized by the method's rule.
func (s *Server) streamEdge(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) (err error) {
	defer s.recoverPanic(info.FullMethod, &err)
	ctx := s.withPrincipal(ss.Context())
	rule, err := s.rule(info.FullMethod)
	if err != nil {
		return s.edgeError(ss.Context(), err)
	}
	return h(srv, &edgeStream{ServerStream: ss, ctx: ctx, rule: rule, method: info.FullMethod, guard: &s.guard})
}

// unaryChain is the server's one unary chain, which sessions run their
// calls through too: the edge (unaryEdge), then the gRPC metrics
// interceptor, then the principal's calls in flight (calls.go), then
// errors (unaryErrors), composed once. A call makes one handler, errors
// around the method's; chaining the steps generically, as
// grpc.ChainUnaryInterceptor does, makes one for each step on every call.
//
// A unary call past its principal's calls in flight is refused inside the
// metrics, which count it ResourceExhausted as they count other quotas'
// refusals. A session's call (its context a callCtx) was counted by its
// session as it started, waiting for a slot (session.start).
func (s *Server) unaryChain(metrics grpc.UnaryServerInterceptor) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (resp any, err error) {
		defer s.recoverPanic(info.FullMethod, &err)
		cc, inSession := ctx.(*callCtx)
		ctx, err = s.admit(ctx, info.FullMethod, req)
		if err != nil {
			return nil, s.edgeError(ctx, err)
		}
		return metrics(ctx, req, info, func(ctx context.Context, req any) (any, error) {
			var held *heldSlot
			switch {
			case inSession:
				held = cc.held // taken, and given back, by the session
			case s.calls.on:
				slot, err := s.calls.take(principal.From(ctx))
				if err != nil {
					return nil, s.edgeError(ctx, err)
				}
				held = s.calls.hold(slot)
				defer held.Release()
			}
			if held != nil {
				ctx = quota.WithReleaser(ctx, held)
			}
			return s.unaryErrors(ctx, req, info, h)
		})
	}
}

// unaryErrors turns the handler's error into a status and recovers its
// panic.
func (s *Server) unaryErrors(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (resp any, err error) {
	defer s.recoverPanic(info.FullMethod, &err)
	resp, err = h(ctx, req)
	return resp, s.edgeError(ctx, err)
}

// streamErrors is unaryErrors for streams, and counts the stream towards
// its principal's streams quota while it is open. A stream past the quota
// is refused here, inside the metrics (the edge named its caller), which
// count it ResourceExhausted as they count a unary call's refusals.
func (s *Server) streamErrors(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) (err error) {
	defer s.recoverPanic(info.FullMethod, &err)
	p := principal.From(ss.Context())
	if err = s.streams.take(p); err != nil {
		return s.edgeError(ss.Context(), err)
	}
	defer s.streams.done(p)
	return s.edgeError(ss.Context(), h(srv, ss))
}

// rule returns a method's authorization rule. Every method served has
// one (the registrar refuses others), so a miss is a bug: refused.
func (s *Server) rule(method string) (Rule, error) {
	r, ok := s.rules[method]
	if !ok {
		return Rule{}, djinn.Errorf(djinn.Internal, "rpc %s: no authorization rule", method)
	}
	return r, nil
}

func (s *Server) edgeError(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	err = callerError(ctx, err)
	// Point the caller at the leader: after a refused log write, or a
	// leader-only service (the lessor, the mailbox) answering on a follower.
	leader := ""
	var nl *replica.NotLeaderError
	if errors.As(err, &nl) {
		leader = nl.Leader
	} else if djinn.KindOf(err) == djinn.Unavailable && !s.node.IsLeader() {
		leader = s.node.LeaderEndpoint()
	}
	if leader != "" {
		_ = grpc.SetTrailer(ctx, metadata.Pairs(LeaderTrailer, leader))
	}
	return grpcerr.Status(err)
}

// callerError returns err as the caller in ctx may see it: a refusal by
// another principal's quota — a call that adds to what the owner of a
// capability holds — names neither that principal nor what it holds
// (quota.ExhaustedError.For). Every error a call answers passes here:
// the edge's, and those a handler answers in its response.
func callerError(ctx context.Context, err error) error {
	var qe *quota.ExhaustedError
	if errors.As(err, &qe) {
		return qe.For(principal.From(ctx))
	}
	return err
}

// recoverPanic turns a handler's panic (a bug) into an Internal error for
// that call, logged with its stack, instead of a crash of the server.
func (s *Server) recoverPanic(method string, err *error) {
	if p := recover(); p != nil {
		s.log.Error("handler panicked", "method", method, "panic", p, "stack", string(debug.Stack()))
		*err = grpcerr.Status(djinn.Errorf(djinn.Internal, "internal error in %s", method))
	}
}

// withPrincipal names the caller by its verified certificate: a client's
// principal, or a peer (without one, the caller is the local principal).
// The certificate itself rides in ctx only when revocation lists are
// configured, the one check that reads it.
func (s *Server) withPrincipal(ctx context.Context) context.Context {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return ctx
	}
	ti, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(ti.State.VerifiedChains) == 0 || len(ti.State.VerifiedChains[0]) == 0 {
		return ctx
	}
	return withCertificate(ctx, ti.State.VerifiedChains[0][0], s.guard.revoked != nil)
}

// edgeStream carries the caller's principal and authorizes each request
// the handler receives.
type edgeStream struct {
	grpc.ServerStream
	ctx    context.Context
	rule   Rule
	method string
	guard  *guard
}

func (e *edgeStream) Context() context.Context { return e.ctx }

func (e *edgeStream) RecvMsg(m any) error {
	if err := e.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	return e.guard.authorize(e.ctx, e.method, e.rule, m)
}
