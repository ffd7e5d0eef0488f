package server_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionv1 "google.golang.org/grpc/reflection/grpc_reflection_v1"
	reflectionv1alpha "google.golang.org/grpc/reflection/grpc_reflection_v1alpha"
	"google.golang.org/protobuf/proto"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/internal/grpcerr"
	"github.com/djinn-go/djinn/internal/server"
	"github.com/djinn-go/djinn/internal/state"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// resources are what a row's calls name, each made by the owner the
// first time a call asks for it: one set per row, so that a call that
// ends a resource ends only its row's.
type resources struct {
	t      *testing.T
	owner  *grpc.ClientConn
	srv    *server.Server
	caller identity // who makes the call under way

	mreg   *djinnpb.MailboxRegistration
	rset   *djinnpb.RenewalSet
	tx     *djinnpb.CreatedTransaction
	kvTx   *djinnpb.CreatedTransaction // joined by the key/value participant
	kvPart *djinnpb.Ref
	lset   *djinnpb.LockSetCreated
	tset   *djinnpb.LockSetCreated // transactional, with tx's lock
	lowner *djinnpb.LockOwner
	held   bool // lowner holds W in lset
	item   *djinnpb.ServiceRegistration
	ldsReg *djinnpb.LDSRegistration
	status *djinnpb.StatusResponse
}

var hour = int64(time.Hour)

func (r *resources) must(what string, err error) {
	r.t.Helper()
	if err != nil {
		r.t.Fatalf("matrix fixture: %s: %v", what, err)
	}
}

func (r *resources) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), matrixTimeout)
	r.t.Cleanup(cancel)
	return ctx
}

func (r *resources) mailbox() *djinnpb.MailboxRegistration {
	if r.mreg == nil {
		var err error
		r.mreg, err = djinnpb.NewEventMailboxClient(r.owner).Register(r.ctx(), &djinnpb.MailboxRegisterRequest{LeaseDurationNanos: hour})
		r.must("mailbox register", err)
	}
	return r.mreg
}

func (r *resources) renewalSet() *djinnpb.RenewalSet {
	if r.rset == nil {
		var err error
		r.rset, err = djinnpb.NewLeaseRenewalServiceClient(r.owner).CreateSet(r.ctx(), &djinnpb.CreateSetRequest{LeaseDurationNanos: hour})
		r.must("renewal set", err)
	}
	return r.rset
}

func (r *resources) txn() *djinnpb.CreatedTransaction {
	if r.tx == nil {
		var err error
		r.tx, err = djinnpb.NewTransactionManagerClient(r.owner).Create(r.ctx(), &djinnpb.CreateTransactionRequest{LeaseDurationNanos: hour})
		r.must("transaction", err)
	}
	return r.tx
}

// kvTxn is a transaction the server's key/value participant joined, and
// that participant.
func (r *resources) kvTxn() (*djinnpb.CreatedTransaction, *djinnpb.Ref) {
	if r.kvTx == nil {
		var err error
		r.kvTx, err = djinnpb.NewTransactionManagerClient(r.owner).Create(r.ctx(), &djinnpb.CreateTransactionRequest{LeaseDurationNanos: hour})
		r.must("transaction", err)
		_, err = djinnpb.NewKeyValueClient(r.owner).Put(r.ctx(), &djinnpb.KVPutRequest{Key: "matrix-" + djinn.NewID().String(), Value: []byte("v"), Txn: &djinnpb.KVTransaction{
			Manager: r.kvTx.GetManager(), Id: r.kvTx.GetId(), Secret: r.kvTx.GetSecret()}})
		r.must("key/value put under the transaction", err)
		d, err := djinnpb.NewTransactionManagerClient(r.owner).Describe(r.ctx(), &djinnpb.TransactionRequest{Id: r.kvTx.GetId()})
		r.must("describe", err)
		r.kvPart = d.GetParticipants()[0].GetParticipant()
	}
	return r.kvTx, r.kvPart
}

func (r *resources) lockSet() *djinnpb.LockSetCreated {
	if r.lset == nil {
		var err error
		r.lset, err = djinnpb.NewLockServiceClient(r.owner).CreateSet(r.ctx(), &djinnpb.CreateLockSetRequest{LeaseDurationNanos: hour})
		r.must("lock set", err)
	}
	return r.lset
}

func (r *resources) lockOwner() *djinnpb.LockOwner {
	if r.lowner == nil {
		var err error
		r.lowner, err = djinnpb.NewLockServiceClient(r.owner).CreateOwner(r.ctx(), &djinnpb.CreateLockOwnerRequest{LeaseDurationNanos: hour})
		r.must("lock owner", err)
	}
	return r.lowner
}

// ownerHolder is the lock owner as a holder.
func (r *resources) ownerHolder() *djinnpb.LockHolder {
	return &djinnpb.LockHolder{Owner: r.lockOwner().GetLease().GetCookie()}
}

// heldSet is lset, in which the lock owner holds W.
func (r *resources) heldSet() []byte {
	set := r.lockSet().GetSetId()
	if !r.held {
		_, err := djinnpb.NewLockServiceClient(r.owner).Lock(r.ctx(), &djinnpb.LockRequest{SetId: set, Holder: r.ownerHolder(), Mode: djinnpb.LockMode_LOCK_MODE_WRITE})
		r.must("lock", err)
		r.held = true
	}
	return set
}

// txnSet is a transactional set in which txn holds R.
func (r *resources) txnSet() []byte {
	if r.tset == nil {
		var err error
		r.tset, err = djinnpb.NewLockServiceClient(r.owner).CreateSet(r.ctx(), &djinnpb.CreateLockSetRequest{LeaseDurationNanos: hour, Transactional: true})
		r.must("transactional lock set", err)
		_, err = djinnpb.NewLockServiceClient(r.owner).Lock(r.ctx(), &djinnpb.LockRequest{SetId: r.tset.GetSetId(), Holder: r.txnHolder(), Mode: djinnpb.LockMode_LOCK_MODE_READ})
		r.must("lock under the transaction", err)
	}
	return r.tset.GetSetId()
}

