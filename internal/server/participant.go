package server

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/internal/disk"
	"github.com/djinn-go/djinn/internal/principal"
	"github.com/djinn-go/djinn/internal/pstream"
	"github.com/djinn-go/djinn/internal/txn"
	"github.com/djinn-go/djinn/internal/wire"
	"github.com/djinn-go/djinn/kv"
	"github.com/djinn-go/djinn/participant"
	"github.com/djinn-go/djinn/proto/djinnpb"
	"github.com/djinn-go/djinn/service"
)

// participantPart is the TransactionParticipant service, served when
// anything here is a participant: the lock service, the transaction
// manager's nest participant (for transactions nested in other
// managers'), the key/value participant. Transaction managers call it
// about the transactions the participant joined: the manager's reference
// and the transaction's id are the capability.
func participantPart(s *Server) *part {
	c := s.cfg
	rpc := &participantRPC{s: s}
	return &part{
		name:    "participant",
		enabled: c.Txn.Enabled || c.Lock.Enabled || c.KV.Enabled,
		serve: func(r *registrar) error {
			if s.kv != nil {
				rpc.hosts = participant.NewServer()
				rpc.hosts.Add(s.kv.Participant())
			}
			return r.serve(&djinnpb.TransactionParticipant_ServiceDesc, rpc, Rules{
				"Prepare": capability, "PrepareAndCommit": capability, "Commit": capability, "Abort": capability, "Calls": capability,
			})
		},
	}
}

// kvPart is the reference participant: this node's own key/value store,
// not replicated, durable in the data directory. Each principal has its
// own keys (a kv namespace named after it), bounded by [kv]
// max-bytes-per-principal; another's key is not found.
func kvPart(s *Server) *part {
	c := s.cfg
	return &part{
		name:    "kv",
		enabled: c.KV.Enabled,
		joins:   &joinKind{typ: service.KeyValueType, title: "djinn key/value store", nodeID: func() djinn.ID { return s.kv.Participant().Ref().Service }},
		open: func() error {
			if !c.KV.Enabled {
				return nil
			}
			var err error
			s.kvStore, err = participant.OpenFileStore(filepath.Join(c.DataDir, "kv"), participant.StoreLogger(s.log))
			if err == nil {
				s.kv, err = kv.Open(kv.Config{Participant: participant.Config{
					Endpoint: s.advertise, Store: s.kvStore, Managers: managers{s: s, remote: participant.Remote(s.pool)}, Logger: s.log,
				}, MaxBytes: c.KV.MaxBytes, MaxBytesPerNamespace: c.KV.perPrincipal(c.TLS.ClientAuth)})
			}
			if err != nil {
				return disk.WithRecovery(fmt.Errorf("key/value participant: %w", err), repairAdvice(c.DataDir))
			}
			return nil
		},
		serve: func(r *registrar) error {
			return r.with(Rules{"Put": authenticated, "Get": authenticated, "Delete": authenticated, "List": authenticated}, kv.NewServer(s.kv, kv.WithNamespace(principal.From)).Register)
		},
		ref:     func() djinn.Ref { return s.kv.Participant().Ref() },
		metrics: func() []prometheus.Collector { return kvMetrics(s) },
		close: func() {
			if s.kv != nil {
				s.kv.Close()
			}
			if s.kvStore != nil {
				s.kvStore.Close()
			}
		},
	}
}

