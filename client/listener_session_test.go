package client

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/grpcerr"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// rawSession opens a session to a listener's server with a plain gRPC
// connection, as a generator's connection does.
func rawSession(t *testing.T, l *Listener) djinnpb.Session_OpenClient {
	t.Helper()
	cc, err := grpc.NewClient(l.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	s, err := djinnpb.NewSessionClient(cc).Open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func notifyCall(t *testing.T, id uint64, l *Listener, ev *RemoteEvent) *djinnpb.SessionCall {
	t.Helper()
	b, err := proto.Marshal(&djinnpb.NotifyRequest{ListenerId: l.id[:], Event: ev.Proto()})
	if err != nil {
		t.Fatal(err)
	}
	return &djinnpb.SessionCall{Id: id, Method: djinnpb.EventListener_Notify_FullMethodName, Request: b}
}

// replies reads until n replies came, by call id.
func replies(t *testing.T, s djinnpb.Session_OpenClient, n int) map[uint64]*djinnpb.SessionReply {
	t.Helper()
	out := map[uint64]*djinnpb.SessionReply{}
	for len(out) < n {
		resp, err := s.Recv()
		if err != nil {
			t.Fatalf("session ended after %d replies of %d: %v", len(out), n, err)
		}
		for _, r := range resp.GetReplies() {
			out[r.GetId()] = r
		}
	}
	return out
}

func replyErr(r *djinnpb.SessionReply) error {
	s := r.GetStatus()
	if s == nil {
		return nil
	}
	return grpcerr.FromStatus(status.FromProto(&spb.Status{Code: s.GetCode(), Message: s.GetMessage(), Details: s.GetDetails()}).Err())
}

// A listener serves its EventListener calls in a session too, each the
// unary call it names (EV.2.3.2 delivery, EV.2.3.3 UnknownEvent, errors with
// their kind); a method it does not serve there is answered Unimplemented,
// which tells the caller to make it on its own.
func TestListenerServesSessions(t *testing.T) {
	var rec recorder
	l := startListener(t, rec.notify)
	s := rawSession(t, l)
	ok := testEvent(1, "ok")
	calls := []*djinnpb.SessionCall{
		notifyCall(t, 1, l, ok),
		notifyCall(t, 2, l, testEvent(2, "unknown")),
		notifyCall(t, 3, l, testEvent(3, "plain")),
		{Id: 4, Method: djinnpb.EventListener_Notify_FullMethodName, Request: []byte{0xff, 0xff}},
		{Id: 5, Method: djinnpb.Landlord_Renew_FullMethodName},
	}
	if err := s.Send(&djinnpb.SessionRequest{Calls: calls}); err != nil {
		t.Fatal(err)
	}
	got := replies(t, s, len(calls))
	if err := replyErr(got[1]); err != nil || !proto.Equal(mustUnmarshal(t, got[1].GetResponse()), &djinnpb.NotifyResponse{}) {
		t.Errorf("EV.2.3.2 delivered in a session: %v", err)
	}
	if ev := rec.events(); len(ev) != 1 || !ev[0].Equal(ok) {
		t.Errorf("EV.2.3.2 listener got %+v, want the one event", ev)
	}
	for _, tt := range []struct {
		name string
		id   uint64
		want error
	}{
		{"EV.2.3.3 UnknownEventException travels in the session", 2, djinn.ErrUnknownEvent},
		{"an error without a kind is internal", 3, djinn.ErrInternal},
		{"a request that does not decode is refused", 4, djinn.ErrInvalidArgument},
	} {
		if err := replyErr(got[tt.id]); !errors.Is(err, tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, err, tt.want)
		}
	}
	if c := codes.Code(got[5].GetStatus().GetCode()); c != codes.Unimplemented {
		t.Errorf("another service's method: %s, want Unimplemented", c)
	}
}

func mustUnmarshal(t *testing.T, b []byte) *djinnpb.NotifyResponse {
	t.Helper()
	var r djinnpb.NotifyResponse
	if err := proto.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return &r
}

// A session call the sender cancels ends as a unary call whose caller goes
// away: the listener's context ends, and the call is answered Canceled.
func TestListenerSessionCancel(t *testing.T) {
	started := make(chan struct{})
	l := startListener(t, func(ctx context.Context, _ *RemoteEvent) error {
		close(started)
		<-ctx.Done()
		return ctx.Err()
	})
	s := rawSession(t, l)
	if err := s.Send(&djinnpb.SessionRequest{Calls: []*djinnpb.SessionCall{notifyCall(t, 7, l, testEvent(1, "ok"))}}); err != nil {
		t.Fatal(err)
	}
	<-started
	if err := s.Send(&djinnpb.SessionRequest{Cancel: []uint64{7}}); err != nil {
		t.Fatal(err)
	}
	if c := codes.Code(replies(t, s, 1)[7].GetStatus().GetCode()); c != codes.Canceled {
		t.Fatalf("cancelled call answered %s, want Canceled", c)
	}
}

// A panic in the listener's code is an Internal error for the sender, in a
// session as in a unary call, and the session goes on.
func TestListenerSessionPanic(t *testing.T) {
	l := startListener(t, func(_ context.Context, ev *RemoteEvent) error {
		if string(ev.Handback) == "boom" {
			panic("boom")
		}
		return nil
	})
	s := rawSession(t, l)
	for i, h := range []string{"boom", "ok"} {
		id := uint64(i + 1)
		if err := s.Send(&djinnpb.SessionRequest{Calls: []*djinnpb.SessionCall{notifyCall(t, id, l, testEvent(1, h))}}); err != nil {
			t.Fatal(err)
		}
		err := replyErr(replies(t, s, 1)[id])
		if h == "boom" && !errors.Is(err, djinn.ErrInternal) || h == "ok" && err != nil {
			t.Fatalf("%s: %v", h, err)
		}
	}
}

// A listener given server options serves no sessions, so that the
// interceptors given see every call; a sender's calls go on their own.
func TestListenerWithServerOptionsServesNoSession(t *testing.T) {
	var unary atomic.Int32
	count := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		unary.Add(1)
		return h(ctx, req)
	}
	var rec recorder
	l := startListener(t, rec.notify, WithServerOptions(grpc.ChainUnaryInterceptor(count)))
	if _, err := rawSession(t, l).Recv(); status.Code(err) != codes.Unimplemented {
		t.Fatalf("session to a listener with server options: %v, want Unimplemented", err)
	}
	p := NewPool()
	defer p.Close()
	if err := Notify(context.Background(), p, l.Ref(), testEvent(1, "ok")); err != nil {
		t.Fatal(err)
	}
	if n := unary.Load(); n != 1 || len(rec.events()) != 1 {
		t.Fatalf("the interceptor saw %d calls, the listener %d events; want 1 and 1", n, len(rec.events()))
	}
}

