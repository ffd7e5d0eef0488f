package client

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"math/big"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// recorder is a NotifyFunc that keeps what it got and refuses events whose
// handback names an error.
type recorder struct {
	mu  sync.Mutex
	got []*RemoteEvent
}

func (r *recorder) notify(_ context.Context, ev *RemoteEvent) error {
	switch string(ev.Handback) {
	case "unknown":
		return djinn.Errorf(djinn.UnknownEvent, "event %d: not registered here", ev.ID)
	case "plain":
		return errors.New("disk full")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, ev)
	return nil
}

func (r *recorder) events() []*RemoteEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*RemoteEvent(nil), r.got...)
}

func testEvent(seq int64, handback string) *RemoteEvent {
	payload, _ := anypb.New(durationpb.New(time.Duration(seq) * time.Second))
	return &RemoteEvent{
		Source:   djinn.Ref{Endpoint: "127.0.0.1:4160", Service: djinn.NewID(), Object: djinn.NewID()},
		ID:       42,
		Seq:      seq,
		Handback: []byte(handback),
		Payload:  payload,
	}
}

func startListener(t *testing.T, fn NotifyFunc, opts ...ListenOption) *Listener {
	t.Helper()
	l, err := Listen(context.Background(), "127.0.0.1:0", fn, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func TestListenNotify(t *testing.T) {
	var rec recorder
	l := startListener(t, rec.notify)
	p := NewPool()
	defer p.Close()
	ctx := context.Background()

	ref := l.Ref()
	if ref.Endpoint != l.Addr() || ref.Service.IsZero() || ref.Object.IsZero() {
		t.Errorf("ref %v for listener at %s", ref, l.Addr())
	}
	ev := testEvent(1, "ok")
	if err := Notify(ctx, p, ref, ev); err != nil {
		t.Fatal(err)
	}
	if got := rec.events(); len(got) != 1 || !got[0].Equal(ev) {
		t.Errorf("EV.2.3.2 listener got %+v, want %+v", got, ev)
	}
	for _, tt := range []struct {
		name     string
		handback string
		want     error
	}{
		{"EV.2.3.3 UnknownEventException travels to the sender", "unknown", djinn.ErrUnknownEvent},
		{"an error without a kind is internal", "plain", djinn.ErrInternal},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := Notify(ctx, p, ref, testEvent(2, tt.handback))
			if !errors.Is(err, tt.want) {
				t.Errorf("err = %v, want %v", err, tt.want)
			}
		})
	}
	t.Run("bad event refused", func(t *testing.T) {
		bad := testEvent(3, "ok")
		bad.Source = djinn.Ref{}
		if err := Notify(ctx, p, ref, bad); !errors.Is(err, djinn.ErrInvalidArgument) ||
			!strings.Contains(err.Error(), "event source") {
			t.Errorf("err = %v, want invalid argument about the source", err)
		}
		if err := Notify(ctx, p, ref, nil); !errors.Is(err, djinn.ErrInvalidArgument) {
			t.Errorf("nil event: %v", err)
		}
	})
	t.Run("unknown listener id", func(t *testing.T) {
		other := ref
		other.Object = djinn.NewID()
		if err := Notify(ctx, p, other, testEvent(4, "ok")); !errors.Is(err, djinn.ErrNoSuchObject) {
			t.Errorf("err = %v, want no such object", err)
		}
	})
}

func TestNotifyBatch(t *testing.T) {
	var rec recorder
	l := startListener(t, rec.notify)
	p := NewPool()
	defer p.Close()
	ctx := context.Background()

	events := []*RemoteEvent{testEvent(1, "a"), testEvent(2, "b"), testEvent(3, "unknown"), testEvent(4, "c")}
	n, err := NotifyBatch(ctx, p, l.Ref(), events)
	if n != 2 || !errors.Is(err, djinn.ErrUnknownEvent) {
		t.Errorf("NotifyBatch = %d, %v; want 2 taken, then unknown event", n, err)
	}
	got := rec.events()
	if len(got) != 2 || got[0].Seq != 1 || got[1].Seq != 2 {
		t.Errorf("listener got %d events; want the first two, in order", len(got))
	}
	if n, err := NotifyBatch(ctx, p, l.Ref(), events[:2]); n != 2 || err != nil {
		t.Errorf("NotifyBatch = %d, %v", n, err)
	}
	if n, err := NotifyBatch(ctx, p, l.Ref(), nil); n != 0 || err != nil {
		t.Errorf("empty batch = %d, %v", n, err)
	}
	if _, err := NotifyBatch(ctx, p, l.Ref(), []*RemoteEvent{events[0], nil}); !errors.Is(err, djinn.ErrInvalidArgument) ||
		!strings.Contains(err.Error(), "event 1") {
		t.Errorf("nil event in a batch: %v", err)
	}
}

