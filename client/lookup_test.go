package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"math"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/proto/djinnpb"
	"github.com/djinn-go/djinn/service"
)

// The tests of this file run the lookup client alone, against
// a fakeConn; the CLI's tests run it against a real server.

// fakeConn is a Connector whose connection never reaches a network: an
// interceptor records each call and answers it with what answer returns.
// The lookup and lookup discovery clients' tests run against it.
type fakeConn struct {
	cc     *grpc.ClientConn
	answer func(method string, req proto.Message) (proto.Message, error)

	mu    sync.Mutex
	calls []fakeCall // guarded by mu
}

type fakeCall struct {
	method string // the RPC's short name: "Register"
	req    proto.Message
}

// newFakeConn returns a fake named name (in errors) answering with answer.
func newFakeConn(t *testing.T, name string, answer func(method string, req proto.Message) (proto.Message, error)) *fakeConn {
	t.Helper()
	f := &fakeConn{answer: answer}
	cc, err := grpc.NewClient("passthrough:///fake", grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUnaryInterceptor(func(_ context.Context, method string, req, reply any, _ *grpc.ClientConn, _ grpc.UnaryInvoker, _ ...grpc.CallOption) error {
			method = method[strings.LastIndexByte(method, '/')+1:]
			f.mu.Lock()
			f.calls = append(f.calls, fakeCall{method, proto.Clone(req.(proto.Message))})
			f.mu.Unlock()
			if f.answer == nil {
				return errors.New(name + ": no answer scripted")
			}
			resp, err := f.answer(method, req.(proto.Message))
			if err != nil {
				return err
			}
			// Through the bytes, as the wire does: a reply may be another
			// message of the same wire form (EncodedLookupResponse).
			b, err := proto.Marshal(resp)
			if err != nil {
				return err
			}
			return proto.UnmarshalOptions{Merge: true}.Unmarshal(b, reply.(proto.Message))
		}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	f.cc = cc
	return f
}

func (f *fakeConn) Conn(string) (*grpc.ClientConn, error) { return f.cc, nil }

// take returns the calls made since the last take.
func (f *fakeConn) take() []fakeCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.calls
	f.calls = nil
	return out
}

// last returns the last call and forgets every call.
func (f *fakeConn) last(t *testing.T) fakeCall {
	t.Helper()
	calls := f.take()
	if len(calls) == 0 {
		t.Fatal("no call reached the registrar")
	}
	return calls[len(calls)-1]
}

func newFakeRegistrar(t *testing.T, answer func(method string, req proto.Message) (proto.Message, error)) (*fakeConn, *client.Registrar) {
	t.Helper()
	f := newFakeConn(t, "fake registrar", answer)
	return f, client.NewRegistrar(f, testRef())
}

func (f *fakeConn) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.calls)
}

func TestLookupValues(t *testing.T) {
	for _, tt := range []struct {
		v     service.Value
		kind  service.ValueKind
		str   string
		iface any
	}{
		{service.Value{}, service.ValueNull, "null", nil},
		{service.NewString("laser"), service.ValueString, `"laser"`, "laser"},
		{service.NewString(""), service.ValueString, `""`, ""},
		{service.NewInt(-3), service.ValueInt, "-3", int64(-3)},
		{service.NewInt(math.MaxInt64), service.ValueInt, "9223372036854775807", int64(math.MaxInt64)},
		{service.NewFloat(2), service.ValueFloat, "2.0", 2.0},
		{service.NewFloat(-1.5), service.ValueFloat, "-1.5", -1.5},
		{service.NewFloat(1e300), service.ValueFloat, "1e+300", 1e300},
		{service.NewFloat(math.Inf(1)), service.ValueFloat, "+Inf", math.Inf(1)},
		{service.NewBool(true), service.ValueBool, "true", true},
		{service.NewBool(false), service.ValueBool, "false", false},
		{service.NewBytes([]byte{1, 0xab}), service.ValueBytes, "0x01ab", []byte{1, 0xab}},
		{service.NewBytes(nil), service.ValueBytes, "0x", []byte{}},
	} {
		t.Run(tt.str, func(t *testing.T) {
			if tt.v.Kind() != tt.kind || tt.v.IsNull() != (tt.kind == service.ValueNull) || tt.v.String() != tt.str || !reflect.DeepEqual(tt.v.Interface(), tt.iface) {
				t.Errorf("kind %v null %v string %s interface %#v; want %v %s %#v", tt.v.Kind(), tt.v.IsNull(), tt.v, tt.v.Interface(), tt.kind, tt.str, tt.iface)
			}
			pb := client.ValueToProto(tt.v)
			if (pb == nil) != tt.v.IsNull() {
				t.Errorf("wire form %v", pb)
			}
			if back := client.ValueFromProto(pb); back != tt.v {
				t.Errorf("round trip: %v, want %v", back, tt.v)
			}
		})
	}
	// == is the registrar's equality (DESIGN.md 6: equal values).
	for _, tt := range []struct {
		name  string
		a, b  service.Value
		equal bool
	}{
		{"NaN equals NaN, whatever its bits", service.NewFloat(math.NaN()), service.NewFloat(math.Float64frombits(0x7ff0000000000001)), true},
		{"0.0 and -0.0 differ (Double.equals)", service.NewFloat(0), service.NewFloat(math.Copysign(0, -1)), false},
		{"an int is no float", service.NewInt(3), service.NewFloat(3), false},
		{"an int is no string", service.NewInt(3), service.NewString("3"), false},
		{"a string is no byte string", service.NewString("ab"), service.NewBytes([]byte("ab")), false},
		{"false is not null", service.NewBool(false), service.Value{}, false},
		{"0 is not null", service.NewInt(0), service.Value{}, false},
	} {
		if got := tt.a == tt.b; got != tt.equal {
			t.Errorf("%s: %v == %v is %v", tt.name, tt.a, tt.b, got)
		}
	}
	b := []byte("abc")
	v := service.NewBytes(b)
	b[0] = 'x'
	if got := v.Interface().([]byte); string(got) != "abc" {
		t.Errorf("NewBytes shares its argument: %q", got)
	}
	if v := client.ValueFromProto(&djinnpb.Value{}); !v.IsNull() {
		t.Errorf("a wire value without a kind: %v, want null", v)
	}
}

