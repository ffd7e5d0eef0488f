package client_test

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// The tests of this file run the lookup discovery client alone, against
// a fakeConn; internal/server's tests run it against a real server.

func newFakeLDS(t *testing.T, answer func(method string, req proto.Message) (proto.Message, error)) (*fakeConn, *client.LookupDiscoveryService) {
	t.Helper()
	f := newFakeConn(t, "fake lookup discovery service", answer)
	return f, client.NewLookupDiscoveryService(f, ldsRef)
}

var (
	ldsRef      = djinn.Ref{Endpoint: "127.0.0.1:4161", Service: djinn.ID{1}, Object: djinn.ID{'l', 'd', 's'}}
	ldsListener = djinn.Ref{Endpoint: "127.0.0.1:9", Service: djinn.ID{2}, Object: djinn.ID{3}}
)

func ldsLease() *client.Lease {
	return client.NewLease(djinn.Ref{Endpoint: ldsRef.Endpoint, Service: ldsRef.Service, Object: djinn.ID{'l', 'a', 'n', 'd'}}, djinn.NewID(), time.Now().Add(time.Hour))
}

func ldsRegistered(req proto.Message) *djinnpb.LDSRegistration {
	return &djinnpb.LDSRegistration{Registration: &djinnpb.EventRegistration{EventId: 7, Source: client.RefToProto(ldsRef),
		Lease: ldsLease().Proto(time.Now())}}
}

// TestLDSArguments: the client refuses bad arguments before any call,
// naming them; one row per rule.
func TestLDSArguments(t *testing.T) {
	f, s := newFakeLDS(t, func(string, proto.Message) (proto.Message, error) {
		return &djinnpb.LDSRegistrationState{EventId: 7}, nil
	})
	ctx := t.Context()
	if reg, err := s.Registration(ctx, nil); reg != nil || !errors.Is(err, djinn.ErrInvalidArgument) {
		t.Fatalf("registration of no lease: %v %v", reg, err)
	}
	reg, err := s.Registration(ctx, ldsLease())
	if err != nil {
		t.Fatal(err)
	}
	f.take()
	var nilReg *client.LDSRegistration
	for _, tt := range []struct {
		name string
		call func() error
		want string
	}{
		{"LD.3.1 no listener", func() error {
			_, err := s.Register(ctx, client.AllGroups, nil, djinn.Ref{}, nil, time.Minute)
			return err
		}, "listener: missing"},
		{"LD.3.1 a bad locator", func() error {
			_, err := s.Register(ctx, client.Groups{}, []string{"jini://ok", "http://x:1"}, ldsListener, nil, time.Minute)
			return err
		}, `"http://x:1"`},
		{"all groups and names", func() error {
			_, err := s.Register(ctx, client.Groups{All: true, Names: []string{"lab"}}, nil, ldsListener, nil, time.Minute)
			return err
		}, `all groups and the groups "lab"`},
		{"LD.3.3 a zero lease duration", func() error {
			_, err := s.Register(ctx, client.AllGroups, nil, ldsListener, nil, 0)
			return err
		}, "registration lease duration 0s"},
		{"LD.3.3 a negative lease duration", func() error {
			_, err := s.Register(ctx, client.AllGroups, nil, ldsListener, nil, -5*time.Second)
			return err
		}, "-5s"},
		{"a nil service", func() error {
			_, err := (*client.LookupDiscoveryService)(nil).Register(ctx, client.AllGroups, nil, ldsListener, nil, time.Minute)
			return err
		}, "lookup discovery service: missing"},
		{"a service without a connector", func() error {
			_, err := client.NewLookupDiscoveryService(nil, ldsRef).Register(ctx, client.AllGroups, nil, ldsListener, nil, time.Minute)
			return err
		}, "connector: missing"},
		{"a nil registration", func() error { return nilReg.AddGroups(ctx, "a") }, "lookup discovery registration: missing"},
		{"LD.4.1.1 a bad locator to add", func() error { return reg.AddLocators(ctx, "jini://a:1", "jini//b") }, `locators to add: locator "jini//b"`},
		{"LD.4.1.1 a bad locator to set", func() error { return reg.SetLocators(ctx, "jini://") }, "locators to set"},
		{"LD.4.1.1 a bad locator to remove", func() error { return reg.RemoveLocators(ctx, "jini://h:0") }, "locators to remove"},
		{"LD.4.1.1 discard of no lookup service", func() error { _, err := reg.Discard(ctx, djinn.ID{}); return err }, "registrar service id: missing"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			if !errors.Is(err, djinn.ErrInvalidArgument) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want invalid argument naming %q", err, tt.want)
			}
			if n := len(f.take()); n != 0 {
				t.Errorf("%d calls reached the service", n)
			}
		})
	}
}

