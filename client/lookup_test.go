package client

import (
	"errors"
	"testing"

	"google.golang.org/protobuf/types/known/anypb"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

func serviceEvent(t testing.TB, se *djinnpb.ServiceEvent) *RemoteEvent {
	p, err := anypb.New(se)
	if err != nil {
		t.Fatal(err)
	}
	return &RemoteEvent{Payload: p}
}

func TestServiceEventFrom(t *testing.T) {
	id := djinn.NewID()
	good := &djinnpb.ServiceEvent{Transition: djinnpb.Transition_TRANSITION_NOMATCH_MATCH, ServiceId: id[:], Item: &djinnpb.ServiceItem{ServiceId: id[:]}}
	se, err := ServiceEventFrom(serviceEvent(t, good))
	if err != nil || se.GetTransition() != good.GetTransition() || string(se.GetServiceId()) != string(id[:]) {
		t.Fatalf("decoded %v %v", se, err)
	}
	other, _ := anypb.New(&djinnpb.Lease{})
	for name, ev := range map[string]*RemoteEvent{
		"no payload":      {},
		"another payload": {Payload: other},
		"no transition":   serviceEvent(t, &djinnpb.ServiceEvent{ServiceId: id[:]}),
		"bad service id":  serviceEvent(t, &djinnpb.ServiceEvent{Transition: 1, ServiceId: []byte{1}}),
	} {
		if _, err := ServiceEventFrom(ev); !errors.Is(err, djinn.ErrInvalidArgument) {
			t.Errorf("%s: %v, want InvalidArgument", name, err)
		}
	}
}

func FuzzServiceEventFrom(f *testing.F) {
	id := djinn.NewID()
	p, _ := anypb.New(&djinnpb.ServiceEvent{Transition: 4, ServiceId: id[:], Item: &djinnpb.ServiceItem{Types: []string{"T"}}})
	f.Add(p.GetTypeUrl(), p.GetValue())
	f.Add("type.googleapis.com/djinn.v1.ServiceEvent", []byte{8, 9})
	f.Fuzz(func(t *testing.T, url string, value []byte) {
		se, err := ServiceEventFrom(&RemoteEvent{Payload: &anypb.Any{TypeUrl: url, Value: value}})
		if err == nil && (se.GetTransition() == 0 || len(se.GetServiceId()) != 16) {
			t.Fatalf("accepted %v", se)
		}
	})
}

func TestLookupArguments(t *testing.T) {
	r := NewRegistrar(nil, djinn.Ref{})
	if _, _, err := r.LookupN(t.Context(), nil, -1); !errors.Is(err, djinn.ErrInvalidArgument) {
		t.Errorf("negative max: %v", err)
	}
	if _, err := r.Notify(t.Context(), nil, 8, djinn.Ref{}, nil, djinn.Any); !errors.Is(err, djinn.ErrInvalidArgument) {
		t.Errorf("unknown transition: %v", err)
	}
	if _, err := r.Register(t.Context(), nil, djinn.Any); !errors.Is(err, djinn.ErrInvalidArgument) {
		t.Errorf("nil item: %v", err)
	}
	var reg *ServiceRegistration
	if err := reg.SetAttributes(t.Context(), nil); !errors.Is(err, djinn.ErrInvalidArgument) {
		t.Errorf("nil registration: %v", err)
	}
}