func (r *resources) txnRef() *djinnpb.TransactionRef {
	tx := r.txn()
	return &djinnpb.TransactionRef{Manager: tx.GetManager(), Id: tx.GetId(), Secret: tx.GetSecret()}
}

func (r *resources) txnHolder() *djinnpb.LockHolder {
	return &djinnpb.LockHolder{Transaction: r.txnRef()}
}

func (r *resources) lookupItem() *djinnpb.ServiceRegistration {
	if r.item == nil {
		var err error
		r.item, err = djinnpb.NewLookupServiceClient(r.owner).Register(r.ctx(), &djinnpb.RegisterRequest{Item: item(djinn.NewID(), "matrix"), LeaseDurationNanos: hour})
		r.must("lookup register", err)
	}
	return r.item
}

func (r *resources) lds() *djinnpb.LDSRegistration {
	if r.ldsReg == nil {
		var err error
		r.ldsReg, err = djinnpb.NewLookupDiscoveryServiceClient(r.owner).Register(r.ctx(), &djinnpb.LDSRegisterRequest{
			Locators: []string{"jini://127.0.0.1:1"}, Listener: anyListener(), LeaseDurationNanos: hour})
		r.must("lds register", err)
	}
	return r.ldsReg
}

func (r *resources) ldsCookie() []byte { return r.lds().GetRegistration().GetLease().GetCookie() }

func (r *resources) nodeID() string {
	if r.status == nil {
		var err error
		r.status, err = djinnpb.NewAdminClient(r.owner).Status(r.ctx(), &djinnpb.StatusRequest{})
		r.must("status", err)
	}
	return r.status.GetNodeId()
}

// anyListener is a listener reference no one serves.
func anyListener() *djinnpb.Ref {
	return client.RefToProto(djinn.Ref{Endpoint: "127.0.0.1:1", Service: djinn.NewID(), Object: djinn.NewID()})
}

// pick is a capability as a call presents it: the real one, or a forged
// one, a random value of its size.
func pick(real bool, b []byte) []byte {
	if real {
		return b
	}
	id := djinn.NewID()
	return id[:]
}

// ok drops a call's answer, keeping its error.
func ok[T any](_ T, err error) error { return err }

const (
	admin       = "/djinn.v1.Admin/"
	listener    = "/djinn.v1.EventListener/"
	mailboxSvc  = "/djinn.v1.EventMailbox/"
	kvSvc       = "/djinn.v1.KeyValue/"
	landlordSvc = "/djinn.v1.Landlord/"
	renewalSvc  = "/djinn.v1.LeaseRenewalService/"
	lockSvc     = "/djinn.v1.LockService/"
	ldsSvc      = "/djinn.v1.LookupDiscoveryService/"
	lookupSvc   = "/djinn.v1.LookupService/"
	txnSvc      = "/djinn.v1.TransactionManager/"
	partSvc     = "/djinn.v1.TransactionParticipant/"
	joinSvc     = "/djinn.v1.JoinAdmin/"
)

// matrixRows is a call for every RPC the server serves, by full method
// name. Each names the row's resources, so the rule decides the outcome.
func matrixRows() map[string]call {
	rows := map[string]call{}
	for m, c := range adminRows() {
		rows[admin+m] = c
	}
	for m, c := range eventRows() {
		rows[m] = c
	}
	for m, c := range landlordRows() {
		rows[landlordSvc+m] = c
	}
	for m, c := range renewalRows() {
		rows[renewalSvc+m] = c
	}
	for m, c := range lockRows() {
		rows[lockSvc+m] = c
	}
	for m, c := range lookupRows() {
		rows[m] = c
	}
	for m, c := range txnRows() {
		rows[m] = c
	}
	for m, c := range joinRows() {
		rows[joinSvc+m] = c
	}
	for m, c := range publicRows() {
		rows[m] = c
	}
	return rows
}

func adminRows() map[string]call {
	a := func(c grpc.ClientConnInterface) djinnpb.AdminClient { return djinnpb.NewAdminClient(c) }
	// Membership calls that pass authorization fail on their arguments
	// (or on the node being the last voter) before they act.
	return map[string]call{
		"Status": func(ctx context.Context, c grpc.ClientConnInterface, _ *resources, _ bool) error {
			return ok(a(c).Status(ctx, &djinnpb.StatusRequest{}))
		},
		"Members": func(ctx context.Context, c grpc.ClientConnInterface, _ *resources, _ bool) error {
			return ok(a(c).Members(ctx, &djinnpb.MembersRequest{}))
		},
		"Join": func(ctx context.Context, c grpc.ClientConnInterface, _ *resources, _ bool) error {
			return ok(a(c).Join(ctx, &djinnpb.JoinRequest{NodeId: "matrix", RaftAddress: "127.0.0.1:1", GrpcAddress: "no address", RulesMax: state.MaxRules()}))
		},
		"AddMember": func(ctx context.Context, c grpc.ClientConnInterface, _ *resources, _ bool) error {
			return ok(a(c).AddMember(ctx, &djinnpb.AddMemberRequest{NodeId: "matrix", RaftAddress: "127.0.0.1:1", GrpcAddress: "no address"}))
		},
		"RemoveMember": func(ctx context.Context, c grpc.ClientConnInterface, r *resources, _ bool) error {
			return ok(a(c).RemoveMember(ctx, &djinnpb.RemoveMemberRequest{NodeId: r.nodeID()}))
		},
		"Leave": func(ctx context.Context, c grpc.ClientConnInterface, _ *resources, _ bool) error {
			return ok(a(c).Leave(ctx, &djinnpb.LeaveRequest{}))
		},
		"TransferLeadership": func(ctx context.Context, c grpc.ClientConnInterface, r *resources, _ bool) error {
			return ok(a(c).TransferLeadership(ctx, &djinnpb.TransferLeadershipRequest{NodeId: r.nodeID()}))
		},
		"SaveSnapshot": func(ctx context.Context, c grpc.ClientConnInterface, _ *resources, _ bool) error {
			s, err := a(c).SaveSnapshot(ctx, &djinnpb.SaveSnapshotRequest{})
			if err != nil {
				return err
			}
			return ok(recvFirst[*djinnpb.SnapshotChunk](s))
		},
	}
}

