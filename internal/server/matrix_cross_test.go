package server_test

import (
	"context"
	"crypto/tls"
	"errors"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/internal/grpcerr"
	"github.com/djinn-go/djinn/internal/server"
	"github.com/djinn-go/djinn/internal/server/servertest"
	"github.com/djinn-go/djinn/internal/state"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// The authorization matrix's rows beyond one call of one RPC on one
// server (DESIGN.md 7): another principal must learn nothing of a
// resource that is not its own — not on a follower, and not from a
// refusal its call met because of the owner's limits.

// rawConn is a connection to the one server at addr as tc, whose calls
// are neither redirected to the leader nor have their errors converted:
// what a client other than djinn's (grpcurl, another language's) sees.
func rawConn(t *testing.T, addr string, tc *tls.Config) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(tc)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

// errKind is the djinn kind of a call's error, as a status or converted.
func errKind(err error) djinn.Kind {
	var de *djinn.Error
	if _, ok := status.FromError(err); ok && !errors.As(err, &de) {
		err = grpcerr.FromStatus(err)
	}
	return djinn.KindOf(err)
}

// TestAuthorizationOnAFollower: a follower holds a copy of every
// principal's resources, but only the serving leader answers calls on
// them. A call under an owner rule reaching a follower is refused
// Unavailable, naming the leader — whoever's resource it names, and
// whether or not that exists: a follower's answer must not tell another
// principal's resource from one that never existed, as "not found" for
// the one and Unavailable for the other would.
func TestAuthorizationOnAFollower(t *testing.T) {
	t.Parallel()
	pki := servertest.NewPKI(t)
	c1 := mtlsConfig(t, pki, servertest.ServerNode, "cn:ops")
	servertest.Steady(&c1)
	first := servertest.Start(t, c1)
	c2 := mtlsConfig(t, pki, "n2", "cn:ops")
	c2.Join = first.Addr()
	servertest.Steady(&c2)
	second := servertest.Open(t, c2)
	servertest.Eventually(t, "n2 a voter, caught up", func() bool {
		ms, err := first.Node().Members()
		return err == nil && len(ms) == 2 && ms[0].Voter && ms[1].Voter && second.Node().AppliedIndex() > 0
	})
	leader := servertest.ServingLeader(t, first, second)
	follower := servertest.Others([]*server.Server{first, second}, leader)[0]
	aliceTLS, bobTLS := pki.TLSFor(pki.NewClient(t, "alice")), pki.TLSFor(pki.NewClient(t, "bob"))
	// alice's calls follow the leader; bob's reach the follower alone.
	alice := servertest.Conn(t, leader.Addr(), client.WithTLS(aliceTLS), client.WithoutSession())
	asBob, asAlice := rawConn(t, follower.Addr(), bobTLS), rawConn(t, follower.Addr(), aliceTLS)
	rows, owned := matrixRows(), server.LeaderOwned(leader)
	if len(owned) == 0 {
		t.Fatal("no RPC under an owner rule")
	}
	for _, m := range slices.Sorted(maps.Keys(owned)) {
		row, ok := rows[m]
		if !ok {
			t.Errorf("%s: no matrix row", m)
			continue
		}
		for _, p := range paths {
			if p.name != "" && !server.SessionMethods(leader)[m] {
				continue
			}
			r := &resources{t: t, owner: alice, srv: leader}
			for _, who := range []struct {
				name string
				conn *grpc.ClientConn
			}{{"another principal", asBob}, {"the owner", asAlice}} {
				if who.conn == asBob {
					r.caller = asOther
				} else {
					r.caller = asOwner
				}
				ctx, cancel := context.WithTimeout(context.Background(), matrixTimeout)
				err := row(ctx, p.conn(who.conn), r, true)
				cancel()
				if k := errKind(err); k != djinn.Unavailable || !strings.Contains(err.Error(), "not the serving leader") {
					t.Errorf("%s%s on a follower as %s: %v (%s), want Unavailable: this node is not the serving leader", m, p.name, who.name, err, k)
				}
			}
		}
	}
	// A resource that never existed: the same answer.
	never := djinn.NewID()
	_, err := djinnpb.NewEventMailboxClient(asBob).GetRegistration(testContext(t), &djinnpb.MailboxRegistrationRequest{RegistrationId: never[:]})
	if k := errKind(err); k != djinn.Unavailable {
		t.Errorf("GetRegistration of a registration that never existed, on a follower: %v (%s), want Unavailable", err, k)
	}
	// The leader answers alice's own, and bob "not found".
	reg, err := djinnpb.NewEventMailboxClient(alice).Register(testContext(t), &djinnpb.MailboxRegisterRequest{LeaseDurationNanos: int64(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	bobLeader := servertest.Conn(t, leader.Addr(), client.WithTLS(bobTLS), client.WithoutSession())
	if _, err := djinnpb.NewEventMailboxClient(bobLeader).GetRegistration(testContext(t), &djinnpb.MailboxRegistrationRequest{RegistrationId: reg.GetRegistrationId()}); !errors.Is(err, djinn.ErrNoSuchObject) {
		t.Errorf("bob's GetRegistration of alice's registration on the leader: %v, want NoSuchObject", err)
	}
}

// TestAuthorizationQuotaOfAnother: a call made with another principal's
// capability may add to what that principal holds — a participant joined
// to its transaction counts towards the transaction owner's participants,
// an event sent to its mailbox towards its stored events — and is refused
// once the owner is at its limit. The refusal names the quota, but
// neither the owner nor what it holds (DESIGN.md 7: others get no one
// else's data); the owner's own refusal names both (README "Quotas").
func TestAuthorizationQuotaOfAnother(t *testing.T) {
	t.Parallel()
	pki := servertest.NewPKI(t)
	cfg := servertest.Config(t)
	cfg.TLS = server.TLSConfig{Cert: pki.ServerCert, Key: pki.ServerKey, CA: pki.CA, ClientAuth: true}
	cfg.Quota.Participants, cfg.Quota.StoredEvents = 1, 1
	srv := servertest.Start(t, cfg)
	const alice = `"cn:alice"`
	conn := func(cn string) *grpc.ClientConn {
		return servertest.Conn(t, srv.Addr(), client.WithTLS(pki.TLSFor(pki.NewClient(t, cn))), client.WithoutSession())
	}
	asAlice, asBob := conn("alice"), conn("bob")
	ctx := testContext(t)

	// alice at her limits: a transaction with one participant, a mailbox
	// with one event.
	tx, err := djinnpb.NewTransactionManagerClient(asAlice).Create(ctx, &djinnpb.CreateTransactionRequest{LeaseDurationNanos: hour})
	if err != nil {
		t.Fatal(err)
	}
	join := func(c grpc.ClientConnInterface) error {
		return ok(djinnpb.NewTransactionManagerClient(c).Join(ctx, &djinnpb.JoinTransactionRequest{Id: tx.GetId(), Secret: tx.GetSecret(), Participant: anyListener(), CrashCount: 1}))
	}
	if err := join(asAlice); err != nil {
		t.Fatal(err)
	}
	mb, err := djinnpb.NewEventMailboxClient(asAlice).Register(ctx, &djinnpb.MailboxRegisterRequest{LeaseDurationNanos: hour})
	if err != nil {
		t.Fatal(err)
	}
	l := mb.GetListener()
	seq := int64(0)
	notify := func(c grpc.ClientConnInterface) error {
		seq++
		return ok(djinnpb.NewEventListenerClient(c).Notify(ctx, &djinnpb.NotifyRequest{ListenerId: l.GetObjectId(), Event: &djinnpb.RemoteEvent{Source: l, EventId: 1, Sequence: seq}}))
	}
	if err := notify(asAlice); err != nil {
		t.Fatal(err)
	}
	lockSet, err := djinnpb.NewLockServiceClient(asAlice).CreateSet(ctx, &djinnpb.CreateLockSetRequest{LeaseDurationNanos: hour, Transactional: true})
	if err != nil {
		t.Fatal(err)
	}

	for _, row := range []struct {
		name, quota string
		call        func(c grpc.ClientConnInterface) error
	}{
		{"Join: a participant in alice's transaction", "participants", join},
		{"LockService/Lock: a lock under alice's transaction", "participants", func(c grpc.ClientConnInterface) error {
			return ok(djinnpb.NewLockServiceClient(c).Lock(ctx, &djinnpb.LockRequest{SetId: lockSet.GetSetId(), Mode: djinnpb.LockMode_LOCK_MODE_READ,
				Holder: &djinnpb.LockHolder{Transaction: &djinnpb.TransactionRef{Manager: tx.GetManager(), Id: tx.GetId(), Secret: tx.GetSecret()}}}))
		}},
		{"EventListener/Notify: an event in alice's mailbox", "mailbox-stored-events", notify},
		{"EventListener/NotifyBatch: events in alice's mailbox, answered in the response", "mailbox-stored-events", func(c grpc.ClientConnInterface) error {
			seq++
			resp, err := djinnpb.NewEventListenerClient(c).NotifyBatch(ctx, &djinnpb.NotifyBatchRequest{ListenerId: l.GetObjectId(), Events: []*djinnpb.RemoteEvent{{Source: l, EventId: 1, Sequence: seq}}})
			if err == nil && resp.GetError() != nil {
				err = grpcerr.FromProto(resp.GetError())
			}
			return err
		}},
	} {
		for _, p := range paths {
			err := row.call(p.conn(asBob))
			switch {
			case !errors.Is(err, djinn.ErrResourceExhausted) || !strings.Contains(err.Error(), "quota "+row.quota):
				t.Errorf("%s%s as bob, alice at her %s limit: %v, want ResourceExhausted naming the quota", row.name, p.name, row.quota, err)
			case strings.Contains(err.Error(), alice) || strings.Contains(err.Error(), "holds 1"):
				t.Errorf("%s%s as bob: %q names alice or what she holds", row.name, p.name, err)
			}
		}
	}
	// alice's own refusal names her and what she holds.
	if err := notify(asAlice); !errors.Is(err, djinn.ErrResourceExhausted) || !strings.Contains(err.Error(), alice+" holds 1") {
		t.Errorf("alice's own Notify past her limit: %v, want ResourceExhausted naming her", err)
	}
}

// TestAuthorizationRelatedLockSets: a lock set's id is its creator's
// capability, which it hands out set by set (README "Security"). Sets
// related to one another share a coordinator, and Describe lists them —
// but only those of the caller's principal: holding one set's id, or
// relating a set of one's own to it, gives no other set's id.
func TestAuthorizationRelatedLockSets(t *testing.T) {
	t.Parallel()
	e := newMatrixEnv(t)
	alice, bob := e.conns[asOwner], e.conns[asOther]
	ctx := testContext(t)
	create := func(c grpc.ClientConnInterface, related []byte) []byte {
		t.Helper()
		s, err := djinnpb.NewLockServiceClient(c).CreateSet(ctx, &djinnpb.CreateLockSetRequest{LeaseDurationNanos: hour, Related: related})
		if err != nil {
			t.Fatal(err)
		}
		return s.GetSetId()
	}
	x := create(alice, nil)
	y := create(alice, x) // alice's own, related to x: she never hands it out
	z := create(bob, x)   // bob holds x's id, and relates a set of his to it
	for _, p := range paths {
		for _, row := range []struct {
			name      string
			conn      *grpc.ClientConn
			set, want []byte
		}{
			{"alice describes her set: her related set, not bob's", alice, x, y},
			{"bob describes alice's set, whose id he holds: his related set alone", bob, x, z},
			{"bob describes his set: none of alice's", bob, z, nil},
		} {
			d, err := djinnpb.NewLockServiceClient(p.conn(row.conn)).Describe(ctx, &djinnpb.LockSetRequest{SetId: row.set})
			if err != nil {
				t.Fatalf("%s%s: %v", row.name, p.name, err)
			}
			var want [][]byte
			if row.want != nil {
				want = [][]byte{row.want}
			}
			if got := d.GetRelated(); !slices.EqualFunc(got, want, slices.Equal) {
				t.Errorf("%s%s: related %x, want %x", row.name, p.name, got, want)
			}
		}
	}
}

// TestAuthorizationPeerActsAsItself: membership is the operators' but for
// what a server does itself — join, and leave (README "Security"). A peer
// certificate proves one node: its holder may ask to join as that node,
// or to remove it, and is refused acting on any other, which an operator
// may.
func TestAuthorizationPeerActsAsItself(t *testing.T) {
	t.Parallel()
	pki := servertest.NewPKI(t)
	srv := servertest.Start(t, mtlsConfig(t, pki, servertest.ServerNode, "cn:ops"))
	n2Cert, n2Key := pki.NewPeer(t, "n2")
	n2, err := tls.LoadX509KeyPair(n2Cert, n2Key)
	if err != nil {
		t.Fatal(err)
	}
	asN2 := servertest.Conn(t, srv.Addr(), client.WithTLS(pki.TLSFor(n2)), client.WithoutSession())
	asOps := servertest.Conn(t, srv.Addr(), client.WithTLS(pki.TLSFor(pki.NewClient(t, "ops"))), client.WithoutSession())
	join := func(node string) func(c grpc.ClientConnInterface) error {
		return func(c grpc.ClientConnInterface) error {
			return ok(djinnpb.NewAdminClient(c).Join(testContext(t), &djinnpb.JoinRequest{NodeId: node, RaftAddress: "127.0.0.1:1", GrpcAddress: "no address", RulesMax: state.MaxRules()}))
		}
	}
	remove := func(node string) func(c grpc.ClientConnInterface) error {
		return func(c grpc.ClientConnInterface) error {
			return ok(djinnpb.NewAdminClient(c).RemoveMember(testContext(t), &djinnpb.RemoveMemberRequest{NodeId: node}))
		}
	}
	for _, row := range []struct {
		name   string
		conn   *grpc.ClientConn
		call   func(grpc.ClientConnInterface) error
		denied bool
	}{
		// Allowed calls fail past authorization: an address that does not
		// parse, a node that is no member, the last voter.
		{"n2 joins as n2", asN2, join("n2"), false},
		{"n2 joins as n3", asN2, join("n3"), true},
		{"n2 removes n2", asN2, remove("n2"), false},
		{"n2 removes the member n1", asN2, remove(servertest.ServerNode), true},
		{"n2 removes n3", asN2, remove("n3"), true},
		{"the operator removes the member n1", asOps, remove(servertest.ServerNode), false},
	} {
		for _, p := range paths {
			err := row.call(p.conn(row.conn))
			switch denied := errors.Is(err, djinn.ErrPermissionDenied); {
			case err == nil:
				t.Errorf("%s%s: succeeded, want refused (past authorization or not)", row.name, p.name)
			case errors.Is(err, errWrongAnswer) || denied != row.denied:
				t.Errorf("%s%s: %v, want permission denied %v", row.name, p.name, err, row.denied)
			}
		}
	}
}

// TestAuthorizationNotFoundAsNeverExisted: every call under an owner or a
// capability rule, on its own and in a session, made by another principal
// on the owner's resources answers as the same call on resources that
// never existed: the same kind, and the same message but for the ids the
// call itself sent (DESIGN.md 7: nothing that tells them apart).
func TestAuthorizationNotFoundAsNeverExisted(t *testing.T) {
	t.Parallel()
	e := newMatrixEnv(t)
	rows, access := matrixRows(), server.AccessOf(e.srv)
	newID := func() []byte { id := djinn.NewID(); return id[:] }
	ids := regexp.MustCompile(`[0-9a-f]{32}|\d+`) // the ids sent: 128-bit in hex, transaction ids
	shape := func(err error) string {
		if err == nil {
			return "no error"
		}
		return string(djinn.KindOf(err)) + ": " + ids.ReplaceAllString(err.Error(), "ID")
	}
	for _, m := range slices.Sorted(maps.Keys(rows)) {
		if a := access[m]; a != server.Owner && a != server.Capability {
			continue
		}
		for _, p := range paths {
			if p.name != "" && !server.SessionMethods(e.srv)[m] {
				continue
			}
			owners := &resources{t: t, owner: e.conns[asOwner], srv: e.srv, caller: asOther}
			mb := owners.mailbox()
			// never names resources no one made, of the owner's services.
			never := &resources{t: t, owner: e.conns[asOwner], srv: e.srv, caller: asOther,
				mreg:   &djinnpb.MailboxRegistration{RegistrationId: newID(), Lease: &djinnpb.Lease{Cookie: newID(), Landlord: mb.GetLease().GetLandlord()}, Listener: mb.GetListener()},
				rset:   &djinnpb.RenewalSet{Set: &djinnpb.Ref{ObjectId: newID()}},
				tx:     &djinnpb.CreatedTransaction{Id: 12345678901, Secret: newID(), Manager: owners.txn().GetManager()},
				tset:   &djinnpb.LockSetCreated{SetId: newID()},
				item:   &djinnpb.ServiceRegistration{Lease: &djinnpb.Lease{Cookie: newID()}},
				ldsReg: &djinnpb.LDSRegistration{Registration: &djinnpb.EventRegistration{Lease: &djinnpb.Lease{Cookie: newID()}}},
			}
			ctx, cancel := context.WithTimeout(context.Background(), matrixTimeout)
			theirs := rows[m](ctx, p.conn(e.conns[asOther]), owners, false)
			none := rows[m](ctx, p.conn(e.conns[asOther]), never, false)
			cancel()
			if a, b := shape(theirs), shape(none); a != b {
				t.Errorf("%s%s as another principal: on the owner's resources %q, on ones that never existed %q", m, p.name, a, b)
			}
		}
	}
}
