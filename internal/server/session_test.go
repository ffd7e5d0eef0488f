package server_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/internal/secret"
	"github.com/djinn-go/djinn/internal/server"
	"github.com/djinn-go/djinn/internal/server/servertest"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// rawSession drives a session stream by hand: calls by id, replies as
// they come, in whatever order.
type rawSession struct {
	t       *testing.T
	s       djinnpb.Session_OpenClient
	replies map[uint64]*djinnpb.SessionReply // received, not yet taken
	goaway  bool
}

// openSession opens a session on cc (a connection WithoutSession, so that
// nothing else uses one) with the stream metadata md, key-value pairs.
func openSession(t *testing.T, cc *grpc.ClientConn, md ...string) *rawSession {
	t.Helper()
	ctx := testContext(t)
	if len(md) > 0 {
		ctx = metadata.AppendToOutgoingContext(ctx, md...)
	}
	s, err := djinnpb.NewSessionClient(cc).Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return &rawSession{t: t, s: s, replies: map[uint64]*djinnpb.SessionReply{}}
}

// call sends one call.
func (r *rawSession) call(id uint64, method string, req proto.Message, md ...string) {
	r.t.Helper()
	b, err := proto.Marshal(req)
	if err != nil {
		r.t.Fatal(err)
	}
	r.send(&djinnpb.SessionCall{Id: id, Method: method, Request: b, Metadata: entries(md...)})
}

func (r *rawSession) send(calls ...*djinnpb.SessionCall) {
	r.t.Helper()
	if err := r.s.Send(&djinnpb.SessionRequest{Calls: calls}); err != nil {
		r.t.Fatal(err)
	}
}

func entries(kv ...string) []*djinnpb.MetadataEntry {
	var out []*djinnpb.MetadataEntry
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, &djinnpb.MetadataEntry{Key: kv[i], Value: []byte(kv[i+1])})
	}
	return out
}

// receive reads one message and keeps its replies; it returns the ids
// received.
func (r *rawSession) receive() []uint64 {
	r.t.Helper()
	resp, err := r.s.Recv()
	if err != nil {
		r.t.Fatalf("session ended: %v", err)
	}
	var ids []uint64
	for _, rep := range resp.GetReplies() {
		r.replies[rep.GetId()] = rep
		ids = append(ids, rep.GetId())
	}
	r.goaway = r.goaway || resp.GetGoaway()
	return ids
}

// reply waits for the reply to call id.
func (r *rawSession) reply(id uint64) *djinnpb.SessionReply {
	r.t.Helper()
	for {
		if rep, ok := r.replies[id]; ok {
			delete(r.replies, id)
			return rep
		}
		r.receive()
	}
}

// result waits for call id's reply and returns its response decoded into
// out, or its status as an error.
func (r *rawSession) result(id uint64, out proto.Message) error {
	r.t.Helper()
	rep := r.reply(id)
	if s := rep.GetStatus(); s != nil {
		return status.ErrorProto(&spb.Status{Code: s.GetCode(), Message: s.GetMessage(), Details: s.GetDetails()})
	}
	if err := proto.Unmarshal(rep.GetResponse(), out); err != nil {
		r.t.Fatalf("reply %d: %v", id, err)
	}
	return nil
}

// unaryConn is a connection whose calls are unary, and rawConn one for a
// raw session: neither uses a session of its own.
func unaryConn(t *testing.T, addr string, opts ...client.Option) *grpc.ClientConn {
	return servertest.Conn(t, addr, append(opts, client.WithoutSession())...)
}