func TestLookupConversions(t *testing.T) {
	id := djinn.NewID()
	item := service.Item{
		ID: id, Service: []byte("10.0.0.7:9100"), Types: []string{"Printer", "Device"},
		Entries: []service.Entry{
			{Type: "Name", Fields: []service.Field{{Name: "model", Value: service.NewString("laser")}}},
			{Type: "Location", Supertypes: []string{"Place"}, Fields: []service.Field{
				{Name: "floor", Value: service.NewInt(3)}, {Name: "room", Value: service.Value{}}, {Name: "x", Value: service.NewFloat(0.5)}}},
		},
	}
	want := &djinnpb.ServiceItem{ServiceId: id[:], Service: []byte("10.0.0.7:9100"), Types: []string{"Printer", "Device"},
		Entries: []*djinnpb.Entry{
			{Type: "Name", Fields: []*djinnpb.Field{{Name: "model", Value: &djinnpb.Value{Kind: &djinnpb.Value_StringValue{StringValue: "laser"}}}}},
			{Type: "Location", Supertypes: []string{"Place"}, Fields: []*djinnpb.Field{
				{Name: "floor", Value: &djinnpb.Value{Kind: &djinnpb.Value_IntValue{IntValue: 3}}}, {Name: "room"},
				{Name: "x", Value: &djinnpb.Value{Kind: &djinnpb.Value_DoubleValue{DoubleValue: 0.5}}}}},
		}}
	if pb := client.ServiceItemToProto(item); !proto.Equal(pb, want) {
		t.Errorf("item to the wire:\n got %v\nwant %v", pb, want)
	}
	if back, err := client.ServiceItemFromProto(want); err != nil || !reflect.DeepEqual(back, item) {
		t.Errorf("item from the wire: %+v, %v\nwant %+v", back, err, item)
	}
	if got := client.EntryToProto(item.Entries[1]); !proto.Equal(got, want.Entries[1]) || !reflect.DeepEqual(client.EntryFromProto(got), item.Entries[1]) {
		t.Errorf("entry: %v", got)
	}
	if v, ok := item.Entries[1].Get("floor"); !ok || v != service.NewInt(3) {
		t.Errorf("Get floor: %v %v", v, ok)
	}
	if v, ok := item.Entries[1].Get("room"); !ok || !v.IsNull() {
		t.Errorf("Get room (null): %v %v", v, ok)
	}
	if _, ok := item.Entries[1].Get("color"); ok {
		t.Error("Get of a field the entry lacks found it")
	}

	// DESIGN.md 6: an item without an id asks the registrar for one.
	anon := service.Item{Types: []string{"T"}}
	if pb := client.ServiceItemToProto(anon); pb.ServiceId != nil {
		t.Errorf("the zero id went on the wire as %x", pb.ServiceId)
	}
	if back, err := client.ServiceItemFromProto(client.ServiceItemToProto(anon)); err != nil || !back.ID.IsZero() {
		t.Errorf("an item without an id came back as %v, %v", back, err)
	}
	if back, err := client.ServiceItemFromProto(nil); err != nil || !reflect.DeepEqual(back, service.Item{}) {
		t.Errorf("nil item: %+v, %v", back, err)
	}

	tmpl := service.Template{ID: &id, Types: []string{"Printer"}, Entries: []service.EntryTemplate{
		{Type: "Name", Fields: []service.Field{{Name: "model", Value: service.NewString("laser")}, {Name: "serial"}}}}}
	wantT := &djinnpb.ServiceTemplate{ServiceId: id[:], Types: []string{"Printer"}, Entries: []*djinnpb.EntryTemplate{
		{Type: "Name", Fields: []*djinnpb.Field{{Name: "model", Value: &djinnpb.Value{Kind: &djinnpb.Value_StringValue{StringValue: "laser"}}}, {Name: "serial"}}}}}
	if pb := client.ServiceTemplateToProto(tmpl); !proto.Equal(pb, wantT) {
		t.Errorf("template to the wire:\n got %v\nwant %v", pb, wantT)
	}
	if back, err := client.ServiceTemplateFromProto(wantT); err != nil || !reflect.DeepEqual(back, tmpl) {
		t.Errorf("template from the wire: %+v, %v", back, err)
	}
	if pb := client.ServiceTemplateToProto(service.Template{}); !proto.Equal(pb, &djinnpb.ServiceTemplate{}) {
		t.Errorf("the zero template (every item): %v", pb)
	}
	if back, err := client.ServiceTemplateFromProto(&djinnpb.ServiceTemplate{}); err != nil || back.ID != nil {
		t.Errorf("a template without an id matches any: %+v, %v", back, err)
	}

	for name, err := range map[string]error{
		"item id of 3 bytes":     second(client.ServiceItemFromProto(&djinnpb.ServiceItem{ServiceId: []byte{1, 2, 3}})),
		"template id of 3 bytes": second(client.ServiceTemplateFromProto(&djinnpb.ServiceTemplate{ServiceId: []byte{1, 2, 3}})),
	} {
		if !errors.Is(err, djinn.ErrInvalidArgument) || !strings.Contains(err.Error(), "3 bytes") {
			t.Errorf("%s: %v, want invalid argument naming the length", name, err)
		}
	}
}