func eventRows() map[string]call {
	ev := func(r *resources, real bool) (*djinnpb.Ref, []byte) {
		l := r.mailbox().GetListener()
		return l, pick(real, l.GetObjectId())
	}
	mb := func(c grpc.ClientConnInterface) djinnpb.EventMailboxClient { return djinnpb.NewEventMailboxClient(c) }
	reg := func(r *resources) []byte { return r.mailbox().GetRegistrationId() }
	return map[string]call{
		listener + "Notify": func(ctx context.Context, c grpc.ClientConnInterface, r *resources, real bool) error {
			src, id := ev(r, real)
			return ok(djinnpb.NewEventListenerClient(c).Notify(ctx, &djinnpb.NotifyRequest{ListenerId: id, Event: &djinnpb.RemoteEvent{Source: src, EventId: 1, Sequence: 1}}))
		},
		listener + "NotifyBatch": func(ctx context.Context, c grpc.ClientConnInterface, r *resources, real bool) error {
			src, id := ev(r, real)
			resp, err := djinnpb.NewEventListenerClient(c).NotifyBatch(ctx, &djinnpb.NotifyBatchRequest{ListenerId: id, Events: []*djinnpb.RemoteEvent{{Source: src, EventId: 1, Sequence: 2}}})
			if err == nil && resp.GetError() != nil {
				err = grpcerr.FromProto(resp.GetError())
			}
			return err
		},
		listener + "StopDelivery": func(ctx context.Context, c grpc.ClientConnInterface, r *resources, real bool) error {
			_, id := ev(r, real)
			return ok(djinnpb.NewEventListenerClient(c).StopDelivery(ctx, &djinnpb.StopDeliveryRequest{ListenerId: id, DeliveryId: idBytes(djinn.NewID())}))
		},
		mailboxSvc + "Register": func(ctx context.Context, c grpc.ClientConnInterface, _ *resources, _ bool) error {
			return ok(mb(c).Register(ctx, &djinnpb.MailboxRegisterRequest{LeaseDurationNanos: int64(time.Minute)}))
		},
		mailboxSvc + "GetRegistration": func(ctx context.Context, c grpc.ClientConnInterface, r *resources, _ bool) error {
			return ok(mb(c).GetRegistration(ctx, &djinnpb.MailboxRegistrationRequest{RegistrationId: reg(r)}))
		},
		mailboxSvc + "EnableDelivery": func(ctx context.Context, c grpc.ClientConnInterface, r *resources, _ bool) error {
			return ok(mb(c).EnableDelivery(ctx, &djinnpb.EnableDeliveryRequest{RegistrationId: reg(r), Target: anyListener()}))
		},
		mailboxSvc + "DisableDelivery": func(ctx context.Context, c grpc.ClientConnInterface, r *resources, _ bool) error {
			return ok(mb(c).DisableDelivery(ctx, &djinnpb.MailboxRegistrationRequest{RegistrationId: reg(r)}))
		},
		mailboxSvc + "Pull": func(ctx context.Context, c grpc.ClientConnInterface, r *resources, _ bool) error {
			// Something to pull, so the owner's first answer comes at once.
			src, id := ev(r, true)
			if _, err := djinnpb.NewEventListenerClient(r.owner).Notify(ctx, &djinnpb.NotifyRequest{ListenerId: id, Event: &djinnpb.RemoteEvent{Source: src, EventId: 2, Sequence: 1}}); err != nil {
				return named("notify before the pull", err)
			}
			s, err := mb(c).Pull(ctx, &djinnpb.PullRequest{RegistrationId: reg(r)})
			if err != nil {
				return err
			}
			return ok(recvFirst[*djinnpb.PullResponse](s))
		},
		mailboxSvc + "Deliveries": func(ctx context.Context, c grpc.ClientConnInterface, r *resources, _ bool) error {
			// Something to deliver, so the owner's first answer comes at once.
			src, id := ev(r, true)
			if _, err := djinnpb.NewEventListenerClient(r.owner).Notify(ctx, &djinnpb.NotifyRequest{ListenerId: id, Event: &djinnpb.RemoteEvent{Source: src, EventId: 3, Sequence: 1}}); err != nil {
				return named("notify before the deliveries", err)
			}
			s, err := mb(c).Deliveries(ctx)
			if err == nil {
				err = s.Send(&djinnpb.DeliveriesRequest{RegistrationId: reg(r)})
			}
			if err != nil {
				return err
			}
			return ok(s.Recv())
		},
		mailboxSvc + "Ack": func(ctx context.Context, c grpc.ClientConnInterface, r *resources, _ bool) error {
			return ok(mb(c).Ack(ctx, &djinnpb.AckRequest{RegistrationId: reg(r), ThroughIndex: 1}))
		},
		mailboxSvc + "AddUnknownEvents": func(ctx context.Context, c grpc.ClientConnInterface, r *resources, _ bool) error {
			return ok(mb(c).AddUnknownEvents(ctx, &djinnpb.AddUnknownEventsRequest{RegistrationId: reg(r), Events: []*djinnpb.EventKey{{Source: anyListener(), EventId: 9}}}))
		},
		kvSvc + "Put": func(ctx context.Context, c grpc.ClientConnInterface, _ *resources, _ bool) error {
			return ok(djinnpb.NewKeyValueClient(c).Put(ctx, &djinnpb.KVPutRequest{Key: "k", Value: []byte("v")}))
		},
		kvSvc + "Get": func(ctx context.Context, c grpc.ClientConnInterface, _ *resources, _ bool) error {
			return ok(djinnpb.NewKeyValueClient(c).Get(ctx, &djinnpb.KVGetRequest{Key: "k"}))
		},
		kvSvc + "Delete": func(ctx context.Context, c grpc.ClientConnInterface, _ *resources, _ bool) error {
			return ok(djinnpb.NewKeyValueClient(c).Delete(ctx, &djinnpb.KVDeleteRequest{Key: "k"}))
		},
		kvSvc + "List": func(ctx context.Context, c grpc.ClientConnInterface, _ *resources, _ bool) error {
			return ok(djinnpb.NewKeyValueClient(c).List(ctx, &djinnpb.KVListRequest{}))
		},
	}
}