// TestLDSCalls checks what each call sends and how it reads the answer.
func TestLDSCalls(t *testing.T) {
	r1 := djinn.ID{0xaa, 1}
	discovered := &djinnpb.DiscoveredRegistrar{ServiceId: r1[:], Endpoint: "10.0.0.1:4161", Locator: "jini://10.0.0.1:4160/", Groups: []string{"a"}}
	registrars := []*djinnpb.DiscoveredRegistrar{discovered}
	f, s := newFakeLDS(t, func(method string, req proto.Message) (proto.Message, error) {
		switch method {
		case "Register":
			return ldsRegistered(req), nil
		case "GetRegistration", "ChangeGroups", "ChangeLocators":
			return &djinnpb.LDSRegistrationState{EventId: 7, AllGroups: true, Groups: []string{"ignored"}, Locators: []string{"jini://10.0.0.1:4160/"}, Sequence: 3,
				LeaseExpiresUnixNanos: int64(djinn.Forever)}, nil
		case "GetRegistrars":
			return &djinnpb.LDSRegistrarsResponse{Registrars: registrars}, nil
		case "Discard":
			return &djinnpb.LDSDiscardResponse{Discarded: true}, nil
		}
		return nil, djinn.Errorf(djinn.Unsupported, "%s", method)
	})
	ctx := t.Context()
	reg, err := s.Register(ctx, client.GroupsOf("lab", ""), []string{"jini://Host.example", "jini://10.0.0.1:4160/"}, ldsListener, []byte("hb"), djinn.Any)
	if err != nil {
		t.Fatal(err)
	}
	calls := f.take()
	want := &djinnpb.LDSRegisterRequest{Groups: []string{"lab", ""}, Locators: []string{"jini://host.example:4160/", "jini://10.0.0.1:4160/"},
		Listener: client.RefToProto(ldsListener), Handback: []byte("hb"), LeaseDurationNanos: int64(djinn.Any)}
	if len(calls) != 1 || calls[0].method != "Register" || !proto.Equal(calls[0].req, want) {
		t.Fatalf("register sent %v, want %v", calls, want)
	}
	er := reg.EventRegistration()
	if er.ID != 7 || !er.Source.Equal(ldsRef) || reg.Lease() == nil || reg.Lease() != er.Lease {
		t.Errorf("event registration %+v", er)
	}
	cookie := reg.Lease().Cookie()

	st, err := reg.State(ctx)
	if err != nil || !st.Groups.All || st.Groups.Names != nil || st.Seq != 3 || !st.Expires.Equal(djinn.EndOfTime) {
		t.Errorf("state %+v %v", st, err)
	}
	g, err := reg.Groups(ctx)
	if err != nil || !reflect.DeepEqual(g, client.AllGroups) || g.String() != "all" {
		t.Errorf("groups %v %v", g, err)
	}
	if locs, err := reg.Locators(ctx); err != nil || !slices.Equal(locs, []string{"jini://10.0.0.1:4160/"}) {
		t.Errorf("locators %v %v", locs, err)
	}
	rs, err := reg.Registrars(ctx)
	if err != nil || len(rs) != 1 || rs[0].ServiceID != r1 || rs[0].Endpoint != "10.0.0.1:4161" || !slices.Equal(rs[0].Groups, []string{"a"}) {
		t.Errorf("registrars %+v %v", rs, err)
	}
	f.take()

	// LD.4.1.1 getRegistrars: partial results, never all or nothing.
	r2 := djinn.ID{0xaa, 2}
	registrars = []*djinnpb.DiscoveredRegistrar{
		{ServiceId: []byte{1}, Endpoint: "h:1", Locator: "jini://h"},
		discovered,
		{ServiceId: r2[:], Endpoint: "h", Locator: "jini://h"},
		discovered,
		{ServiceId: r2[:], Endpoint: "h:1", Locator: "jini://h"},
	}
	rs, err = reg.Registrars(ctx)
	var partial *client.RegistrarsError
	if !errors.As(err, &partial) || len(partial.Unreadable) != 3 || !errors.Is(err, djinn.ErrInvalidArgument) {
		t.Errorf("registrars with three unreadable: %v, want a RegistrarsError of 3", err)
	}
	if len(rs) != 2 || rs[0].ServiceID != r1 || rs[1].ServiceID != r2 {
		t.Errorf("registrars with three unreadable: %+v, want the two readable ones", rs)
	}
	for _, want := range []string{"registrar 0", `registrar 2`, "registrar 3 " + r1.String() + ": twice"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	registrars = []*djinnpb.DiscoveredRegistrar{discovered}
	f.take()

	for _, tt := range []struct {
		call func() error
		want proto.Message
	}{
		{func() error { return reg.AddGroups(ctx, "b") }, &djinnpb.LDSGroupsRequest{LeaseCookie: cookie[:], Op: djinnpb.SetOp_SET_OP_ADD, Groups: []string{"b"}}},
		{func() error { return reg.SetGroups(ctx) }, &djinnpb.LDSGroupsRequest{LeaseCookie: cookie[:], Op: djinnpb.SetOp_SET_OP_SET}},
		{func() error { return reg.SetAllGroups(ctx) }, &djinnpb.LDSGroupsRequest{LeaseCookie: cookie[:], Op: djinnpb.SetOp_SET_OP_SET, AllGroups: true}},
		{func() error { return reg.RemoveGroups(ctx, "b", "") }, &djinnpb.LDSGroupsRequest{LeaseCookie: cookie[:], Op: djinnpb.SetOp_SET_OP_REMOVE, Groups: []string{"b", ""}}},
		{func() error { return reg.AddLocators(ctx, "jini://h") }, &djinnpb.LDSLocatorsRequest{LeaseCookie: cookie[:], Op: djinnpb.SetOp_SET_OP_ADD, Locators: []string{"jini://h:4160/"}}},
		{func() error { return reg.SetLocators(ctx) }, &djinnpb.LDSLocatorsRequest{LeaseCookie: cookie[:], Op: djinnpb.SetOp_SET_OP_SET, Locators: []string{}}},
		{func() error { return reg.RemoveLocators(ctx, "jini://h:99/") }, &djinnpb.LDSLocatorsRequest{LeaseCookie: cookie[:], Op: djinnpb.SetOp_SET_OP_REMOVE, Locators: []string{"jini://h:99/"}}},
		{func() error {
			ok, err := reg.Discard(ctx, r1)
			if err == nil && !ok {
				err = errors.New("not discarded")
			}
			return err
		}, &djinnpb.LDSDiscardRequest{LeaseCookie: cookie[:], RegistrarServiceId: r1[:]}},
	} {
		if err := tt.call(); err != nil {
			t.Errorf("%v: %v", tt.want, err)
		}
		if calls := f.take(); len(calls) != 1 || !proto.Equal(calls[0].req, tt.want) {
			t.Errorf("sent %v, want %v", calls, tt.want)
		}
	}

	// A registration from its lease alone learns its event id.
	again, err := s.Registration(ctx, reg.Lease())
	if err != nil || again.EventRegistration().ID != 7 || again.Lease() != reg.Lease() {
		t.Errorf("registration from the lease: %+v %v", again, err)
	}
	// The service's errors come through as they are.
	f.answer = func(string, proto.Message) (proto.Message, error) {
		return nil, djinn.Errorf(djinn.NoSuchObject, "no such registration")
	}
	if _, err := reg.Registrars(ctx); !errors.Is(err, djinn.ErrNoSuchObject) {
		t.Errorf("registrars of an ended registration: %v", err)
	}
}

// discoveryEvent wraps a payload in an event of the service.
func discoveryEvent(t testing.TB, payload proto.Message) *client.RemoteEvent {
	t.Helper()
	ev := &client.RemoteEvent{Source: ldsRef, ID: 7, Seq: 2, Handback: []byte("hb")}
	if payload != nil {
		a, err := anypb.New(payload)
		if err != nil {
			t.Fatal(err)
		}
		ev.Payload = a
	}
	return ev
}

func TestDiscoveryEventFrom(t *testing.T) {
	a, b := djinn.ID{0xaa, 1}, djinn.ID{0xaa, 2}
	ra := &djinnpb.DiscoveredRegistrar{ServiceId: a[:], Endpoint: "10.0.0.1:4161", Locator: "jini://10.0.0.1", Groups: []string{"", "lab"}}
	rb := &djinnpb.DiscoveredRegistrar{ServiceId: b[:], Endpoint: "[::1]:4161", Locator: "jini://[::1]:4160/"}
	ev := discoveryEvent(t, &djinnpb.RemoteDiscoveryEvent{Discarded: true, Registrars: []*djinnpb.DiscoveredRegistrar{ra, rb}})
	de, err := client.DiscoveryEventFrom(ev)
	if err != nil {
		t.Fatal(err)
	}
	if de.RemoteEvent != ev || !de.Discarded || len(de.Registrars) != 2 || de.Registrars[0].Locator != "jini://10.0.0.1:4160/" || de.Registrars[1].Locator != "jini://[::1]:4160/" {
		t.Errorf("decoded %+v", de)
	}
	if g := de.Groups(); !slices.Equal(g[a], []string{"", "lab"}) || len(g[b]) != 0 || len(g) != 2 {
		t.Errorf("groups %v", g)
	}

	for _, tt := range []struct {
		name string
		ev   *client.RemoteEvent
		want string
	}{
		{"no event", nil, "discovery event: missing"},
		{"no payload", discoveryEvent(t, nil), "payload: missing"},
		{"another payload", discoveryEvent(t, &djinnpb.ServiceEvent{}), "djinn.v1.ServiceEvent"},
		{"garbage", &client.RemoteEvent{Payload: &anypb.Any{TypeUrl: "type.googleapis.com/djinn.v1.RemoteDiscoveryEvent", Value: []byte{0x12, 0x05}}}, "payload"},
		{"LD.4.2.1 no lookup service", discoveryEvent(t, &djinnpb.RemoteDiscoveryEvent{}), "no lookup service"},
		{"a short service id", discoveryEvent(t, &djinnpb.RemoteDiscoveryEvent{Registrars: []*djinnpb.DiscoveredRegistrar{{ServiceId: []byte{1}, Endpoint: "h:1", Locator: "jini://h"}}}), "1 bytes"},
		{"a zero service id", discoveryEvent(t, &djinnpb.RemoteDiscoveryEvent{Registrars: []*djinnpb.DiscoveredRegistrar{{ServiceId: make([]byte, 16), Endpoint: "h:1", Locator: "jini://h"}}}), "zero"},
		{"a lookup service twice", discoveryEvent(t, &djinnpb.RemoteDiscoveryEvent{Registrars: []*djinnpb.DiscoveredRegistrar{ra, rb, ra}}), "twice"},
		{"a bad endpoint", discoveryEvent(t, &djinnpb.RemoteDiscoveryEvent{Registrars: []*djinnpb.DiscoveredRegistrar{{ServiceId: a[:], Endpoint: "h", Locator: "jini://h"}}}), `"h"`},
		{"a bad locator", discoveryEvent(t, &djinnpb.RemoteDiscoveryEvent{Registrars: []*djinnpb.DiscoveredRegistrar{{ServiceId: a[:], Endpoint: "h:1", Locator: "http://h"}}}), `"http://h"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			de, err := client.DiscoveryEventFrom(tt.ev)
			if de != nil || !errors.Is(err, djinn.ErrInvalidArgument) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("%+v, %v; want invalid argument naming %q", de, err, tt.want)
			}
		})
	}
}

// FuzzDiscoveryEventFrom feeds the decoder any payload type and bytes: it
// answers with an event that keeps its promises, or an invalid argument
// error, and never panics; what it accepts it reads the same way again
// from its own wire form.
func FuzzDiscoveryEventFrom(f *testing.F) {
	id := djinn.ID{1, 2, 3}
	seed := func(m proto.Message) {
		a, err := anypb.New(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(a.GetTypeUrl(), a.GetValue())
	}
	seed(&djinnpb.RemoteDiscoveryEvent{Registrars: []*djinnpb.DiscoveredRegistrar{{ServiceId: id[:], Endpoint: "h:1", Locator: "jini://h", Groups: []string{"", "a"}}}})
	seed(&djinnpb.RemoteDiscoveryEvent{Discarded: true, Registrars: []*djinnpb.DiscoveredRegistrar{{ServiceId: id[:], Endpoint: "[::1]:1", Locator: "jini://[::1]:9/"}}})
	seed(&djinnpb.RemoteDiscoveryEvent{Registrars: []*djinnpb.DiscoveredRegistrar{{ServiceId: []byte{9}}}})
	seed(&djinnpb.RemoteDiscoveryEvent{})
	seed(&djinnpb.ServiceEvent{})
	f.Add("", []byte(nil))
	f.Fuzz(func(t *testing.T, typeURL string, value []byte) {
		de, err := client.DiscoveryEventFrom(&client.RemoteEvent{Payload: &anypb.Any{TypeUrl: typeURL, Value: value}})
		if err != nil {
			if de != nil || !errors.Is(err, djinn.ErrInvalidArgument) {
				t.Fatalf("%+v and error %v of kind %v", de, err, djinn.KindOf(err))
			}
			return
		}
		if len(de.Registrars) == 0 {
			t.Fatalf("accepted an event of no lookup service")
		}
		again := &djinnpb.RemoteDiscoveryEvent{Discarded: de.Discarded}
		for i, r := range de.Registrars {
			if r.ServiceID.IsZero() || djinn.CheckEndpoint(r.Endpoint) != nil || !strings.HasPrefix(r.Locator, "jini://") || !strings.HasSuffix(r.Locator, "/") {
				t.Fatalf("accepted registrar %d: %+v", i, r)
			}
			again.Registrars = append(again.Registrars, &djinnpb.DiscoveredRegistrar{ServiceId: r.ServiceID[:], Endpoint: r.Endpoint, Locator: r.Locator, Groups: r.Groups})
		}
		de2, err := client.DiscoveryEventFrom(discoveryEvent(t, again))
		if err != nil || de2.Discarded != de.Discarded || !reflect.DeepEqual(de2.Registrars, de.Registrars) {
			t.Fatalf("re-encoded %+v read back as %+v, %v", de, de2, err)
		}
	})
}