func second[T any](_ T, err error) error { return err }

func TestLookupTransitions(t *testing.T) {
	for _, tt := range []struct {
		t    client.Transition
		want string
	}{
		{client.MatchNoMatch, "match-nomatch"},
		{client.NoMatchMatch, "nomatch-match"},
		{client.MatchMatch, "match-match"},
		{client.MatchNoMatch | client.MatchMatch, "match-nomatch|match-match"},
		{client.AllTransitions, "match-nomatch|nomatch-match|match-match"},
		{0, "none"},
		{8, "Transition(0x8)"},
	} {
		if got := tt.t.String(); got != tt.want {
			t.Errorf("Transition(%d) = %q, want %q", uint32(tt.t), got, tt.want)
		}
	}
	if client.MatchNoMatch != 1 || client.NoMatchMatch != 2 || client.MatchMatch != 4 {
		t.Error("the transitions are not the wire's bits 1, 2 and 4")
	}
	for _, tt := range []struct {
		in   string
		want client.Transition
		err  string
	}{
		{"match-nomatch", client.MatchNoMatch, ""},
		{"nomatch-match,match-match", client.NoMatchMatch | client.MatchMatch, ""},
		{" MATCH_NOMATCH , nomatch-match ", client.MatchNoMatch | client.NoMatchMatch, ""},
		{"all", client.AllTransitions, ""},
		{"", 0, `transition ""`},
		{"match-nomatch,", 0, `transition ""`},
		{"appear", 0, `transition "appear"`},
	} {
		got, err := client.ParseTransitions(tt.in)
		if tt.err != "" {
			if !errors.Is(err, djinn.ErrInvalidArgument) || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("ParseTransitions(%q): %v, %v; want invalid argument naming %s", tt.in, got, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseTransitions(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
}

// TestLookupArguments: bad arguments are refused before anything is sent,
// as djinn.ErrInvalidArgument naming the bad value.
func TestLookupArguments(t *testing.T) {
	f, r := newFakeRegistrar(t, nil)
	ctx := t.Context()
	listener := testRef()
	var nilReg *client.ServiceRegistration
	for _, tt := range []struct {
		name string
		call func() error
		want string
	}{
		{"issue 6 §1: negative max matches", func() error { _, _, err := r.LookupN(ctx, service.Template{}, -1); return err }, "max matches -1"},
		{"max matches beyond the wire's int32", func() error { _, _, err := r.LookupN(ctx, service.Template{}, math.MaxInt32+1); return err }, "max matches 2147483648"},
		{"issue 6 §1: empty transitions", func() error {
			_, err := r.Notify(ctx, service.Template{}, 0, listener, nil, time.Minute)
			return err
		}, "transitions 0"},
		{"issue 6 §1: unknown transitions", func() error {
			_, err := r.Notify(ctx, service.Template{}, client.MatchMatch|8, listener, nil, time.Minute)
			return err
		}, "transitions 0xc"},
		{"notify without a listener", func() error {
			_, err := r.Notify(ctx, service.Template{}, client.MatchMatch, djinn.Ref{}, nil, time.Minute)
			return err
		}, "listener: missing"},
		{"notify lease duration", func() error {
			_, err := r.Notify(ctx, service.Template{}, client.MatchMatch, listener, nil, -time.Second)
			return err
		}, "-1s"},
		{"registration lease duration", func() error { _, err := r.Register(ctx, service.Item{}, 0); return err }, "0s"},
		{"modify: one change per template", func() error {
			return r.Registration(djinn.ID{}, testLease(time.Now().Add(time.Hour))).ModifyAttributes(ctx, []service.EntryTemplate{{Type: "A"}}, nil)
		}, "1 templates but 0 changes"},
		{"attributes of no registration", func() error { return nilReg.SetAttributes(ctx, nil) }, "service registration: missing"},
		{"attributes of a registration without its lease", func() error { return r.Registration(djinn.NewID(), nil).AddAttributes(ctx, nil) }, "service registration: missing"},
		{"field values: set index past the entry templates", func() error {
			_, err := r.FieldValues(ctx, service.Template{Entries: []service.EntryTemplate{{Type: "Name"}}}, 1, "model")
			return err
		}, "set index 1"},
		{"field values: negative set index", func() error { _, err := r.FieldValues(ctx, service.Template{}, -1, "model"); return err }, "set index -1"},
		{"field values: no field", func() error {
			_, err := r.FieldValues(ctx, service.Template{Entries: []service.EntryTemplate{{Type: "Name"}}}, 0, "")
			return err
		}, "field name: missing"},
		{"a nil registrar", func() error { _, err := (*client.Registrar)(nil).Lookup(ctx, service.Template{}); return err }, "lookup service: missing"},
		{"a registrar without a connector", func() error {
			_, err := client.NewRegistrar(nil, testRef()).ServiceTypes(ctx, service.Template{}, "")
			return err
		}, "connector: missing"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			if !errors.Is(err, djinn.ErrInvalidArgument) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want invalid argument naming %q", err, tt.want)
			}
			if n := f.count(); n != 0 {
				t.Errorf("%d calls reached the registrar", n)
			}
		})
	}
}

// TestLookupCalls checks what each call sends and how it reads the answer.
func TestLookupCalls(t *testing.T) {
	now := time.Now()
	lease := testLease(now.Add(time.Hour))
	cookie := lease.Cookie()
	id := djinn.NewID()
	laser := printerItem(id[:])
	var next proto.Message
	f, r := newFakeRegistrar(t, func(string, proto.Message) (proto.Message, error) { return next, nil })
	ctx := t.Context()

	next = &djinnpb.ServiceRegistration{ServiceId: id[:], Lease: lease.Proto(now)}
	reg, err := r.Register(ctx, service.Item{Service: []byte("h:1"), Types: []string{"Printer"}}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if c := f.last(t); c.method != "Register" || !proto.Equal(c.req, &djinnpb.RegisterRequest{Item: printerItem(nil), LeaseDurationNanos: int64(time.Hour)}) {
		t.Errorf("register sent %s %v", c.method, c.req)
	}
	if reg.ID != id || !reg.Lease.Equal(lease) {
		t.Errorf("registration %v %v", reg.ID, reg.Lease)
	}

	next = &djinnpb.AttributesResponse{}
	status := service.Entry{Type: "Status", Fields: []service.Field{{Name: "state", Value: service.NewString("idle")}}}
	attrCalls := []struct {
		method string
		call   func() error
		want   *djinnpb.AttributesRequest
	}{
		{"AddAttributes", func() error { return reg.AddAttributes(ctx, []service.Entry{status}) },
			&djinnpb.AttributesRequest{LeaseCookie: cookie[:], Entries: []*djinnpb.Entry{client.EntryToProto(status)}}},
		{"SetAttributes", func() error { return r.Registration(djinn.ID{}, lease).SetAttributes(ctx, nil) },
			&djinnpb.AttributesRequest{LeaseCookie: cookie[:]}},
		{"ModifyAttributes", func() error {
			return reg.ModifyAttributes(ctx, []service.EntryTemplate{{Type: "Status"}}, []service.Entry{status})
		}, &djinnpb.AttributesRequest{LeaseCookie: cookie[:], Templates: []*djinnpb.EntryTemplate{{Type: "Status"}}, Entries: []*djinnpb.Entry{client.EntryToProto(status)}}},
	}
	for _, tt := range attrCalls {
		if err := tt.call(); err != nil {
			t.Fatalf("%s: %v", tt.method, err)
		}
		if c := f.last(t); c.method != tt.method || !proto.Equal(c.req, tt.want) {
			t.Errorf("%s sent %s %v", tt.method, c.method, c.req)
		}
	}

	printers := service.Template{Types: []string{"Printer"}}
	next = &djinnpb.LookupResponse{}
	if it, err := r.Lookup(ctx, printers); it != nil || err != nil {
		t.Errorf("lookup of nothing: %v, %v; want nil, nil", it, err)
	}
	if c := f.last(t); !proto.Equal(c.req, &djinnpb.LookupRequest{Template: client.ServiceTemplateToProto(printers), One: true}) {
		t.Errorf("lookup sent %v", c.req)
	}
	next = &djinnpb.LookupResponse{Total: 1, Items: []*djinnpb.ServiceItem{laser}}
	if it, err := r.Lookup(ctx, printers); err != nil || it.ID != id || string(it.Service) != "h:1" {
		t.Errorf("lookup: %+v, %v", it, err)
	}
	next = &djinnpb.LookupResponse{Total: 7, Items: []*djinnpb.ServiceItem{laser, laser}}
	total, items, err := r.LookupN(ctx, printers, 2)
	if err != nil || total != 7 || len(items) != 2 || items[1].ID != id {
		t.Errorf("lookup n: %d %+v %v", total, items, err)
	}
	if c := f.last(t); !proto.Equal(c.req, &djinnpb.LookupRequest{Template: client.ServiceTemplateToProto(printers), MaxMatches: 2}) {
		t.Errorf("lookup n sent %v", c.req)
	}
	next = &djinnpb.LookupResponse{Total: 1, Items: []*djinnpb.ServiceItem{printerItem(nil)}}
	if _, _, err := r.LookupN(ctx, printers, 2); !errors.Is(err, djinn.ErrInvalidArgument) || !strings.Contains(err.Error(), "service id missing") {
		t.Errorf("an item without its id from the registrar: %v", err)
	}

	listener := testRef()
	next = &djinnpb.EventRegistration{EventId: 9, Source: client.RefToProto(r.Ref()), Lease: lease.Proto(now), Sequence: 4}
	er, err := r.Notify(ctx, printers, client.NoMatchMatch|client.MatchNoMatch, listener, []byte("hb"), djinn.Any)
	if err != nil || er.ID != 9 || er.Seq != 4 || !er.Source.Equal(r.Ref()) || !er.Lease.Equal(lease) {
		t.Errorf("notify: %+v, %v", er, err)
	}
	if c := f.last(t); !proto.Equal(c.req, &djinnpb.LookupNotifyRequest{Template: client.ServiceTemplateToProto(printers), Transitions: 3,
		Listener: client.RefToProto(listener), Handback: []byte("hb"), LeaseDurationNanos: int64(djinn.Any)}) {
		t.Errorf("notify sent %v", c.req)
	}

	next = &djinnpb.EntryTypesResponse{Types: []*djinnpb.Entry{{Type: "Location", Supertypes: []string{"Place"}}}}
	if ets, err := r.EntryTypes(ctx, printers); err != nil || !reflect.DeepEqual(ets, []service.EntryType{{Type: "Location", Supertypes: []string{"Place"}}}) {
		t.Errorf("entry types: %+v, %v", ets, err)
	}
	byName := service.Template{Entries: []service.EntryTemplate{{Type: "Name"}}}
	next = &djinnpb.FieldValuesResponse{Values: []*djinnpb.Value{client.ValueToProto(service.NewString("laser")), {}}}
	if vs, err := r.FieldValues(ctx, byName, 0, "model"); err != nil || !reflect.DeepEqual(vs, []service.Value{service.NewString("laser"), {}}) {
		t.Errorf("field values: %v, %v", vs, err)
	}
	if c := f.last(t); !proto.Equal(c.req, &djinnpb.BrowseRequest{Template: client.ServiceTemplateToProto(byName), Field: "model"}) {
		t.Errorf("field values sent %v", c.req)
	}
	next = &djinnpb.ServiceTypesResponse{Types: []string{"Printer"}}
	if ts, err := r.ServiceTypes(ctx, service.Template{}, "P"); err != nil || !reflect.DeepEqual(ts, []string{"Printer"}) {
		t.Errorf("service types: %v, %v", ts, err)
	}
	if c := f.last(t); !proto.Equal(c.req, &djinnpb.BrowseRequest{Template: &djinnpb.ServiceTemplate{}, Prefix: "P"}) {
		t.Errorf("service types sent %v", c.req)
	}
	self := djinn.NewID()
	next = &djinnpb.RegistrarInfo{ServiceId: self[:], Groups: []string{"", "lab"}, Locator: "jini://h:4160/", Registrar: client.RefToProto(r.Ref()), Items: 2}
	if info, err := r.Info(ctx); err != nil || info.ServiceID != self || !reflect.DeepEqual(info.Groups, []string{"", "lab"}) ||
		info.Locator != "jini://h:4160/" || !info.Ref.Equal(r.Ref()) || info.Items != 2 {
		t.Errorf("info: %+v, %v", info, err)
	}
}

// printerItem is the wire item of TestLookupCalls' printer, with id.
func printerItem(id []byte) *djinnpb.ServiceItem {
	return &djinnpb.ServiceItem{ServiceId: id, Service: []byte("h:1"), Types: []string{"Printer"}}
}

// serviceEvent wraps a payload in an event of a registrar.
func serviceEvent(t testing.TB, payload proto.Message) *client.RemoteEvent {
	t.Helper()
	ev := &client.RemoteEvent{Source: testRef(), ID: 3, Seq: 5, Handback: []byte("hb")}
	if payload != nil {
		a, err := anypb.New(payload)
		if err != nil {
			t.Fatal(err)
		}
		ev.Payload = a
	}
	return ev
}

func TestServiceEventFrom(t *testing.T) {
	id := djinn.NewID()
	item := &djinnpb.ServiceItem{ServiceId: id[:], Service: []byte("h:1"), Types: []string{"Printer"},
		Entries: []*djinnpb.Entry{{Type: "Name", Fields: []*djinnpb.Field{{Name: "model", Value: client.ValueToProto(service.NewString("laser"))}}}}}

	ev := serviceEvent(t, &djinnpb.ServiceEvent{Transition: djinnpb.Transition_TRANSITION_NOMATCH_MATCH, ServiceId: id[:], Item: item})
	se, err := client.ServiceEventFrom(ev)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := client.ServiceItemFromProto(item)
	if se.RemoteEvent != ev || se.Transition != client.NoMatchMatch || se.ServiceID != id || !reflect.DeepEqual(*se.Item, want) {
		t.Errorf("decoded %+v, item %+v", se, se.Item)
	}
	// Removed: a MatchNoMatch without the item.
	se, err = client.ServiceEventFrom(serviceEvent(t, &djinnpb.ServiceEvent{Transition: djinnpb.Transition_TRANSITION_MATCH_NOMATCH, ServiceId: id[:]}))
	if err != nil || se.Transition != client.MatchNoMatch || se.Item != nil {
		t.Errorf("removal: %+v, %v", se, err)
	}
	// An item without its id is the event's.
	se, err = client.ServiceEventFrom(serviceEvent(t, &djinnpb.ServiceEvent{Transition: 4, ServiceId: id[:], Item: &djinnpb.ServiceItem{Types: []string{"T"}}}))
	if err != nil || se.Item.ID != id {
		t.Errorf("an item without its id: %+v, %v", se, err)
	}

	other := djinn.NewID()
	for _, tt := range []struct {
		name string
		ev   *client.RemoteEvent
		want string
	}{
		{"no event", nil, "service event: missing"},
		{"no payload", serviceEvent(t, nil), "payload: missing"},
		{"another payload", serviceEvent(t, &djinnpb.RenewalFailure{}), "djinn.v1.RenewalFailure"},
		{"garbage", &client.RemoteEvent{Payload: &anypb.Any{TypeUrl: "type.googleapis.com/djinn.v1.ServiceEvent", Value: []byte{0x12, 0x05}}}, "payload"},
		{"no transition", serviceEvent(t, &djinnpb.ServiceEvent{ServiceId: id[:], Item: item}), "transition 0"},
		{"two transitions", serviceEvent(t, &djinnpb.ServiceEvent{Transition: 3, ServiceId: id[:], Item: item}), "transition 3"},
		{"an unknown transition", serviceEvent(t, &djinnpb.ServiceEvent{Transition: 8, ServiceId: id[:], Item: item}), "transition 8"},
		{"a short service id", serviceEvent(t, &djinnpb.ServiceEvent{Transition: 1, ServiceId: []byte{1}}), "1 bytes"},
		{"nomatch-match without the item", serviceEvent(t, &djinnpb.ServiceEvent{Transition: 2, ServiceId: id[:]}), "item missing"},
		{"match-match without the item", serviceEvent(t, &djinnpb.ServiceEvent{Transition: 4, ServiceId: id[:]}), "item missing"},
		{"the item of another service", serviceEvent(t, &djinnpb.ServiceEvent{Transition: 4, ServiceId: id[:], Item: &djinnpb.ServiceItem{ServiceId: other[:]}}), "differs"},
		{"an item with a short id", serviceEvent(t, &djinnpb.ServiceEvent{Transition: 4, ServiceId: id[:], Item: &djinnpb.ServiceItem{ServiceId: []byte{1, 2}}}), "2 bytes"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			se, err := client.ServiceEventFrom(tt.ev)
			if se != nil || !errors.Is(err, djinn.ErrInvalidArgument) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("%+v, %v; want invalid argument naming %q", se, err, tt.want)
			}
		})
	}
}

// FuzzServiceEventFrom feeds the decoder any payload type and bytes: it
// answers with an event that keeps its promises, or an invalid argument
// error, and never panics; what it accepts it reads the same way again
// from its own wire form.
func FuzzServiceEventFrom(f *testing.F) {
	id := djinn.ID{1, 2, 3}
	seed := func(m proto.Message) {
		a, err := anypb.New(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(a.GetTypeUrl(), a.GetValue())
	}
	seed(&djinnpb.ServiceEvent{Transition: 2, ServiceId: id[:], Item: &djinnpb.ServiceItem{ServiceId: id[:], Service: []byte("h:1"), Types: []string{"Printer", "Device"},
		Entries: []*djinnpb.Entry{{Type: "Name", Supertypes: []string{"Base"}, Fields: []*djinnpb.Field{
			{Name: "model", Value: client.ValueToProto(service.NewString("laser"))}, {Name: "floor", Value: client.ValueToProto(service.NewInt(3))},
			{Name: "x", Value: client.ValueToProto(service.NewFloat(math.NaN()))}, {Name: "on", Value: client.ValueToProto(service.NewBool(true))},
			{Name: "b", Value: client.ValueToProto(service.NewBytes([]byte{0}))}, {Name: "null"}}}}}})
	seed(&djinnpb.ServiceEvent{Transition: 1, ServiceId: id[:]})
	seed(&djinnpb.ServiceEvent{Transition: 4, ServiceId: id[:], Item: &djinnpb.ServiceItem{}})
	seed(&djinnpb.ServiceEvent{Transition: 4, ServiceId: id[:], Item: &djinnpb.ServiceItem{ServiceId: []byte{9}}})
	seed(&djinnpb.ServiceEvent{Transition: 7, ServiceId: id[:]})
	seed(&djinnpb.RenewalFailure{})
	f.Add("", []byte(nil))
	f.Add("type.googleapis.com/djinn.v1.ServiceEvent", []byte{0x08, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, typeURL string, value []byte) {
		se, err := client.ServiceEventFrom(&client.RemoteEvent{Payload: &anypb.Any{TypeUrl: typeURL, Value: value}})
		if err != nil {
			if se != nil || !errors.Is(err, djinn.ErrInvalidArgument) {
				t.Fatalf("%+v and error %v of kind %v", se, err, djinn.KindOf(err))
			}
			return
		}
		switch {
		case se.Transition != client.MatchNoMatch && se.Transition != client.NoMatchMatch && se.Transition != client.MatchMatch:
			t.Fatalf("accepted transition %v", se.Transition)
		case se.Item == nil && se.Transition != client.MatchNoMatch:
			t.Fatalf("accepted %v without its item", se.Transition)
		case se.Item != nil && se.Item.ID != se.ServiceID:
			t.Fatalf("accepted item %s in an event of %s", se.Item.ID, se.ServiceID)
		}
		again := &djinnpb.ServiceEvent{Transition: djinnpb.Transition(se.Transition), ServiceId: se.ServiceID[:]}
		if se.Item != nil {
			again.Item = client.ServiceItemToProto(*se.Item)
		}
		se2, err := client.ServiceEventFrom(serviceEvent(t, again))
		if err != nil || se2.Transition != se.Transition || se2.ServiceID != se.ServiceID || !reflect.DeepEqual(se2.Item, se.Item) {
			t.Fatalf("re-encoded %+v read back as %+v, %v", se, se2, err)
		}
	})
}

// ExampleRegistrar: a client watches for printers coming and going; a
// service registers itself with attributes and keeps its lease renewed; the
// client finds it by an attribute and hears of its arrival and departure.
func ExampleRegistrar() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	addr, stop := exampleServer(ctx) // djinn serve listens on 127.0.0.1:4161
	defer stop()
	c, err := client.Dial(ctx, addr)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	reg, err := c.Lookup(ctx)
	if err != nil {
		log.Fatal(err)
	}
	renewer, err := client.NewRenewer(c)
	if err != nil {
		log.Fatal(err)
	}
	defer renewer.Close()

	// A client watches printers come and go.
	events := make(chan *client.ServiceEvent, 8)
	l, err := client.Listen(ctx, "127.0.0.1:0", func(_ context.Context, ev *client.RemoteEvent) error {
		se, err := client.ServiceEventFrom(ev)
		if err != nil {
			return err
		}
		events <- se // note the event and return quickly
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	watch, err := reg.Notify(ctx, service.Template{Types: []string{"Printer"}}, client.MatchNoMatch|client.NoMatchMatch, l.Ref(), nil, djinn.Any)
	if err != nil {
		log.Fatal(err)
	}
	if err := renewer.Renew(watch.Lease, djinn.EndOfTime); err != nil {
		log.Fatal(err)
	}
	next := func() *client.ServiceEvent {
		select {
		case se := <-events:
			return se
		case <-ctx.Done():
			log.Fatal("no service event came")
			return nil
		}
	}

	// The service's side.
	// A Printer is a Device: found by either, and browsing by type knows
	// which is the more specific.
	sr, err := reg.Register(ctx, service.Item{
		Service: []byte("10.0.0.7:9100"), Types: []string{"Printer"}, Supertypes: map[string][]string{"Printer": {"Device"}},
		Entries: []service.Entry{{Type: "Location", Fields: []service.Field{{Name: "floor", Value: service.NewInt(3)}}}},
	}, djinn.Any)
	if err != nil {
		log.Fatal(err)
	}
	if err := renewer.Renew(sr.Lease, djinn.EndOfTime); err != nil {
		log.Fatal(err)
	}

	// The client's side: a printer on floor 3 (a field left out, or null,
	// is a wildcard).
	floor3 := service.Template{Types: []string{"Printer"},
		Entries: []service.EntryTemplate{{Type: "Location", Fields: []service.Field{{Name: "floor", Value: service.NewInt(3)}}}}}
	it, err := reg.Lookup(ctx, floor3)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("printer at %s\n", it.Service)
	arrived := next()
	fmt.Println(arrived.Transition, arrived.ServiceID == it.ID)

	// The service leaves: its lease is cancelled, and watchers hear of it.
	if err := renewer.Cancel(ctx, sr.Lease); err != nil {
		log.Fatal(err)
	}
	left := next()
	fmt.Println(left.Transition, left.ServiceID == it.ID)
	// Output:
	// printer at 10.0.0.7:9100
	// nomatch-match true
	// match-nomatch true
}

// ExampleLookupStream: a busy client shares one stream among its
// goroutines; lookups that wait at the same time travel as one batch, and
// each has its own deadline.
func ExampleLookupStream() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	addr, stop := exampleServer(ctx) // djinn serve listens on 127.0.0.1:4161
	defer stop()
	c, err := client.Dial(ctx, addr)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	reg, err := c.Lookup(ctx)
	if err != nil {
		log.Fatal(err)
	}
	onFloor := func(floor int) []service.Field {
		return []service.Field{{Name: "floor", Value: service.NewInt(int64(floor))}}
	}
	for _, floor := range []int{1, 1, 2} { // two printers on floor 1, one on floor 2
		it := service.Item{Service: []byte("printer"), Types: []string{"Printer"},
			Entries: []service.Entry{{Type: "Location", Fields: onFloor(floor)}}}
		if _, err := reg.Register(ctx, it, time.Minute); err != nil {
			log.Fatal(err)
		}
	}

	stream, err := reg.Stream(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer stream.Close()
	var wg sync.WaitGroup
	for floor := range 3 {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			tmpl := service.Template{Types: []string{"Printer"},
				Entries: []service.EntryTemplate{{Type: "Location", Fields: onFloor(floor)}}}
			total, items, err := stream.LookupN(ctx, tmpl, 1)
			if err != nil {
				log.Print(err) // a stream that failed: open another
				return
			}
			fmt.Printf("floor %d: %d printers, %d returned\n", floor, total, len(items))
		})
	}
	wg.Wait()
	// Unordered output:
	// floor 0: 0 printers, 0 returned
	// floor 1: 2 printers, 1 returned
	// floor 2: 1 printers, 1 returned
}