func landlordRows() map[string]call {
	l := func(c grpc.ClientConnInterface) djinnpb.LandlordClient { return djinnpb.NewLandlordClient(c) }
	cookie := func(r *resources, real bool) []byte { return pick(real, r.mailbox().GetLease().GetCookie()) }
	return map[string]call{
		"Renew": func(ctx context.Context, c grpc.ClientConnInterface, r *resources, real bool) error {
			return ok(l(c).Renew(ctx, &djinnpb.RenewRequest{Cookie: cookie(r, real), DurationNanos: hour}))
		},
		"Remaining": func(ctx context.Context, c grpc.ClientConnInterface, r *resources, real bool) error {
			return ok(l(c).Remaining(ctx, &djinnpb.RemainingRequest{Cookie: cookie(r, real)}))
		},
		"RenewAll": func(ctx context.Context, c grpc.ClientConnInterface, r *resources, real bool) error {
			resp, err := l(c).RenewAll(ctx, &djinnpb.RenewAllRequest{Cookies: cookie(r, real), DurationNanos: []int64{hour}})
			if err != nil {
				return err
			}
			return firstError(resp.GetErrors())
		},
		"RenewStream": func(ctx context.Context, c grpc.ClientConnInterface, r *resources, real bool) error {
			s, err := l(c).RenewStream(ctx)
			if err == nil {
				err = s.Send(&djinnpb.RenewRequest{Cookie: cookie(r, real), DurationNanos: hour})
			}
			if err != nil {
				return err
			}
			resp, err := s.Recv()
			if err == nil && resp.GetError() != nil {
				err = grpcerr.FromProto(resp.GetError())
			}
			return err
		},
		// Ending a lease is its owner's, whoever holds its cookie.
		"Cancel": func(ctx context.Context, c grpc.ClientConnInterface, r *resources, _ bool) error {
			return ok(l(c).Cancel(ctx, &djinnpb.CancelRequest{Cookie: cookie(r, true)}))
		},
		"CancelAll": func(ctx context.Context, c grpc.ClientConnInterface, r *resources, _ bool) error {
			resp, err := l(c).CancelAll(ctx, &djinnpb.CancelAllRequest{Cookies: cookie(r, true)})
			if err != nil {
				return err
			}
			return firstError(resp.GetErrors())
		},
	}
}

func renewalRows() map[string]call {
	rs := func(c grpc.ClientConnInterface) djinnpb.LeaseRenewalServiceClient {
		return djinnpb.NewLeaseRenewalServiceClient(c)
	}
	set := func(r *resources) []byte { return r.renewalSet().GetSet().GetObjectId() }
	return map[string]call{
		"CreateSet": func(ctx context.Context, c grpc.ClientConnInterface, _ *resources, _ bool) error {
			return ok(rs(c).CreateSet(ctx, &djinnpb.CreateSetRequest{LeaseDurationNanos: hour}))
		},
		"GetSet": func(ctx context.Context, c grpc.ClientConnInterface, r *resources, _ bool) error {
			return ok(rs(c).GetSet(ctx, &djinnpb.SetRequest{SetId: set(r)}))
		},
		"RenewFor": func(ctx context.Context, c grpc.ClientConnInterface, r *resources, _ bool) error {
			return ok(rs(c).RenewFor(ctx, &djinnpb.RenewForRequest{SetId: set(r), Lease: r.mailbox().GetLease(), DesiredDurationNanos: hour, RenewDurationNanos: hour}))
		},
		"Remove": func(ctx context.Context, c grpc.ClientConnInterface, r *resources, _ bool) error {
			return ok(rs(c).Remove(ctx, &djinnpb.RemoveRequest{SetId: set(r), Lease: r.mailbox().GetLease()}))
		},
		"GetLeases": func(ctx context.Context, c grpc.ClientConnInterface, r *resources, _ bool) error {
			return ok(rs(c).GetLeases(ctx, &djinnpb.GetLeasesRequest{SetId: set(r), Max: 100}))
		},
		"SetExpirationWarningListener": func(ctx context.Context, c grpc.ClientConnInterface, r *resources, _ bool) error {
			return ok(rs(c).SetExpirationWarningListener(ctx, &djinnpb.SetExpirationWarningListenerRequest{SetId: set(r), Listener: anyListener(), MinWarningNanos: int64(time.Minute)}))
		},
		"ClearExpirationWarningListener": func(ctx context.Context, c grpc.ClientConnInterface, r *resources, _ bool) error {
			return ok(rs(c).ClearExpirationWarningListener(ctx, &djinnpb.SetRequest{SetId: set(r)}))
		},
		"SetRenewalFailureListener": func(ctx context.Context, c grpc.ClientConnInterface, r *resources, _ bool) error {
			return ok(rs(c).SetRenewalFailureListener(ctx, &djinnpb.SetRenewalFailureListenerRequest{SetId: set(r), Listener: anyListener()}))
		},
		"ClearRenewalFailureListener": func(ctx context.Context, c grpc.ClientConnInterface, r *resources, _ bool) error {
			return ok(rs(c).ClearRenewalFailureListener(ctx, &djinnpb.SetRequest{SetId: set(r)}))
		},
	}
}