// notifyOnly is a listener that does not serve NotifyBatch.
type notifyOnly struct {
	djinnpb.UnimplementedEventListenerServer
	rec recorder
}

func (s *notifyOnly) Notify(ctx context.Context, r *djinnpb.NotifyRequest) (*djinnpb.NotifyResponse, error) {
	ev, err := RemoteEventFromProto(r.GetEvent())
	if err == nil {
		err = s.rec.notify(ctx, ev)
	}
	return &djinnpb.NotifyResponse{}, err
}

func TestEventSenderFallsBack(t *testing.T) {
	var srv notifyOnly
	var batches atomic.Int32
	count := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		if strings.HasSuffix(info.FullMethod, "/NotifyBatch") {
			batches.Add(1)
		}
		return h(ctx, req)
	}
	addr := serve(t, func(s *grpc.Server) { djinnpb.RegisterEventListenerServer(s, &srv) }, grpc.UnaryInterceptor(count))
	p := NewPool()
	defer p.Close()
	s := NewEventSender(p)
	target := djinn.Ref{Endpoint: addr, Service: djinn.NewID(), Object: djinn.NewID()}
	ctx := context.Background()
	events := []*djinnpb.RemoteEvent{testEvent(1, "a").Proto(), testEvent(2, "b").Proto()}
	for range 2 {
		if n, err := s.Send(ctx, target, events); n != 2 || err != nil {
			t.Fatalf("Send = %d, %v", n, err)
		}
	}
	if got := len(srv.rec.events()); got != 4 {
		t.Errorf("listener got %d events, want 4", got)
	}
	if b := batches.Load(); b != 1 {
		t.Errorf("NotifyBatch tried %d times, want once then remembered", b)
	}
}

func TestAddListener(t *testing.T) {
	var a, b recorder
	la := startListener(t, a.notify)
	lb, err := la.AddListener(b.notify)
	if err != nil {
		t.Fatal(err)
	}
	p := NewPool()
	defer p.Close()
	ctx := context.Background()
	ra, rb := la.Ref(), lb.Ref()
	if ra.Endpoint != rb.Endpoint || ra.Service != rb.Service || ra.Object == rb.Object {
		t.Errorf("refs %v and %v: want one host, two objects", ra, rb)
	}
	if err := Notify(ctx, p, rb, testEvent(1, "x")); err != nil || len(b.events()) != 1 || len(a.events()) != 0 {
		t.Errorf("event to the second listener: %v", err)
	}
	lb.Close()
	if err := Notify(ctx, p, rb, testEvent(2, "x")); !errors.Is(err, djinn.ErrNoSuchObject) {
		t.Errorf("event to a closed listener: %v, want no such object", err)
	}
	if err := Notify(ctx, p, ra, testEvent(3, "x")); err != nil {
		t.Errorf("the first listener must still serve: %v", err)
	}
	la.Close()
	<-la.Done()
	if err := Notify(ctx, p, ra, testEvent(4, "x")); !errors.Is(err, djinn.ErrUnavailable) {
		t.Errorf("event to a stopped host: %v, want unavailable", err)
	}
	if _, err := la.AddListener(a.notify); !errors.Is(err, djinn.ErrUnavailable) {
		t.Errorf("AddListener after Close: %v", err)
	}
}

func TestListenStopsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	started, release := make(chan struct{}), make(chan struct{})
	l, err := Listen(ctx, "127.0.0.1:0", func(ctx context.Context, _ *RemoteEvent) error {
		close(started)
		<-ctx.Done()
		close(release)
		return ctx.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	p := NewPool()
	defer p.Close()
	errc := make(chan error, 1)
	go func() { errc <- Notify(context.Background(), p, l.Ref(), testEvent(1, "x")) }()
	<-started
	cancel()
	<-l.Done()
	select {
	case <-release:
	default:
		t.Error("Done closed while a NotifyFunc was running")
	}
	if err := <-errc; err == nil {
		t.Error("notify interrupted by the listener's end succeeded")
	}
}

func TestListenArguments(t *testing.T) {
	ctx := context.Background()
	if _, err := Listen(ctx, "127.0.0.1:0", nil); !errors.Is(err, djinn.ErrInvalidArgument) {
		t.Errorf("nil function: %v", err)
	}
	if _, err := Listen(ctx, "127.0.0.1:0", (&recorder{}).notify, WithAdvertise("nope")); !errors.Is(err, djinn.ErrInvalidArgument) ||
		!strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("bad advertised endpoint: %v", err)
	}
	if _, err := Listen(ctx, "not an address", (&recorder{}).notify); err == nil || !strings.Contains(err.Error(), "not an address") {
		t.Errorf("bad address: %v", err)
	}
	l := startListener(t, (&recorder{}).notify, WithAdvertise("events.example.com:7000"))
	if l.Ref().Endpoint != "events.example.com:7000" {
		t.Errorf("advertised ref %v", l.Ref())
	}
}

// selfSigned returns a server certificate for 127.0.0.1 and a pool that
// trusts it.
func selfSigned(t *testing.T) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "djinn test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(cert)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, roots
}

func TestTLS(t *testing.T) {
	cert, roots := selfSigned(t)
	var rec recorder
	l := startListener(t, rec.notify, WithServerTLS(&tls.Config{Certificates: []tls.Certificate{cert}}))
	ctx := context.Background()

	secure := NewPool(WithTLS(&tls.Config{RootCAs: roots}))
	defer secure.Close()
	if err := Notify(ctx, secure, l.Ref(), testEvent(1, "x")); err != nil {
		t.Fatalf("notify over TLS: %v", err)
	}
	plain := NewPool()
	defer plain.Close()
	if err := Notify(ctx, plain, l.Ref(), testEvent(2, "x")); !errors.Is(err, djinn.ErrUnavailable) {
		t.Errorf("plaintext to a TLS listener: %v, want unavailable", err)
	}
	if len(rec.events()) != 1 {
		t.Errorf("listener got %d events", len(rec.events()))
	}
}

func TestEventRegistrationProto(t *testing.T) {
	sent := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	src := djinn.Ref{Endpoint: "127.0.0.1:4160", Service: djinn.NewID(), Object: djinn.NewID()}
	lease := NewLease(src, djinn.NewID(), sent.Add(time.Minute))
	reg := &EventRegistration{ID: 9, Source: src, Lease: lease, Seq: 41}
	back, err := EventRegistrationFromProto(reg.Proto(sent), sent)
	if err != nil {
		t.Fatal(err)
	}
	if back.ID != 9 || back.Seq != 41 || back.Source != src || !back.Lease.Equal(lease) ||
		!back.Lease.Expiration().Equal(lease.Expiration()) {
		t.Errorf("EV.2.3.5 round trip: %+v", back)
	}
	pb := reg.Proto(sent)
	pb.Lease = nil
	if _, err := EventRegistrationFromProto(pb, sent); !errors.Is(err, djinn.ErrInvalidArgument) ||
		!strings.Contains(err.Error(), "lease: missing") {
		t.Errorf("registration without a lease: %v", err)
	}
	if _, err := EventRegistrationFromProto(nil, sent); !errors.Is(err, djinn.ErrInvalidArgument) {
		t.Errorf("nil registration: %v", err)
	}
}

// TestListenerPanicIsAnError: a notify function that panics fails that one
// call with an Internal error; the listening program goes on.
func TestListenerPanicIsAnError(t *testing.T) {
	l := startListener(t, func(_ context.Context, ev *RemoteEvent) error {
		if string(ev.Handback) == "boom" {
			panic("boom")
		}
		return nil
	})
	p := NewPool()
	defer p.Close()
	if err := Notify(context.Background(), p, l.Ref(), testEvent(1, "boom")); !errors.Is(err, djinn.ErrInternal) {
		t.Fatalf("Notify to a panicking listener = %v, want Internal", err)
	}
	if err := Notify(context.Background(), p, l.Ref(), testEvent(2, "ok")); err != nil {
		t.Fatalf("the listener did not survive its panic: %v", err)
	}
}