// TestSessionCallsEveryService (DESIGN.md 7a): one session carries calls
// of every service, each answered as its unary call is.
func TestSessionCallsEveryService(t *testing.T) {
	t.Parallel()
	srv := servertest.Start(t, servertest.Config(t))
	s := openSession(t, unaryConn(t, srv.Addr()))
	s.call(1, djinnpb.EventMailbox_Register_FullMethodName, &djinnpb.MailboxRegisterRequest{LeaseDurationNanos: int64(time.Minute)})
	s.call(2, djinnpb.LockService_CreateSet_FullMethodName, &djinnpb.CreateLockSetRequest{LeaseDurationNanos: int64(time.Minute)})
	s.call(3, healthpb.Health_Check_FullMethodName, &healthpb.HealthCheckRequest{})
	var reg djinnpb.MailboxRegistration
	if err := s.result(1, &reg); err != nil || len(reg.GetRegistrationId()) != 16 {
		t.Fatalf("register in a session: %v, %v", &reg, err)
	}
	var set djinnpb.LockSetCreated
	if err := s.result(2, &set); err != nil || len(set.GetSetId()) != 16 {
		t.Fatalf("create a lock set in a session: %v, %v", &set, err)
	}
	var health healthpb.HealthCheckResponse
	if err := s.result(3, &health); err != nil || health.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health check in a session: %v, %v", &health, err)
	}
	s.call(4, djinnpb.Landlord_Renew_FullMethodName, &djinnpb.RenewRequest{Cookie: reg.GetLease().GetCookie(), DurationNanos: int64(time.Minute)})
	s.call(5, djinnpb.EventMailbox_GetRegistration_FullMethodName, &djinnpb.MailboxRegistrationRequest{RegistrationId: reg.GetRegistrationId()})
	var renewed djinnpb.RenewResponse
	if err := s.result(4, &renewed); err != nil || renewed.GetGrantedNanos() <= 0 {
		t.Fatalf("renew in a session: %v, %v", &renewed, err)
	}
	var got djinnpb.MailboxRegistration
	if err := s.result(5, &got); err != nil || !proto.Equal(got.GetListener(), reg.GetListener()) {
		t.Fatalf("get registration in a session: %v, %v; want %v", &got, err, &reg)
	}
}

// sessionCase is one call made unary and in a session by the same
// principal: the answers must be the same.
type sessionCase struct {
	name   string
	method string
	req    proto.Message
	reply  proto.Message
	md     []string // the call's metadata
}

// sameAnswers makes each case's call unary on cc and in a session on sc,
// and wants the same status (code and message) from both.
func sameAnswers(t *testing.T, cc, sc *grpc.ClientConn, cases []sessionCase) {
	t.Helper()
	s := openSession(t, sc)
	for i, c := range cases {
		ctx := testContext(t)
		if len(c.md) > 0 {
			ctx = metadata.AppendToOutgoingContext(ctx, c.md...)
		}
		uerr := cc.Invoke(ctx, c.method, c.req, proto.Clone(c.reply))
		s.call(uint64(i+1), c.method, c.req, c.md...)
		serr := s.result(uint64(i+1), proto.Clone(c.reply))
		us, ss := status.Convert(uerr), status.Convert(serr)
		if us.Code() != ss.Code() || us.Message() != ss.Message() {
			t.Errorf("%s: unary %v %q, in a session %v %q", c.name, us.Code(), us.Message(), ss.Code(), ss.Message())
		}
	}
}