func kvMetrics(s *Server) []prometheus.Collector {
	if s.kv == nil {
		return nil
	}
	const name, help = "djinn_kv_operations_total", "Key/value operations asked of this node, by kind."
	ops := &s.kv.Ops
	return []prometheus.Collector{
		gauge("djinn_kv_keys", "Committed keys in this node's key/value store.", func() float64 { return float64(s.kv.Len()) }),
		counter("djinn_kv_store_batches_total", "Batches written to the key/value store (prepared records, commits, writes outside transactions).", func() float64 {
			b, _ := s.kvStore.Writes()
			return float64(b)
		}),
		counter("djinn_kv_store_writes_total", "Writes to the key/value store's log, each fsynced; concurrent batches share one.", func() float64 {
			_, w := s.kvStore.Writes()
			return float64(w)
		}),
		labelled(name, help, "op", "get", func() float64 { return float64(ops.Gets.Load()) }),
		labelled(name, help, "op", "put", func() float64 { return float64(ops.Puts.Load()) }),
		labelled(name, help, "op", "delete", func() float64 { return float64(ops.Deletes.Load()) }),
		labelled(name, help, "op", "list", func() float64 { return float64(ops.Lists.Load()) }),
	}
}

// participants calls transaction participants: the one this server hosts
// (its key/value store) in process, every other over the connection pool.
type participants struct {
	s *Server
}

// local returns this server's own participant when ref names it: by its
// service and object ids, which it keeps in its store for good, not by
// the endpoint, which is where this node answered when the participant
// joined (it may answer elsewhere since a restart).
func (p participants) local(ref *djinnpb.Ref) *participant.Participant {
	if p.s.kv == nil {
		return nil
	}
	own := p.s.kv.Participant()
	r := own.Ref()
	if string(ref.GetServiceId()) != string(r.Service[:]) || string(ref.GetObjectId()) != string(r.Object[:]) {
		return nil
	}
	return own
}

func (p participants) client(ctx context.Context, ref *djinnpb.Ref) (djinnpb.TransactionParticipantClient, error) {
	r, err := p.s.participantRoute(ctx, ref)
	if err != nil {
		return nil, djinn.Errorf(djinn.Unavailable, "participant %s: %v", ref.GetEndpoint(), err)
	}
	return djinnpb.NewTransactionParticipantClient(r.Conn), nil
}

// How the manager reaches a participant in another process. A participant
// of a djinn cluster (another cluster's lock service, or its manager's
// nest participant) is the cluster's, served by whichever member leads
// it: its reference names the member that led when it joined, which may
// have died since. So the manager follows the participant's cluster by
// its service id, as a client does (DESIGN.md 7a), and calls it unary over
// the cluster's connection, which goes to the leader and follows it. The
// pool learns the cluster when the participant joins, asking the member
// that joined it while it is up (learnParticipant; a participant promoted
// into a transaction, when it is promoted), and else at the first
// call (participantRoute): a manager that took over from another leader,
// or restarted, holds references it never saw join. A participant that
// is no cluster's (a program's, or a member's own key/value store) is
// called at its endpoint, over one Calls stream: the pool asks its
// endpoint once, and keeps the answer.

// participantRoute is the route to the participant ref names: its
// cluster's connection when its service is a djinn cluster's, learnt
// first if need be (within ctx), the connection to its endpoint
// otherwise.
func (s *Server) participantRoute(ctx context.Context, ref *djinnpb.Ref) (pstream.Route, error) {
	r := djinn.Ref{Endpoint: ref.GetEndpoint()}
	if svc, err := djinn.IDFromBytes("service id", ref.GetServiceId()); err == nil && !svc.IsZero() {
		r.Service = svc
		// A failure leaves the endpoint: the call says why it fails there,
		// and the next route asks again.
		_ = s.pool.Learn(ctx, r)
		if s.pool.Follows(svc) {
			cc, err := s.pool.ConnFor(r)
			return pstream.Route{Conn: cc, Unary: true}, err
		}
	}
	cc, err := s.pool.Conn(r.Endpoint)
	return pstream.Route{Conn: cc}, err
}

// learnParticipant has the pool learn whether the participant that joined
// a transaction by ref (or was promoted into it) is a djinn cluster's,
// while the member that joined it answers (within ctx), so that the calls
// to come reach its cluster even once that member is gone. Participants
// of this process need nothing.
func (p participants) learnParticipant(ctx context.Context, ref *djinnpb.Ref) {
	if p.lockService(ref) || p.local(ref) != nil {
		return
	}
	svc, err := djinn.IDFromBytes("service id", ref.GetServiceId())
	if err != nil || svc.IsZero() {
		return
	}
	if err := p.s.pool.Learn(ctx, djinn.Ref{Endpoint: ref.GetEndpoint(), Service: svc}); err != nil {
		p.s.log.Debug("transaction: cannot learn the cluster of a participant that joined; it is called at its endpoint", "participant", ref.GetEndpoint(), "err", err)
	}
}