func lockRows() map[string]call {
	ls := func(c grpc.ClientConnInterface) djinnpb.LockServiceClient { return djinnpb.NewLockServiceClient(c) }
	w, rd := djinnpb.LockMode_LOCK_MODE_WRITE, djinnpb.LockMode_LOCK_MODE_READ
	// The set id is the capability: a forged one names no set.
	return map[string]call{
		"CreateSet": func(ctx context.Context, c grpc.ClientConnInterface, _ *resources, _ bool) error {
			return ok(ls(c).CreateSet(ctx, &djinnpb.CreateLockSetRequest{LeaseDurationNanos: hour}))
		},
		"CreateOwner": func(ctx context.Context, c grpc.ClientConnInterface, _ *resources, _ bool) error {
			return ok(ls(c).CreateOwner(ctx, &djinnpb.CreateLockOwnerRequest{LeaseDurationNanos: hour}))
		},
		"Lock": func(ctx context.Context, c grpc.ClientConnInterface, r *resources, real bool) error {
			return ok(ls(c).Lock(ctx, &djinnpb.LockRequest{SetId: pick(real, r.lockSet().GetSetId()), Holder: r.ownerHolder(), Mode: rd, Try: true}))
		},
		"ChangeMode": func(ctx context.Context, c grpc.ClientConnInterface, r *resources, real bool) error {
			return ok(ls(c).ChangeMode(ctx, &djinnpb.ChangeModeRequest{SetId: pick(real, r.heldSet()), Holder: r.ownerHolder(), Held: w, Mode: w}))
		},
		"Unlock": func(ctx context.Context, c grpc.ClientConnInterface, r *resources, real bool) error {
			return ok(ls(c).Unlock(ctx, &djinnpb.UnlockRequest{SetId: pick(real, r.heldSet()), Holder: r.ownerHolder(), Mode: w}))
		},
		"DropLocks": func(ctx context.Context, c grpc.ClientConnInterface, r *resources, real bool) error {
			return ok(ls(c).DropLocks(ctx, &djinnpb.DropLocksRequest{SetId: pick(real, r.txnSet()), Transaction: r.txnRef()}))
		},
		"Describe": func(ctx context.Context, c grpc.ClientConnInterface, r *resources, real bool) error {
			return ok(ls(c).Describe(ctx, &djinnpb.LockSetRequest{SetId: pick(real, r.lockSet().GetSetId())}))
		},
		"ValidateFence": func(ctx context.Context, c grpc.ClientConnInterface, r *resources, real bool) error {
			return ok(ls(c).ValidateFence(ctx, &djinnpb.ValidateFenceRequest{SetId: pick(real, r.heldSet()), Fence: 1}))
		},
	}
}