// FuzzListenerSessionCall: any request bytes, for any of the methods a
// listener serves in a session, are answered (a response or a status),
// never a panic; bytes that do not decode are InvalidArgument.
func FuzzListenerSessionCall(f *testing.F) {
	ev, _ := proto.Marshal(&djinnpb.NotifyRequest{ListenerId: make([]byte, 16), Event: testEvent(1, "ok").Proto()})
	f.Add(uint8(0), ev)
	f.Add(uint8(1), []byte{0x12, 0x02, 0x0a, 0x00})
	f.Add(uint8(2), []byte{0x0a, 0x10})
	f.Add(uint8(3), []byte{})
	methods := []string{
		djinnpb.EventListener_Notify_FullMethodName, djinnpb.EventListener_NotifyBatch_FullMethodName,
		djinnpb.EventListener_StopDelivery_FullMethodName, "/djinn.v1.EventListener/Other",
	}
	var rec recorder
	h := &listenerHost{fns: map[djinn.ID]NotifyFunc{{}: rec.notify}}
	s := &listenerSession{h: h}
	f.Fuzz(func(t *testing.T, m uint8, b []byte) {
		method := methods[int(m)%len(methods)]
		r := s.serve(context.Background(), &djinnpb.SessionCall{Id: 1, Method: method, Request: b})
		if r.GetId() != 1 {
			t.Fatalf("%s: reply %v for call 1", method, r)
		}
		if c := codes.Code(r.GetStatus().GetCode()); method == methods[3] && c != codes.Unimplemented {
			t.Fatalf("%s: answered %s, want Unimplemented", method, c)
		}
		if method == methods[0] && proto.Unmarshal(b, &djinnpb.NotifyRequest{}) != nil && !errors.Is(replyErr(r), djinn.ErrInvalidArgument) {
			t.Fatalf("%s: undecodable request answered %v", method, replyErr(r))
		}
	})
}