func request(ref *djinnpb.Ref, mgr djinn.Ref, id uint64, secret djinn.ID) *djinnpb.ParticipantRequest {
	return &djinnpb.ParticipantRequest{ParticipantId: ref.GetObjectId(), Manager: refProto(mgr), Id: id, Secret: wire.TxnSecretBytes(secret)}
}

// lockService reports whether ref names this cluster's lock service. It
// names the cluster, not a member (DESIGN.md 7a): its endpoint is the
// member that led when the lock service joined, which may have died since,
// so only its service id (this cluster's, or one it was restored from) and
// object id count. The manager calls it only while it leads, where the
// lock service serves.
func (p participants) lockService(ref *djinnpb.Ref) bool {
	if !p.s.cfg.Lock.Enabled || string(ref.GetObjectId()) != string(LockID[:]) {
		return false
	}
	svc, err := djinn.IDFromBytes("service id", ref.GetServiceId())
	return err == nil && p.s.ownCluster(svc)
}

func (p participants) Prepare(ctx context.Context, ref *djinnpb.Ref, mgr djinn.Ref, id uint64, secret djinn.ID) (djinnpb.TransactionState, error) {
	if p.lockService(ref) {
		return p.s.lock.Prepare(ctx, refProto(mgr), id, secret)
	}
	if own := p.local(ref); own != nil {
		v, err := own.Prepare(ctx, participant.Tx{Manager: mgr, ID: id, Secret: secret})
		return v.Proto(), err
	}
	c, err := p.client(ctx, ref)
	if err != nil {
		return 0, err
	}
	resp, err := c.Prepare(ctx, request(ref, mgr, id, secret))
	return resp.GetVote(), err
}

func (p participants) PrepareAndCommit(ctx context.Context, ref *djinnpb.Ref, mgr djinn.Ref, id uint64, secret djinn.ID) (djinnpb.TransactionState, error) {
	if p.lockService(ref) {
		return p.s.lock.PrepareAndCommit(ctx, refProto(mgr), id, secret)
	}
	if own := p.local(ref); own != nil {
		v, err := own.PrepareAndCommit(ctx, participant.Tx{Manager: mgr, ID: id, Secret: secret})
		return v.Proto(), err
	}
	c, err := p.client(ctx, ref)
	if err != nil {
		return 0, err
	}
	resp, err := c.PrepareAndCommit(ctx, request(ref, mgr, id, secret))
	return resp.GetVote(), err
}

func (p participants) Commit(ctx context.Context, ref *djinnpb.Ref, mgr djinn.Ref, id uint64, secret djinn.ID) error {
	if p.lockService(ref) {
		return p.s.lock.End(ctx, refProto(mgr), id, secret, true)
	}
	if own := p.local(ref); own != nil {
		return own.Commit(ctx, participant.Tx{Manager: mgr, ID: id, Secret: secret})
	}
	c, err := p.client(ctx, ref)
	if err != nil {
		return err
	}
	_, err = c.Commit(ctx, request(ref, mgr, id, secret))
	return err
}

func (p participants) Abort(ctx context.Context, ref *djinnpb.Ref, mgr djinn.Ref, id uint64, secret djinn.ID) error {
	if p.lockService(ref) {
		return p.s.lock.End(ctx, refProto(mgr), id, secret, false)
	}
	if own := p.local(ref); own != nil {
		return own.Abort(ctx, participant.Tx{Manager: mgr, ID: id, Secret: secret})
	}
	c, err := p.client(ctx, ref)
	if err != nil {
		return err
	}
	_, err = c.Abort(ctx, request(ref, mgr, id, secret))
	return err
}