func lookupRows() map[string]call {
	lk := func(c grpc.ClientConnInterface) djinnpb.LookupServiceClient { return djinnpb.NewLookupServiceClient(c) }
	ld := func(c grpc.ClientConnInterface) djinnpb.LookupDiscoveryServiceClient {
		return djinnpb.NewLookupDiscoveryServiceClient(c)
	}
	attrs := func(r *resources) *djinnpb.AttributesRequest {
		return &djinnpb.AttributesRequest{LeaseCookie: r.lookupItem().GetLease().GetCookie(), Entries: item(djinn.NewID(), "more").GetEntries()}
	}
	browse := &djinnpb.BrowseRequest{Template: &djinnpb.ServiceTemplate{}}
	return map[string]call{
		lookupSvc + "Register": func(ctx context.Context, c grpc.ClientConnInterface, _ *resources, _ bool) error {
			return ok(lk(c).Register(ctx, &djinnpb.RegisterRequest{Item: item(djinn.NewID(), "x"), LeaseDurationNanos: hour}))
		},
		lookupSvc + "Lookup": func(ctx context.Context, c grpc.ClientConnInterface, _ *resources, _ bool) error {
			return ok(lk(c).Lookup(ctx, &djinnpb.LookupRequest{Template: &djinnpb.ServiceTemplate{}, MaxMatches: 1}))
		},
		lookupSvc + "LookupStream": func(ctx context.Context, c grpc.ClientConnInterface, _ *resources, _ bool) error {
			s, err := lk(c).LookupStream(ctx)
			if err == nil {
				err = s.Send(&djinnpb.LookupBatch{Lookups: []*djinnpb.LookupRequest{{Template: &djinnpb.ServiceTemplate{}, MaxMatches: 1}}})
			}
			if err != nil {
				return err
			}
			return ok(s.Recv())
		},
		lookupSvc + "Notify": func(ctx context.Context, c grpc.ClientConnInterface, _ *resources, _ bool) error {
			return ok(lk(c).Notify(ctx, &djinnpb.LookupNotifyRequest{Template: &djinnpb.ServiceTemplate{}, Transitions: 7, Listener: anyListener(), LeaseDurationNanos: hour}))
		},
		lookupSvc + "AddAttributes": func(ctx context.Context, c grpc.ClientConnInterface, r *resources, _ bool) error {
			return ok(lk(c).AddAttributes(ctx, attrs(r)))
		},
		lookupSvc + "ModifyAttributes": func(ctx context.Context, c grpc.ClientConnInterface, r *resources, _ bool) error {
			req := attrs(r)
			req.Templates = []*djinnpb.EntryTemplate{{Type: "Name"}}
			return ok(lk(c).ModifyAttributes(ctx, req))
		},
		lookupSvc + "SetAttributes": func(ctx context.Context, c grpc.ClientConnInterface, r *resources, _ bool) error {
			return ok(lk(c).SetAttributes(ctx, attrs(r)))
		},
		lookupSvc + "GetEntryTypes": func(ctx context.Context, c grpc.ClientConnInterface, _ *resources, _ bool) error {
			return ok(lk(c).GetEntryTypes(ctx, browse))
		},
		lookupSvc + "GetFieldValues": func(ctx context.Context, c grpc.ClientConnInterface, _ *resources, _ bool) error {
			return ok(lk(c).GetFieldValues(ctx, &djinnpb.BrowseRequest{Template: &djinnpb.ServiceTemplate{Entries: []*djinnpb.EntryTemplate{{Type: "Name"}}}, Field: "name"}))
		},
		lookupSvc + "GetServiceTypes": func(ctx context.Context, c grpc.ClientConnInterface, _ *resources, _ bool) error {
			return ok(lk(c).GetServiceTypes(ctx, browse))
		},
		lookupSvc + "GetRegistrar": func(ctx context.Context, c grpc.ClientConnInterface, _ *resources, _ bool) error {
			return ok(lk(c).GetRegistrar(ctx, &djinnpb.GetRegistrarRequest{}))
		},
		ldsSvc + "Register": func(ctx context.Context, c grpc.ClientConnInterface, _ *resources, _ bool) error {
			return ok(ld(c).Register(ctx, &djinnpb.LDSRegisterRequest{Locators: []string{"jini://127.0.0.1:1"}, Listener: anyListener(), LeaseDurationNanos: hour}))
		},
		ldsSvc + "GetRegistration": func(ctx context.Context, c grpc.ClientConnInterface, r *resources, _ bool) error {
			return ok(ld(c).GetRegistration(ctx, &djinnpb.LDSRegistrationRequest{LeaseCookie: r.ldsCookie()}))
		},
		ldsSvc + "GetRegistrars": func(ctx context.Context, c grpc.ClientConnInterface, r *resources, _ bool) error {
			return ok(ld(c).GetRegistrars(ctx, &djinnpb.LDSRegistrationRequest{LeaseCookie: r.ldsCookie()}))
		},
		ldsSvc + "ChangeGroups": func(ctx context.Context, c grpc.ClientConnInterface, r *resources, _ bool) error {
			return ok(ld(c).ChangeGroups(ctx, &djinnpb.LDSGroupsRequest{LeaseCookie: r.ldsCookie(), Op: djinnpb.SetOp_SET_OP_ADD, Groups: []string{"matrix"}}))
		},
		ldsSvc + "ChangeLocators": func(ctx context.Context, c grpc.ClientConnInterface, r *resources, _ bool) error {
			return ok(ld(c).ChangeLocators(ctx, &djinnpb.LDSLocatorsRequest{LeaseCookie: r.ldsCookie(), Op: djinnpb.SetOp_SET_OP_ADD, Locators: []string{"jini://127.0.0.1:2"}}))
		},
		ldsSvc + "Discard": func(ctx context.Context, c grpc.ClientConnInterface, r *resources, _ bool) error {
			return ok(ld(c).Discard(ctx, &djinnpb.LDSDiscardRequest{LeaseCookie: r.ldsCookie(), RegistrarServiceId: idBytes(djinn.NewID())}))
		},
	}
}

