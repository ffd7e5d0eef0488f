package participant

import (
	"context"
	"errors"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/internal/grpcerr"
	"github.com/djinn-go/djinn/internal/wire"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// Managers is how a participant calls transaction managers: join (TX.2.3)
// and getState (TX.2.7). Remote calls them over gRPC;
// participanttest.Manager is one in memory. Methods are called
// concurrently, and return djinn errors (djinn.KindOf tells
// UnknownTransaction, NoSuchObject, CannotJoin, CrashCount and Unavailable
// apart).
type Managers interface {
	// Join joins self to tx with crash count crash. It returns the
	// transactions tx is nested in, parent first (empty for a top-level
	// transaction), each with its manager: tx's, or another's when tx is
	// nested in a transaction of another manager (TX.2.2).
	Join(ctx context.Context, tx Tx, self djinn.Ref, crash int64) (ancestors []Tx, err error)
	// GetState returns tx's state at its manager.
	GetState(ctx context.Context, tx Tx) (State, error)
}

// Remote returns Managers that call managers over gRPC through c (a
// *client.Pool or *client.Client), at the endpoint of each transaction's
// manager reference, or at whichever member of its djinn cluster serves
// when c follows that cluster (client.ConnFor). A c that can learn a
// cluster (client.Learner, as *client.Pool and *client.Client can) learns
// the manager's when the participant joins; other Connectors reach the
// endpoint alone.
func Remote(c client.Connector) Managers { return remote{c} }

type remote struct{ c client.Connector }

func (r remote) manager(tx Tx) (djinnpb.TransactionManagerClient, error) {
	conn, err := client.ConnFor(r.c, tx.Manager)
	if err != nil {
		return nil, err
	}
	return djinnpb.NewTransactionManagerClient(conn), nil
}

func (r remote) Join(ctx context.Context, tx Tx, self djinn.Ref, crash int64) ([]Tx, error) {
	// The participant keeps tx's manager reference for its later calls
	// (getState, a join again after a crash), which must reach the
	// manager's cluster once the member the reference names is gone. So a
	// connector that can learn asks that member for its cluster now, while
	// it answers, and waits (once per service id); the join then goes to
	// the cluster. A failure does not fail the join: the reference's
	// endpoint may well serve it, and a later call asks again.
	if l, ok := r.c.(client.Learner); ok {
		_ = l.Learn(ctx, tx.Manager)
	}
	m, err := r.manager(tx)
	if err != nil {
		return nil, err
	}
	resp, err := m.Join(ctx, &djinnpb.JoinTransactionRequest{Id: tx.ID, Participant: client.RefToProto(self), CrashCount: crash, Secret: wire.TxnSecretBytes(tx.Secret)})
	if err != nil {
		return nil, kinded(err)
	}
	return AncestorsFromProto(tx, resp)
}

// AncestorsFromProto reads the ancestors in a join's answer for tx.
func AncestorsFromProto(tx Tx, resp *djinnpb.JoinTransactionResponse) ([]Tx, error) {
	ids, mgrs := resp.GetAncestors(), resp.GetAncestorManagers()
	if len(mgrs) != 0 && len(mgrs) != len(ids) {
		return nil, djinn.Errorf(djinn.Internal, "join answer: %d ancestors but %d ancestor managers", len(ids), len(mgrs))
	}
	out := make([]Tx, len(ids))
	for i, id := range ids {
		out[i] = Tx{Manager: tx.Manager, ID: id}
		if len(mgrs) > 0 {
			m, err := client.RefFromProto("ancestor manager", mgrs[i])
			if err != nil {
				return nil, err
			}
			out[i].Manager = m
		}
	}
	return out, nil
}

func (r remote) GetState(ctx context.Context, tx Tx) (State, error) {
	m, err := r.manager(tx)
	if err != nil {
		return 0, err
	}
	resp, err := m.GetState(ctx, &djinnpb.TransactionRequest{Id: tx.ID, Secret: wire.TxnSecretBytes(tx.Secret)})
	if err != nil {
		return 0, kinded(err)
	}
	return StateFromProto(resp.GetState()), nil
}

// kinded gives a gRPC error its djinn kind, for connections that do not
// convert errors themselves (a *client.Pool does).
func kinded(err error) error {
	if err == nil {
		return nil
	}
	var de *djinn.Error
	var k djinn.Kind
	if errors.As(err, &de) || errors.As(err, &k) {
		return err
	}
	return grpcerr.FromStatus(err)
}