// Call implements txn.Participants: this server's lock service and
// key/value participant are called in process, on the manager's worker,
// to the end and with no deadline timer (they wait for nothing but this
// process); any other participant over the connection pool, answering
// from another goroutine, within timeout.
func (p participants) Call(ctx context.Context, timeout time.Duration, op txn.Op, ref *djinnpb.Ref, mgr djinn.Ref, id uint64, secret djinn.ID, done func(djinnpb.TransactionState, error)) {
	if p.lockService(ref) || p.local(ref) != nil {
		done(txn.CallBlocking(ctx, p, op, ref, mgr, id, secret))
		return
	}
	p.s.participantCalls.Call(ctx, timeout, streamOps[op], ref, refProto(mgr), id, secret, done)
}

// streamOps are the Calls stream's names of the manager's calls.
var streamOps = map[txn.Op]djinnpb.ParticipantOp{
	txn.OpPrepare:          djinnpb.ParticipantOp_PARTICIPANT_OP_PREPARE,
	txn.OpPrepareAndCommit: djinnpb.ParticipantOp_PARTICIPANT_OP_PREPARE_AND_COMMIT,
	txn.OpCommit:           djinnpb.ParticipantOp_PARTICIPANT_OP_COMMIT,
	txn.OpAbort:            djinnpb.ParticipantOp_PARTICIPANT_OP_ABORT,
}

var _ txn.Participants = participants{}

// managers is how this server's own participant reaches transaction
// managers: this server's in process while it leads, every other (and this
// one when it does not) over the connection pool.
type managers struct {
	s      *Server
	remote participant.Managers
}

// local reports whether tx is this cluster's manager's and the manager is
// serving here. The manager's reference names the cluster, not a member
// (DESIGN.md 7a): its endpoint is the member that led when the
// transaction was made, which may have been deposed since, so only its
// service id (this cluster's, or one it was restored from) and object id
// count.
func (m managers) local(tx participant.Tx) bool { return m.s.localManager(tx.Manager) }

// localManager reports whether mgr is this cluster's transaction manager
// and this server leads it, so that it is called in process.
func (s *Server) localManager(mgr djinn.Ref) bool {
	return s.txn != nil && mgr.Object == TxnID && s.ownCluster(mgr.Service) &&
		s.lessor.Serving("transaction manager") == nil
}

// ownCluster reports whether svc is this cluster's service id, or one it
// was restored from.
func (s *Server) ownCluster(svc djinn.ID) bool {
	return svc == s.machine.ServiceID() || slices.Contains(s.machine.PreviousIDs(), svc)
}

func (m managers) Join(ctx context.Context, tx participant.Tx, self djinn.Ref, crash int64) ([]participant.Tx, error) {
	if m.local(tx) {
		err := m.s.txn.Join(ctx, tx.ID, tx.Secret, client.RefToProto(self), crash)
		if err == nil {
			ids, mgrs, err := m.s.txn.Ancestors(tx.ID)
			if err != nil {
				return nil, err
			}
			return participant.AncestorsFromProto(tx, &djinnpb.JoinTransactionResponse{Ancestors: ids, AncestorManagers: mgrs})
		}
		if djinn.KindOf(err) != djinn.Unavailable {
			return nil, err
		}
		// Leadership moved while calling: the pool finds the new leader.
	}
	return m.remote.Join(ctx, tx, self, crash)
}

func (m managers) GetState(ctx context.Context, tx participant.Tx) (participant.State, error) {
	if m.local(tx) {
		st, err := m.s.txn.GetState(ctx, tx.ID, tx.Secret)
		if err == nil {
			return participant.StateFromProto(st), nil
		}
		if djinn.KindOf(err) != djinn.Unavailable {
			return 0, err
		}
	}
	return m.remote.GetState(ctx, tx)
}

var _ participant.Managers = managers{}