func txnRows() map[string]call {
	tm := func(c grpc.ClientConnInterface) djinnpb.TransactionManagerClient {
		return djinnpb.NewTransactionManagerClient(c)
	}
	// The secret is the capability; the id names the transaction.
	secret := func(r *resources, real bool) []byte { return pick(real, r.txn().GetSecret()) }
	part := func(ctx context.Context, c grpc.ClientConnInterface, r *resources, real bool, op djinnpb.ParticipantOp) error {
		tx, p := r.kvTxn()
		req := &djinnpb.ParticipantRequest{ParticipantId: p.GetObjectId(), Manager: tx.GetManager(), Id: tx.GetId(), Secret: pick(real, tx.GetSecret())}
		pc := djinnpb.NewTransactionParticipantClient(c)
		switch op {
		case djinnpb.ParticipantOp_PARTICIPANT_OP_PREPARE:
			return ok(pc.Prepare(ctx, req))
		case djinnpb.ParticipantOp_PARTICIPANT_OP_PREPARE_AND_COMMIT:
			return ok(pc.PrepareAndCommit(ctx, req))
		case djinnpb.ParticipantOp_PARTICIPANT_OP_COMMIT:
			return ok(pc.Commit(ctx, req))
		case djinnpb.ParticipantOp_PARTICIPANT_OP_ABORT:
			return ok(pc.Abort(ctx, req))
		}
		s, err := pc.Calls(ctx)
		if err == nil {
			err = s.Send(&djinnpb.ParticipantCall{Call: 1, Op: djinnpb.ParticipantOp_PARTICIPANT_OP_PREPARE, Request: req})
		}
		if err != nil {
			return err
		}
		a, err := s.Recv()
		if err == nil && a.GetError() != nil {
			err = grpcerr.FromProto(a.GetError())
		}
		return err
	}
	partRow := func(op djinnpb.ParticipantOp) call {
		return func(ctx context.Context, c grpc.ClientConnInterface, r *resources, real bool) error {
			return part(ctx, c, r, real, op)
		}
	}
	return map[string]call{
		txnSvc + "Create": func(ctx context.Context, c grpc.ClientConnInterface, _ *resources, _ bool) error {
			return ok(tm(c).Create(ctx, &djinnpb.CreateTransactionRequest{LeaseDurationNanos: hour}))
		},
		txnSvc + "List": func(ctx context.Context, c grpc.ClientConnInterface, _ *resources, _ bool) error {
			return ok(tm(c).List(ctx, &djinnpb.ListTransactionsRequest{}))
		},
		txnSvc + "Join": func(ctx context.Context, c grpc.ClientConnInterface, r *resources, real bool) error {
			return ok(tm(c).Join(ctx, &djinnpb.JoinTransactionRequest{Id: r.txn().GetId(), Secret: secret(r, real), Participant: anyListener(), CrashCount: 1}))
		},
		txnSvc + "GetState": func(ctx context.Context, c grpc.ClientConnInterface, r *resources, real bool) error {
			return ok(tm(c).GetState(ctx, &djinnpb.TransactionRequest{Id: r.txn().GetId(), Secret: secret(r, real)}))
		},
		txnSvc + "Promote": func(ctx context.Context, c grpc.ClientConnInterface, r *resources, real bool) error {
			return ok(tm(c).Promote(ctx, &djinnpb.PromoteRequest{Id: r.txn().GetId(), Secret: secret(r, real), Participants: []*djinnpb.Ref{anyListener()}, CrashCounts: []int64{1}}))
		},
		txnSvc + "Describe": func(ctx context.Context, c grpc.ClientConnInterface, r *resources, _ bool) error {
			return ok(tm(c).Describe(ctx, &djinnpb.TransactionRequest{Id: r.txn().GetId()}))
		},
		txnSvc + "Commit": func(ctx context.Context, c grpc.ClientConnInterface, r *resources, _ bool) error {
			return ok(tm(c).Commit(ctx, &djinnpb.CompleteTransactionRequest{Id: r.txn().GetId()}))
		},
		txnSvc + "Abort": func(ctx context.Context, c grpc.ClientConnInterface, r *resources, _ bool) error {
			return ok(tm(c).Abort(ctx, &djinnpb.CompleteTransactionRequest{Id: r.txn().GetId()}))
		},
		partSvc + "Prepare":          partRow(djinnpb.ParticipantOp_PARTICIPANT_OP_PREPARE),
		partSvc + "PrepareAndCommit": partRow(djinnpb.ParticipantOp_PARTICIPANT_OP_PREPARE_AND_COMMIT),
		partSvc + "Commit":           partRow(djinnpb.ParticipantOp_PARTICIPANT_OP_COMMIT),
		partSvc + "Abort":            partRow(djinnpb.ParticipantOp_PARTICIPANT_OP_ABORT),
		partSvc + "Calls":            partRow(djinnpb.ParticipantOp_PARTICIPANT_OP_UNSPECIFIED),
	}
}

func publicRows() map[string]call {
	return map[string]call{
		// A session's own rule; what it carries meets each call's rule
		// (every unary row runs in a session too).
		"/djinn.v1.Session/Open": func(ctx context.Context, c grpc.ClientConnInterface, _ *resources, _ bool) error {
			req, err := proto.Marshal(&djinnpb.MembersRequest{})
			if err != nil {
				return err
			}
			s, err := djinnpb.NewSessionClient(c).Open(ctx)
			if err == nil {
				err = s.Send(&djinnpb.SessionRequest{Calls: []*djinnpb.SessionCall{{Id: 7, Method: admin + "Members", Request: req}}})
			}
			if err != nil {
				return err
			}
			resp, err := s.Recv()
			if err == nil && len(resp.GetReplies()) != 1 {
				err = fmt.Errorf("session answered %d replies to one call", len(resp.GetReplies()))
			}
			if err == nil {
				err = sessionAnswer(resp.GetReplies()[0], &djinnpb.MembersResponse{})
			}
			return err
		},
		"/grpc.health.v1.Health/Check": func(ctx context.Context, c grpc.ClientConnInterface, _ *resources, _ bool) error {
			return ok(healthpb.NewHealthClient(c).Check(ctx, &healthpb.HealthCheckRequest{}))
		},
		"/grpc.health.v1.Health/List": func(ctx context.Context, c grpc.ClientConnInterface, _ *resources, _ bool) error {
			return ok(healthpb.NewHealthClient(c).List(ctx, &healthpb.HealthListRequest{}))
		},
		"/grpc.health.v1.Health/Watch": func(ctx context.Context, c grpc.ClientConnInterface, _ *resources, _ bool) error {
			s, err := healthpb.NewHealthClient(c).Watch(ctx, &healthpb.HealthCheckRequest{})
			if err != nil {
				return err
			}
			return ok(recvFirst[*healthpb.HealthCheckResponse](s))
		},
		"/grpc.reflection.v1.ServerReflection/ServerReflectionInfo": func(ctx context.Context, c grpc.ClientConnInterface, _ *resources, _ bool) error {
			s, err := reflectionv1.NewServerReflectionClient(c).ServerReflectionInfo(ctx)
			if err == nil {
				err = s.Send(&reflectionv1.ServerReflectionRequest{MessageRequest: &reflectionv1.ServerReflectionRequest_ListServices{}})
			}
			if err != nil {
				return err
			}
			return ok(s.Recv())
		},
		"/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo": func(ctx context.Context, c grpc.ClientConnInterface, _ *resources, _ bool) error {
			s, err := reflectionv1alpha.NewServerReflectionClient(c).ServerReflectionInfo(ctx)
			if err == nil {
				//lint:ignore SA1019 the server still serves v1alpha reflection for older tools, so the matrix drives it
				err = s.Send(&reflectionv1alpha.ServerReflectionRequest{MessageRequest: &reflectionv1alpha.ServerReflectionRequest_ListServices{}})
			}
			if err != nil {
				return err
			}
			return ok(s.Recv())
		},
	}
}