// TestSessionAuthorizesEveryCall (DESIGN.md 7): a call in a session is
// authorized by its own method's rule, for the stream's principal: every
// kind of rule answers in a session exactly as the unary call does, so a
// session is no way around any of them.
func TestSessionAuthorizesEveryCall(t *testing.T) {
	t.Parallel()
	pki := servertest.NewPKI(t)
	srv := servertest.Start(t, mtlsConfig(t, pki, servertest.ServerNode, "cn:ops"))
	alice := servertest.Dial(t, srv.Addr(), client.WithTLS(pki.ClientTLS()))
	reg, err := alice.Mailbox().Register(testContext(t), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	regReq := &djinnpb.MailboxRegistrationRequest{RegistrationId: idBytes(reg.ID)}
	cases := []sessionCase{
		{"public: health", healthpb.Health_Check_FullMethodName, &healthpb.HealthCheckRequest{}, &healthpb.HealthCheckResponse{}, nil},
		{"authenticated: register", djinnpb.EventMailbox_Register_FullMethodName, &djinnpb.MailboxRegisterRequest{LeaseDurationNanos: int64(time.Minute)}, &djinnpb.MailboxRegistration{}, nil},
		{"owner: another's registration", djinnpb.EventMailbox_GetRegistration_FullMethodName, regReq, &djinnpb.MailboxRegistration{}, nil},
		{"owner: another's delivery", djinnpb.EventMailbox_DisableDelivery_FullMethodName, regReq, &djinnpb.DisableDeliveryResponse{}, nil},
		{"capability: an unknown cookie", djinnpb.Landlord_Renew_FullMethodName, &djinnpb.RenewRequest{Cookie: make([]byte, 16), DurationNanos: int64(time.Minute)}, &djinnpb.RenewResponse{}, nil},
		{"capability: a malformed cookie", djinnpb.Landlord_Renew_FullMethodName, &djinnpb.RenewRequest{Cookie: []byte("short"), DurationNanos: int64(time.Minute)}, &djinnpb.RenewResponse{}, nil},
		{"operator: add a member", djinnpb.Admin_AddMember_FullMethodName, &djinnpb.AddMemberRequest{NodeId: "evil", RaftAddress: "127.0.0.1:1", GrpcAddress: "bad address"}, &djinnpb.AddMemberResponse{}, nil},
		{"operator: leave", djinnpb.Admin_Leave_FullMethodName, &djinnpb.LeaveRequest{}, &djinnpb.LeaveResponse{}, nil},
		{"peer: join", djinnpb.Admin_Join_FullMethodName, &djinnpb.JoinRequest{NodeId: "evil", RaftAddress: "127.0.0.1:1", GrpcAddress: "x:1"}, &djinnpb.JoinResponse{}, nil},
		{"peer: remove a member", djinnpb.Admin_RemoveMember_FullMethodName, &djinnpb.RemoveMemberRequest{NodeId: "no-such-node"}, &djinnpb.RemoveMemberResponse{}, nil},
		{"the call's transaction, malformed", djinnpb.LockService_Lock_FullMethodName, &djinnpb.LockRequest{SetId: make([]byte, 16), Mode: djinnpb.LockMode_LOCK_MODE_WRITE}, &djinnpb.LockResponse{}, []string{client.TxnIDMetadataKey, "x"}},
	}
	bob := client.WithTLS(pki.TLSFor(pki.NewClient(t, "bob")))
	ops := client.WithTLS(pki.TLSFor(pki.NewClient(t, "ops")))
	t.Run("another principal", func(t *testing.T) {
		sameAnswers(t, unaryConn(t, srv.Addr(), bob), unaryConn(t, srv.Addr(), bob), cases)
	})
	t.Run("an operator", func(t *testing.T) {
		sameAnswers(t, unaryConn(t, srv.Addr(), ops), unaryConn(t, srv.Addr(), ops), cases[6:7])
	})
	t.Run("the owner", func(t *testing.T) {
		me := client.WithTLS(pki.ClientTLS())
		sameAnswers(t, unaryConn(t, srv.Addr(), me), unaryConn(t, srv.Addr(), me), cases[2:3])
	})
}

// TestSessionJoinSecret: without TLS the operator is whoever presents the
// join secret, with the session's stream or with the call itself, as a
// unary call presents it; a session without it gets no operator call.
func TestSessionJoinSecret(t *testing.T) {
	t.Parallel()
	srv := servertest.Start(t, servertest.Config(t))
	sec, err := secret.Load(servertest.SecretFile(srv))
	if err != nil {
		t.Fatal(err)
	}
	add := func() proto.Message {
		return &djinnpb.AddMemberRequest{NodeId: "evil", RaftAddress: "127.0.0.1:1", GrpcAddress: "bad address"}
	}
	plain := openSession(t, unaryConn(t, srv.Addr()))
	plain.call(1, djinnpb.Admin_AddMember_FullMethodName, add())
	if err := plain.result(1, &djinnpb.AddMemberResponse{}); status.Code(err) != codes.PermissionDenied {
		t.Errorf("AddMember in a session without the secret: %v, want PermissionDenied", err)
	}
	plain.call(2, djinnpb.Admin_AddMember_FullMethodName, add(), secret.Header, sec.String())
	if err := plain.result(2, &djinnpb.AddMemberResponse{}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("AddMember with the secret in the call's metadata: %v, want past authorization (InvalidArgument for its address)", err)
	}
	withSecret := openSession(t, unaryConn(t, srv.Addr()), secret.Header, sec.String())
	withSecret.call(1, djinnpb.Admin_AddMember_FullMethodName, add())
	if err := withSecret.result(1, &djinnpb.AddMemberResponse{}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("AddMember in a session opened with the secret: %v, want past authorization (InvalidArgument for its address)", err)
	}
	withSecret.call(2, djinnpb.Admin_AddMember_FullMethodName, add(), secret.Header, "not-the-secret")
	if err := withSecret.result(2, &djinnpb.AddMemberResponse{}); status.Code(err) != codes.PermissionDenied {
		t.Errorf("a call whose own metadata replaces the stream's secret with a wrong one: %v, want PermissionDenied", err)
	}
}

// TestSessionAnswersOutOfOrder: a call that waits (a lock held by
// another) does not hold up the calls after it, and a call the client
// cancels is answered Canceled.
func TestSessionAnswersOutOfOrder(t *testing.T) {
	t.Parallel()
	srv := servertest.Start(t, servertest.Config(t))
	ls := djinnpb.NewLockServiceClient(unaryConn(t, srv.Addr()))
	ctx := testContext(t)
	set, holders := heldLockSet(ctx, t, ls, 3)
	b, c := holders[1], holders[2]
	w := djinnpb.LockMode_LOCK_MODE_WRITE
	waiters := func(n int) func() bool {
		return func() bool {
			d, err := ls.Describe(ctx, &djinnpb.LockSetRequest{SetId: set.GetSetId()})
			return err == nil && len(d.GetWaiters()) == n
		}
	}
	s := openSession(t, unaryConn(t, srv.Addr()))
	s.call(1, djinnpb.LockService_Lock_FullMethodName, &djinnpb.LockRequest{SetId: set.GetSetId(), Holder: b, Mode: w})
	servertest.Eventually(t, "the first lock to wait", waiters(1))
	s.call(2, djinnpb.LockService_Lock_FullMethodName, &djinnpb.LockRequest{SetId: set.GetSetId(), Holder: c, Mode: w})
	servertest.Eventually(t, "the second lock to wait", waiters(2))
	s.call(3, djinnpb.Landlord_Renew_FullMethodName, &djinnpb.RenewRequest{Cookie: set.GetLease().GetCookie(), DurationNanos: int64(time.Minute)})
	if err := s.result(3, &djinnpb.RenewResponse{}); err != nil {
		t.Fatalf("a renewal after two waiting locks: %v", err)
	}
	if err := s.s.Send(&djinnpb.SessionRequest{Cancel: []uint64{2}}); err != nil {
		t.Fatal(err)
	}
	if err := s.result(2, &djinnpb.LockResponse{}); status.Code(err) != codes.Canceled {
		t.Errorf("a waiting lock the client cancelled: %v, want Canceled", err)
	}
	if _, ok := s.replies[1]; ok {
		t.Fatal("the first waiting lock was answered while another held the lock")
	}
	if _, err := ls.Unlock(ctx, &djinnpb.UnlockRequest{SetId: set.GetSetId(), Holder: holders[0], Mode: w}); err != nil {
		t.Fatal(err)
	}
	var granted djinnpb.LockResponse
	if err := s.result(1, &granted); err != nil || !granted.GetGranted() {
		t.Fatalf("the waiting lock once released: %v, %v; want granted", &granted, err)
	}
}

// TestSessionRefusesBadCalls: what a unary call could not be is refused
// per call, naming what is wrong, and the session goes on; an id reused
// while its call is in flight ends the session.
func TestSessionRefusesBadCalls(t *testing.T) {
	t.Parallel()
	srv := servertest.Start(t, servertest.Config(t))
	s := openSession(t, unaryConn(t, srv.Addr()))
	s.send(&djinnpb.SessionCall{Id: 1, Method: "/djinn.v1.Nothing/Here"},
		&djinnpb.SessionCall{Id: 2, Method: djinnpb.EventMailbox_Register_FullMethodName, Request: []byte{0xff, 0xff}},
		&djinnpb.SessionCall{Id: 3, Method: healthpb.Health_Check_FullMethodName, Metadata: entries("Bad Key", "x")},
		&djinnpb.SessionCall{Id: 4, Method: healthpb.Health_Check_FullMethodName, Metadata: entries("grpc-timeout", "1S")},
		&djinnpb.SessionCall{Id: 5, Method: djinnpb.Session_Open_FullMethodName},
		&djinnpb.SessionCall{Id: 8, Method: healthpb.Health_Check_FullMethodName, TimeoutNanos: -5},
	)
	for _, tt := range []struct {
		id   uint64
		code codes.Code
		text string
	}{
		{1, codes.Unimplemented, "/djinn.v1.Nothing/Here"},
		{2, codes.InvalidArgument, "djinn.v1.MailboxRegisterRequest does not decode"},
		{3, codes.InvalidArgument, `"Bad Key"`},
		{4, codes.InvalidArgument, `"grpc-timeout"`},
		{5, codes.Unimplemented, "not served in a session"},
		// A negative timeout was taken as none: the call ran unbounded.
		{8, codes.InvalidArgument, "timeout_nanos -5"},
	} {
		err := s.result(tt.id, &healthpb.HealthCheckResponse{})
		if status.Code(err) != tt.code || !strings.Contains(status.Convert(err).Message(), tt.text) {
			t.Errorf("call %d: %v, want %v naming %s", tt.id, err, tt.code, tt.text)
		}
	}
	s.call(6, healthpb.Health_Check_FullMethodName, &healthpb.HealthCheckRequest{})
	if err := s.result(6, &healthpb.HealthCheckResponse{}); err != nil {
		t.Fatalf("a good call after bad ones: %v", err)
	}

	// Two waiting calls under one id.
	ls := djinnpb.NewLockServiceClient(unaryConn(t, srv.Addr()))
	set, err := ls.CreateSet(testContext(t), &djinnpb.CreateLockSetRequest{LeaseDurationNanos: int64(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	o, err := ls.CreateOwner(testContext(t), &djinnpb.CreateLockOwnerRequest{LeaseDurationNanos: int64(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	holder := &djinnpb.LockHolder{Owner: o.GetLease().GetCookie()}
	if _, err := ls.Lock(testContext(t), &djinnpb.LockRequest{SetId: set.GetSetId(), Holder: holder, Mode: djinnpb.LockMode_LOCK_MODE_WRITE}); err != nil {
		t.Fatal(err)
	}
	other, err := ls.CreateOwner(testContext(t), &djinnpb.CreateLockOwnerRequest{LeaseDurationNanos: int64(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	wait := &djinnpb.LockRequest{SetId: set.GetSetId(), Holder: &djinnpb.LockHolder{Owner: other.GetLease().GetCookie()}, Mode: djinnpb.LockMode_LOCK_MODE_WRITE}
	s.call(7, djinnpb.LockService_Lock_FullMethodName, wait)
	s.call(7, djinnpb.LockService_Lock_FullMethodName, wait)
	for {
		if _, err := s.s.Recv(); err != nil {
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "id 7") {
				t.Fatalf("a reused id: the session ended with %v, want InvalidArgument naming id 7", err)
			}
			break
		}
	}
}

// TestSessionDeadline: a call's timeout bounds it as a unary call's
// deadline does.
func TestSessionDeadline(t *testing.T) {
	t.Parallel()
	srv := servertest.Start(t, servertest.Config(t))
	ls := djinnpb.NewLockServiceClient(unaryConn(t, srv.Addr()))
	ctx := testContext(t)
	set, holders := heldLockSet(ctx, t, ls, 2)
	w := djinnpb.LockMode_LOCK_MODE_WRITE
	s := openSession(t, unaryConn(t, srv.Addr()))
	b, err := proto.Marshal(&djinnpb.LockRequest{SetId: set.GetSetId(), Holder: holders[1], Mode: w})
	if err != nil {
		t.Fatal(err)
	}
	s.send(&djinnpb.SessionCall{Id: 1, Method: djinnpb.LockService_Lock_FullMethodName, Request: b, TimeoutNanos: int64(50 * time.Millisecond)})
	if err := s.result(1, &djinnpb.LockResponse{}); status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("a waiting lock past its timeout: %v, want DeadlineExceeded", err)
	}
}

// heldLockSet makes a lock set and n owners, the first holding the set's
// write lock: it returns the set and the holders.
func heldLockSet(ctx context.Context, t *testing.T, ls djinnpb.LockServiceClient, n int) (*djinnpb.LockSetCreated, []*djinnpb.LockHolder) {
	t.Helper()
	set, err := ls.CreateSet(ctx, &djinnpb.CreateLockSetRequest{LeaseDurationNanos: int64(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	var holders []*djinnpb.LockHolder
	for range n {
		o, err := ls.CreateOwner(ctx, &djinnpb.CreateLockOwnerRequest{LeaseDurationNanos: int64(time.Minute)})
		if err != nil {
			t.Fatal(err)
		}
		holders = append(holders, &djinnpb.LockHolder{Owner: o.GetLease().GetCookie()})
	}
	w := djinnpb.LockMode_LOCK_MODE_WRITE
	if _, err := ls.Lock(ctx, &djinnpb.LockRequest{SetId: set.GetSetId(), Holder: holders[0], Mode: w}); err != nil {
		t.Fatal(err)
	}
	return set, holders
}

// TestSessionStreamEndEndsCalls: a call waiting when its session's stream
// ends — after the client closed its side, so only the stream's end can
// reach it — is ended with it, as a unary call is when its stream ends:
// the lock it waited for no longer counts it.
func TestSessionStreamEndEndsCalls(t *testing.T) {
	t.Parallel()
	srv := servertest.Start(t, servertest.Config(t))
	ls := djinnpb.NewLockServiceClient(unaryConn(t, srv.Addr()))
	ctx := testContext(t)
	set, holders := heldLockSet(ctx, t, ls, 2)
	w := djinnpb.LockMode_LOCK_MODE_WRITE
	waiters := func(n int) func() bool {
		return func() bool {
			d, err := ls.Describe(ctx, &djinnpb.LockSetRequest{SetId: set.GetSetId()})
			return err == nil && len(d.GetWaiters()) == n
		}
	}
	sctx, end := context.WithCancel(ctx)
	stream, err := djinnpb.NewSessionClient(unaryConn(t, srv.Addr())).Open(sctx)
	if err != nil {
		t.Fatal(err)
	}
	s := &rawSession{t: t, s: stream, replies: map[uint64]*djinnpb.SessionReply{}}
	s.call(1, djinnpb.LockService_Lock_FullMethodName, &djinnpb.LockRequest{SetId: set.GetSetId(), Holder: holders[1], Mode: w})
	servertest.Eventually(t, "the lock to wait", waiters(1))
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	end()
	servertest.Eventually(t, "the waiting lock to end with its stream", waiters(0))
}

// TestSessionLeaderHint: a follower answers a session's write as it
// answers the unary call: Unavailable, naming the leader in the
// djinn-leader trailer.
func TestSessionLeaderHint(t *testing.T) {
	t.Parallel()
	ss := followCluster(t)
	leader := leaderOf(t, ss...)
	var follower *server.Server
	for _, s := range ss {
		if s != leader {
			follower = s
			break
		}
	}
	s := openSession(t, unaryConn(t, follower.Addr()))
	s.call(1, djinnpb.EventMailbox_Register_FullMethodName, &djinnpb.MailboxRegisterRequest{LeaseDurationNanos: int64(time.Minute)})
	rep := s.reply(1)
	if codes.Code(rep.GetStatus().GetCode()) != codes.Unavailable {
		t.Fatalf("a follower's answer to register: %v, want Unavailable", rep.GetStatus())
	}
	hint := ""
	for _, e := range rep.GetTrailer() {
		if e.GetKey() == server.LeaderTrailer {
			hint = string(e.GetValue())
		}
	}
	if hint != leader.Advertise() {
		t.Errorf("leader hint %q, want %q", hint, leader.Advertise())
	}
}

// TestSessionCallsCounted: a call in a session is counted under its own
// method in the gRPC metrics, and in the session counters.
func TestSessionCallsCounted(t *testing.T) {
	t.Parallel()
	srv := servertest.Start(t, servertest.Config(t))
	before := metricValue(t, srv, `grpc_server_handled_total{grpc_code="OK",grpc_method="Check",grpc_service="grpc.health.v1.Health",grpc_type="unary"}`)
	s := openSession(t, unaryConn(t, srv.Addr()))
	for id := uint64(1); id <= 3; id++ {
		s.call(id, healthpb.Health_Check_FullMethodName, &healthpb.HealthCheckRequest{})
	}
	for id := uint64(1); id <= 3; id++ {
		if err := s.result(id, &healthpb.HealthCheckResponse{}); err != nil {
			t.Fatal(err)
		}
	}
	after := metricValue(t, srv, `grpc_server_handled_total{grpc_code="OK",grpc_method="Check",grpc_service="grpc.health.v1.Health",grpc_type="unary"}`)
	if after-before != 3 {
		t.Errorf("health checks counted %v, want the 3 made in a session", after-before)
	}
	if n := metricValue(t, srv, "djinn_session_calls_total"); n < 3 {
		t.Errorf("djinn_session_calls_total %v, want at least 3", n)
	}
	if n := metricValue(t, srv, "djinn_sessions"); n < 1 {
		t.Errorf("djinn_sessions %v with one open, want at least 1", n)
	}
}

// metricValue reads one series of the server's /metrics.
func metricValue(t *testing.T, srv *server.Server, series string) float64 {
	t.Helper()
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: servertest.Timeout}
	resp, err := hc.Get("http://" + srv.AdminAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for l := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), series+" "); ok {
			if f, err := strconv.ParseFloat(v, 64); err == nil {
				return f
			}
		}
	}
	return 0
}

// TestSessionGoaway: a server that closes tells its sessions, answers the
// calls it has read, and ends each session once its client has closed its
// side.
func TestSessionGoaway(t *testing.T) {
	t.Parallel()
	srv := servertest.Start(t, servertest.Config(t))
	s := openSession(t, unaryConn(t, srv.Addr()))
	s.call(1, healthpb.Health_Check_FullMethodName, &healthpb.HealthCheckRequest{})
	if err := s.result(1, &healthpb.HealthCheckResponse{}); err != nil {
		t.Fatal(err)
	}
	closed := make(chan error, 1)
	go func() { closed <- srv.Close() }()
	for !s.goaway {
		s.receive()
	}
	if err := s.s.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.s.Recv(); !errors.Is(err, io.EOF) {
		t.Errorf("the session after goaway and the client's close: %v, want its end (EOF)", err)
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
}

// FuzzSessionRequest: whatever a client sends in a session — any method
// name, request bytes, metadata, ids, cancellations — the server answers
// or ends the session with a status, never hangs or panics, and serves on.
func FuzzSessionRequest(f *testing.F) {
	for _, req := range []*djinnpb.SessionRequest{
		{Calls: []*djinnpb.SessionCall{{Id: 1, Method: healthpb.Health_Check_FullMethodName}}},
		{Calls: []*djinnpb.SessionCall{{Id: 1, Method: djinnpb.EventMailbox_Register_FullMethodName, Request: []byte{0x08, 0x01}}}, Cancel: []uint64{1}},
		{Calls: []*djinnpb.SessionCall{{Id: 7, Method: djinnpb.Landlord_Renew_FullMethodName, Request: []byte{0x0a, 0x02, 0x01}}, {Id: 7}}},
		{Calls: []*djinnpb.SessionCall{{Id: 2, Method: djinnpb.LockService_Lock_FullMethodName, Metadata: entries(client.TxnIDMetadataKey, "1")}}},
	} {
		b, err := proto.Marshal(req)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	srv := servertest.Start(f, servertest.Config(f))
	cc := servertest.Conn(f, srv.Addr(), client.WithoutSession())
	f.Fuzz(func(t *testing.T, b []byte) {
		var req djinnpb.SessionRequest
		if proto.Unmarshal(b, &req) != nil || len(req.Calls) > 16 {
			return
		}
		for _, c := range req.Calls {
			c.TimeoutNanos = int64(2 * time.Second) // a lock may wait: bounded
		}
		s := openSession(t, cc)
		if err := s.s.Send(&req); err != nil {
			t.Fatal(err)
		}
		if err := s.s.CloseSend(); err != nil {
			t.Fatal(err)
		}
		for {
			_, err := s.s.Recv()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				if _, ok := status.FromError(err); !ok || status.Code(err) == codes.Internal || status.Code(err) == codes.Unknown {
					t.Fatalf("session ended with %v", err)
				}
				break
			}
		}
		if _, err := healthpb.NewHealthClient(cc).Check(testContext(t), &healthpb.HealthCheckRequest{}); err != nil {
			t.Fatalf("the server after the session: %v", err)
		}
	})
}

// TestSessionPooledCallsKeepTheirOwn: calls in flight at once, on pooled
// call objects reused round after round, each decode their own request
// and get their own answer, with their own status and trailer. Run it
// with -race.
func TestSessionPooledCallsKeepTheirOwn(t *testing.T) {
	t.Parallel()
	srv := servertest.Start(t, servertest.Config(t))
	mb := djinnpb.NewEventMailboxClient(unaryConn(t, srv.Addr()))
	ctx := testContext(t)
	var regs [][]byte
	for range 8 {
		r, err := mb.Register(ctx, &djinnpb.MailboxRegisterRequest{LeaseDurationNanos: int64(time.Minute)})
		if err != nil {
			t.Fatal(err)
		}
		regs = append(regs, r.GetRegistrationId())
	}
	unknown := make([]byte, 16)
	s := openSession(t, unaryConn(t, srv.Addr()))
	for round := range 20 {
		var calls []*djinnpb.SessionCall
		for i := range 2 * len(regs) {
			id := uint64(round*100 + i)
			want := unknown
			if i%2 == 0 {
				want = regs[i/2]
			}
			b, err := proto.Marshal(&djinnpb.MailboxRegistrationRequest{RegistrationId: want})
			if err != nil {
				t.Fatal(err)
			}
			calls = append(calls, &djinnpb.SessionCall{Id: id, Method: djinnpb.EventMailbox_GetRegistration_FullMethodName, Request: b})
		}
		s.send(calls...)
		for i := range 2 * len(regs) {
			id := uint64(round*100 + i)
			var got djinnpb.MailboxRegistration
			err := s.result(id, &got)
			if i%2 == 1 {
				if status.Code(err) != codes.NotFound {
					t.Fatalf("round %d call %d, an unknown registration: %v, want NotFound", round, id, err)
				}
				continue
			}
			if err != nil || string(got.GetRegistrationId()) != string(regs[i/2]) {
				t.Fatalf("round %d call %d: registration %x, %v; want %x", round, id, got.GetRegistrationId(), err, regs[i/2])
			}
		}
	}
}