// otherManagers calls other transaction managers over the connection
// pool, for transactions nested in theirs and for the lock service's
// joins. A manager of a djinn cluster is its cluster's: the pool (the
// server's, a *client.Pool) learns that cluster when a participant joins
// (Join), and reaches it at whichever member serves.
type otherManagers struct {
	pool client.Learner
	log  *slog.Logger
}

// otherManagers returns the server's otherManagers.
func (s *Server) otherManagers() otherManagers { return otherManagers{pool: s.pool, log: s.log} }

func (o otherManagers) client(mgr djinn.Ref) (djinnpb.TransactionManagerClient, error) {
	conn, err := o.pool.ConnFor(mgr)
	if err != nil {
		return nil, djinn.Errorf(djinn.Unavailable, "transaction manager %s: %v", mgr.Endpoint, err)
	}
	return djinnpb.NewTransactionManagerClient(conn), nil
}

func (o otherManagers) Join(ctx context.Context, mgr djinn.Ref, id uint64, secret djinn.ID, p *djinnpb.Ref, crash int64) (*djinnpb.JoinTransactionResponse, error) {
	// The participant (the lock service, or the nest participant) keeps
	// mgr for its later calls (getState, a join again, a promote), which
	// must reach mgr's cluster once the member mgr names is gone. So the
	// pool asks that member for its cluster now, while it answers, and
	// waits (once per service id); the join then goes to the cluster. A
	// failure does not fail the join: mgr's endpoint may well serve it, and
	// a later call asks again.
	if err := o.pool.Learn(ctx, mgr); err != nil {
		o.log.Debug("transaction: cannot learn the cluster of a manager joined; it is called at its endpoint", "manager", mgr.Endpoint, "err", err)
	}
	c, err := o.client(mgr)
	if err != nil {
		return nil, err
	}
	return c.Join(ctx, &djinnpb.JoinTransactionRequest{Id: id, Participant: p, CrashCount: crash, Secret: wire.TxnSecretBytes(secret)})
}

func (o otherManagers) GetState(ctx context.Context, mgr djinn.Ref, id uint64, secret djinn.ID) (djinnpb.TransactionState, error) {
	c, err := o.client(mgr)
	if err != nil {
		return 0, err
	}
	resp, err := c.GetState(ctx, &djinnpb.TransactionRequest{Id: id, Secret: wire.TxnSecretBytes(secret)})
	return resp.GetState(), err
}

func (o otherManagers) Promote(ctx context.Context, mgr djinn.Ref, id uint64, secret djinn.ID, parts []*djinnpb.Ref, crashes []int64, drop *djinnpb.Ref) error {
	c, err := o.client(mgr)
	if err != nil {
		return err
	}
	_, err = c.Promote(ctx, &djinnpb.PromoteRequest{Id: id, Participants: parts, CrashCounts: crashes, Drop: drop, Secret: wire.TxnSecretBytes(secret)})
	return err
}

var _ txn.Managers = otherManagers{}

// participantRPC serves the TransactionParticipant service: the
// manager's nest participant (for transactions nested in other managers'),
// and the participants this server hosts.
type participantRPC struct {
	djinnpb.UnimplementedTransactionParticipantServer
	s     *Server
	hosts *participant.Server // nil: none
}

// nest reports whether req is for the nest participant.
func (r *participantRPC) nest(req *djinnpb.ParticipantRequest) bool {
	return string(req.GetParticipantId()) == string(txn.NestID[:])
}

// lockService reports whether req is for the lock service.
func (r *participantRPC) lockService(req *djinnpb.ParticipantRequest) bool {
	return r.s.cfg.Lock.Enabled && string(req.GetParticipantId()) == string(LockID[:])
}

// checked reads what req names for the lock service or the nest
// participant: its manager must be a reference, its secret (the
// transaction's, which they check) 16 bytes or none.
func checked(req *djinnpb.ParticipantRequest) (djinn.ID, error) {
	if _, err := client.RefFromProto("manager", req.GetManager()); err != nil {
		return djinn.ID{}, err
	}
	return wire.TxnSecret(req.GetSecret())
}

