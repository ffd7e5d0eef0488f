package server_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/internal/server"
	"github.com/djinn-go/djinn/internal/server/servertest"
	"github.com/djinn-go/djinn/participant"
)

// lateAnswers is a pool whose answers to the questions it asks in the
// background come after the member asked died: ConnFor reaches a
// reference's cluster only once Learn has learnt it, and the reference's
// endpoint until then. A pool's own ConnFor asks that endpoint for its
// member list in the background, a race with the member's death; here the
// death wins, as it may.
type lateAnswers struct{ *client.Pool }

func (p lateAnswers) ConnFor(ref djinn.Ref) (*grpc.ClientConn, error) {
	if p.Follows(ref.Service) {
		return p.Pool.ConnFor(ref)
	}
	return p.Conn(ref.Endpoint)
}

// failedLearn is a pool whose every Learn fails, as when the member asked
// cannot answer.
type failedLearn struct{ lateAnswers }

func (failedLearn) Learn(_ context.Context, ref djinn.Ref) error {
	return djinn.Errorf(djinn.Unavailable, "service %s at %s: no member list (the test's)", ref.Service, ref.Endpoint)
}

// connectorOnly is a Connector that neither reaches a reference's
// cluster nor learns it: one of another library.
type connectorOnly struct{ p *client.Pool }

func (c connectorOnly) Conn(endpoint string) (*grpc.ClientConn, error) { return c.p.Conn(endpoint) }

// TestParticipantFollowsItsManagersCluster: DESIGN.md 7a, TX.2.3, TX.2.7 —
// a participant that joined a transaction of another djinn cluster's
// manager keeps the manager's reference for its later calls (getState,
// a join again), and that reference names the member it joined through,
// which may die right after the join. The join learns the manager's
// cluster from that member, while it answers, and waits: once the member
// is closed, getState reaches the manager at the new leader (the
// transaction is ACTIVE there). Without that, the pool's question in the
// background (which here loses its race with the member's death) leaves
// every later call at the dead member. A join whose learning fails still
// joins (at the endpoint, which serves it), and so does one through a
// Connector that cannot learn.
func TestParticipantFollowsItsManagersCluster(t *testing.T) {
	t.Parallel()
	for _, row := range []struct {
		name string
		// managers are the participant's calls to managers over c.
		managers func(c client.Learner) participant.Managers
		// connector, when set, makes them over any Connector.
		connector func(c client.Connector) participant.Managers
	}{
		{name: "the lock service and the nest participant (otherManagers)", managers: server.OtherManagers},
		{name: "participant.Remote",
			managers:  func(c client.Learner) participant.Managers { return participant.Remote(c) },
			connector: participant.Remote},
	} {
		t.Run(row.name, func(t *testing.T) {
			ss := followCluster(t)
			dead := servertest.ServingLeader(t, ss...)
			ctx := testContext(t)
			mgr, err := servertest.Dial(t, dead.Addr()).TransactionManager(ctx)
			if err != nil {
				t.Fatal(err)
			}
			create := func() participant.Tx {
				t.Helper()
				tx, err := mgr.Create(ctx, time.Minute)
				if err != nil {
					t.Fatal(err)
				}
				return participant.Tx{Manager: tx.Manager().Ref(), ID: tx.ID(), Secret: tx.Secret()}
			}
			self := djinn.Ref{Endpoint: "127.0.0.1:1", Object: djinn.NewID()} // a participant of no cluster
			pool := client.NewPool()
			t.Cleanup(func() { pool.Close() })

			if _, err := row.managers(failedLearn{lateAnswers{pool}}).Join(ctx, create(), self, 1); err != nil {
				t.Fatalf("join, its learning of the manager's cluster failed: %v; want joined at the endpoint", err)
			}
			if row.connector != nil {
				if _, err := row.connector(connectorOnly{pool}).Join(ctx, create(), self, 1); err != nil {
					t.Fatalf("join through a Connector that cannot learn: %v", err)
				}
			}

			tx := create()
			m := row.managers(lateAnswers{pool})
			if _, err := m.Join(ctx, tx, self, 1); err != nil {
				t.Fatal(err)
			}
			if err := dead.Close(); err != nil {
				t.Fatalf("close the member the participant joined through: %v", err)
			}
			retryUnavailable(t, "getState, after the member the participant joined through died", func(ctx context.Context) error {
				st, err := m.GetState(ctx, tx)
				if err == nil && st != participant.Active {
					return fmt.Errorf("the transaction is %v at the new leader, want ACTIVE", st)
				}
				return err
			})
		})
	}
}

// TestTxnManagerFollowsAPromotedParticipantsCluster: DESIGN.md 7a, TX.2.7
// — a participant promoted into a transaction is its cluster's, as one
// that joined is. A transaction of one manager (home) has a transaction
// nested in it at a second cluster's manager, which holds a lock at a
// third cluster's lock service, whose reference names that cluster's
// leader. The nested transaction commits: its manager promotes the lock
// service into the parent, and home learns the lock service's cluster
// then, from that leader while it answers. The leader dies; the parent's
// prepare and commit reach the lock service at the new leader (at the
// dead member's address the prepare would go unanswered and abort the
// parent), so the parent commits and the lock drops (CC 1.4).
func TestTxnManagerFollowsAPromotedParticipantsCluster(t *testing.T) {
	t.Parallel()
	home := servertest.Start(t, servertest.Config(t))
	nester := servertest.Start(t, servertest.Config(t))
	other := followCluster(t)
	dead := servertest.ServingLeader(t, other...)
	ctx := testContext(t)
	mgr, err := servertest.Dial(t, home.Addr()).TransactionManager(ctx)
	if err != nil {
		t.Fatal(err)
	}
	parent, err := mgr.Create(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	nmgr, err := servertest.Dial(t, nester.Addr()).TransactionManager(ctx)
	if err != nil {
		t.Fatal(err)
	}
	child, err := parent.CreateNestedAt(ctx, nmgr, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	ls, set := transactionalSet(t, ctx, dead)
	if _, err := set.Lock(ctx, client.HeldByTransaction(child), client.LockW); err != nil {
		t.Fatal(err)
	}
	// With waitFor: the lock service is told the nested transaction
	// committed (its lock is the parent's) before the parent's commit.
	if err := nmgr.CommitWait(ctx, child.ID(), servertest.Timeout); err != nil {
		t.Fatalf("commit the nested transaction: %v", err)
	}
	if svc := ls.Ref().Service; !server.PoolFollows(home, svc) {
		t.Fatalf("the lock service was promoted into the parent, and its manager does not follow the lock service's cluster %s", svc)
	}
	commitAfterItsLeaderDied(t, ctx, dead, parent, set)
}