// joinRows change the mailbox's join: groups and attributes an operator
// may set, locators left empty so that nothing is dialled.
func joinRows() map[string]call {
	j := func(c grpc.ClientConnInterface) djinnpb.JoinAdminClient { return djinnpb.NewJoinAdminClient(c) }
	const svc = "mailbox"
	named := &djinnpb.JoinServiceRequest{Service: svc}
	groups := &djinnpb.JoinGroupsRequest{Service: svc, Groups: []string{"matrix"}}
	locators := &djinnpb.JoinLocatorsRequest{Service: svc}
	attrs := &djinnpb.JoinAttributesRequest{Service: svc, Attributes: []*djinnpb.Entry{{Type: "net.jini.lookup.entry.Comment", Fields: comment("matrix")}}}
	return map[string]call{
		"ListJoins": func(ctx context.Context, c grpc.ClientConnInterface, _ *resources, _ bool) error {
			return ok(j(c).ListJoins(ctx, &djinnpb.ListJoinsRequest{}))
		},
		"ResetJoin": func(ctx context.Context, c grpc.ClientConnInterface, _ *resources, _ bool) error {
			return ok(j(c).ResetJoin(ctx, named))
		},
		"GetLookupGroups": func(ctx context.Context, c grpc.ClientConnInterface, _ *resources, _ bool) error {
			return ok(j(c).GetLookupGroups(ctx, named))
		},
		"AddLookupGroups": func(ctx context.Context, c grpc.ClientConnInterface, _ *resources, _ bool) error {
			return ok(j(c).AddLookupGroups(ctx, groups))
		},
		"RemoveLookupGroups": func(ctx context.Context, c grpc.ClientConnInterface, _ *resources, _ bool) error {
			return ok(j(c).RemoveLookupGroups(ctx, groups))
		},
		"SetLookupGroups": func(ctx context.Context, c grpc.ClientConnInterface, _ *resources, _ bool) error {
			return ok(j(c).SetLookupGroups(ctx, groups))
		},
		"GetLookupLocators": func(ctx context.Context, c grpc.ClientConnInterface, _ *resources, _ bool) error {
			return ok(j(c).GetLookupLocators(ctx, named))
		},
		"AddLookupLocators": func(ctx context.Context, c grpc.ClientConnInterface, _ *resources, _ bool) error {
			return ok(j(c).AddLookupLocators(ctx, locators))
		},
		"RemoveLookupLocators": func(ctx context.Context, c grpc.ClientConnInterface, _ *resources, _ bool) error {
			return ok(j(c).RemoveLookupLocators(ctx, locators))
		},
		"SetLookupLocators": func(ctx context.Context, c grpc.ClientConnInterface, _ *resources, _ bool) error {
			return ok(j(c).SetLookupLocators(ctx, locators))
		},
		"GetLookupAttributes": func(ctx context.Context, c grpc.ClientConnInterface, _ *resources, _ bool) error {
			return ok(j(c).GetLookupAttributes(ctx, named))
		},
		"AddLookupAttributes": func(ctx context.Context, c grpc.ClientConnInterface, _ *resources, _ bool) error {
			return ok(j(c).AddLookupAttributes(ctx, attrs))
		},
		"ModifyLookupAttributes": func(ctx context.Context, c grpc.ClientConnInterface, _ *resources, _ bool) error {
			return ok(j(c).ModifyLookupAttributes(ctx, &djinnpb.JoinModifyRequest{Service: svc,
				Templates: []*djinnpb.EntryTemplate{{Type: "net.jini.lookup.entry.Comment"}},
				Changes:   []*djinnpb.Entry{{Type: "net.jini.lookup.entry.Comment", Fields: comment("modified")}}}))
		},
		"SetLookupAttributes": func(ctx context.Context, c grpc.ClientConnInterface, _ *resources, _ bool) error {
			return ok(j(c).SetLookupAttributes(ctx, attrs))
		},
	}
}

// comment is a Comment entry's fields.
func comment(text string) []*djinnpb.Field {
	return []*djinnpb.Field{{Name: "comment", Value: &djinnpb.Value{Kind: &djinnpb.Value_StringValue{StringValue: text}}}}
}

// hookRows are the rows of RPCs under an owner rule whose hook decides by
// the call's arguments: each variant wants the outcomes of the rule the
// hook applies to its arguments.
func hookRows() map[string][]variant {
	list := func(req *djinnpb.ListResourcesRequest, own bool) call {
		return func(ctx context.Context, c grpc.ClientConnInterface, r *resources, _ bool) error {
			mine := r.mailbox().GetRegistrationId()
			resp, err := djinnpb.NewResourcesClient(c).List(ctx, req)
			if err != nil || !own {
				return err
			}
			// The caller's own: the owner's registration is the owner's
			// answer alone.
			found := slices.ContainsFunc(resp.GetResources(), func(res *djinnpb.Resource) bool {
				return res.GetName() == djinn.ID(mine).String()
			})
			switch {
			case found && r.caller != asOwner:
				return fmt.Errorf("%w: %s lists the owner's registration", errLeaked, r.caller)
			case !found && r.caller == asOwner:
				return fmt.Errorf("%w: the owner's list lacks its registration", errWrongAnswer)
			}
			return nil
		}
	}
	return map[string][]variant{
		"/djinn.v1.Resources/List": {
			{" (own)", server.Authenticated, list(&djinnpb.ListResourcesRequest{Kind: "mailboxes"}, true)},
			{" (all)", server.Operator, list(&djinnpb.ListResourcesRequest{Kind: "mailboxes", All: true}, false)},
			{" (another principal's)", server.Operator, list(&djinnpb.ListResourcesRequest{Kind: "mailboxes", IsPrincipal: true, Principal: "cn:alice"}, false)},
		},
	}
}