// call makes one call of a manager to a participant here: the lock
// service, the nest participant or a hosted one. The unary methods and
// the Calls stream make theirs through it.
func (r *participantRPC) call(ctx context.Context, op djinnpb.ParticipantOp, req *djinnpb.ParticipantRequest) (djinnpb.TransactionState, error) {
	if r.lockService(req) {
		secret, err := checked(req)
		if err != nil {
			return 0, err
		}
		switch op {
		case djinnpb.ParticipantOp_PARTICIPANT_OP_PREPARE:
			return r.s.lock.Prepare(ctx, req.GetManager(), req.GetId(), secret)
		case djinnpb.ParticipantOp_PARTICIPANT_OP_PREPARE_AND_COMMIT:
			return r.s.lock.PrepareAndCommit(ctx, req.GetManager(), req.GetId(), secret)
		}
		return 0, r.s.lock.End(ctx, req.GetManager(), req.GetId(), secret, op == djinnpb.ParticipantOp_PARTICIPANT_OP_COMMIT)
	}
	if r.nest(req) {
		secret, err := checked(req)
		if err != nil {
			return 0, err
		}
		switch op {
		case djinnpb.ParticipantOp_PARTICIPANT_OP_PREPARE, djinnpb.ParticipantOp_PARTICIPANT_OP_PREPARE_AND_COMMIT:
			// NOTCHANGED: nothing to commit.
			return r.s.txn.NestPrepare(ctx, req.GetManager(), req.GetId(), secret)
		case djinnpb.ParticipantOp_PARTICIPANT_OP_COMMIT:
			// Never PREPARED, so never told to commit; as a participant that
			// forgot a transaction, say so (TX.2.6).
			return 0, djinn.Errorf(djinn.UnknownTransaction, "transaction %d: the nest participant holds no changes", req.GetId())
		}
		return 0, r.s.txn.NestAbort(ctx, req.GetManager(), req.GetId(), secret)
	}
	if r.hosts == nil {
		return 0, djinn.Errorf(djinn.NoSuchObject, "participant %x: no such participant here", req.GetParticipantId())
	}
	return r.hosts.Call(ctx, op, req)
}

func (r *participantRPC) Prepare(ctx context.Context, req *djinnpb.ParticipantRequest) (*djinnpb.PrepareResponse, error) {
	v, err := r.call(ctx, djinnpb.ParticipantOp_PARTICIPANT_OP_PREPARE, req)
	if err != nil {
		return nil, err
	}
	return &djinnpb.PrepareResponse{Vote: v}, nil
}

func (r *participantRPC) PrepareAndCommit(ctx context.Context, req *djinnpb.ParticipantRequest) (*djinnpb.PrepareResponse, error) {
	v, err := r.call(ctx, djinnpb.ParticipantOp_PARTICIPANT_OP_PREPARE_AND_COMMIT, req)
	if err != nil {
		return nil, err
	}
	return &djinnpb.PrepareResponse{Vote: v}, nil
}

func (r *participantRPC) Commit(ctx context.Context, req *djinnpb.ParticipantRequest) (*djinnpb.ParticipantResponse, error) {
	if _, err := r.call(ctx, djinnpb.ParticipantOp_PARTICIPANT_OP_COMMIT, req); err != nil {
		return nil, err
	}
	return &djinnpb.ParticipantResponse{}, nil
}

func (r *participantRPC) Abort(ctx context.Context, req *djinnpb.ParticipantRequest) (*djinnpb.ParticipantResponse, error) {
	if _, err := r.call(ctx, djinnpb.ParticipantOp_PARTICIPANT_OP_ABORT, req); err != nil {
		return nil, err
	}
	return &djinnpb.ParticipantResponse{}, nil
}

// Calls serves a manager's calls over one stream (pstream).
func (r *participantRPC) Calls(stream djinnpb.TransactionParticipant_CallsServer) error {
	return pstream.Serve(stream, r.call, r.s.stop)
}
