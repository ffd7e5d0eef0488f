package main

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/grpcerr"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// TestLookupSurvivesKill: registrations acknowledged by the lookup service
// are in the log (issue 6, section 1): after a SIGKILL and a restart on the
// same data they are found again, with their attributes, and their leases
// still hold (attributes change through their cookies).
func TestLookupSurvivesKill(t *testing.T) {
	n := newNode(t)
	p := n.start(t)
	defer func() { p.kill() }()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ls := djinnpb.NewLookupServiceClient(dial(t, p.addr))
	var regs []*djinnpb.ServiceRegistration
	for _, model := range []string{"laser", "inkjet", "plotter"} {
		r, err := ls.Register(ctx, &djinnpb.RegisterRequest{LeaseDurationNanos: int64(time.Hour), Item: &djinnpb.ServiceItem{
			Service: []byte("127.0.0.1:9"), Types: []string{"Printer"},
			Entries: []*djinnpb.Entry{{Type: "Name", Fields: []*djinnpb.Field{{Name: "model", Value: &djinnpb.Value{Kind: &djinnpb.Value_StringValue{StringValue: model}}}}}},
		}})
		if err != nil {
			t.Fatal(err)
		}
		regs = append(regs, r)
	}
	p.kill()
	p = n.start(t)
	ls = djinnpb.NewLookupServiceClient(dial(t, p.addr))
	var resp *djinnpb.LookupResponse
	deadline := time.Now().Add(20 * time.Second)
	for {
		var err error
		resp, err = ls.Lookup(ctx, &djinnpb.LookupRequest{Template: &djinnpb.ServiceTemplate{Types: []string{"Printer"}}, MaxMatches: 10})
		if err == nil {
			break
		}
		if !errors.Is(grpcerr.FromStatus(err), djinn.ErrUnavailable) || time.Now().After(deadline) {
			t.Fatal(err)
		}
		<-time.After(50 * time.Millisecond)
	}
	if resp.GetTotal() != 3 {
		t.Fatalf("after the restart: %d printers, want the 3 registered", resp.GetTotal())
	}
	if _, err := ls.SetAttributes(ctx, &djinnpb.AttributesRequest{LeaseCookie: regs[1].GetLease().GetCookie(),
		Entries: []*djinnpb.Entry{{Type: "Name", Fields: []*djinnpb.Field{{Name: "model", Value: &djinnpb.Value{Kind: &djinnpb.Value_StringValue{StringValue: "photo"}}}}}}}); err != nil {
		t.Fatalf("attributes through a registration's cookie after the restart: %v", err)
	}
	one, err := ls.Lookup(ctx, &djinnpb.LookupRequest{MaxMatches: 10, Template: &djinnpb.ServiceTemplate{Entries: []*djinnpb.EntryTemplate{{Type: "Name",
		Fields: []*djinnpb.Field{{Name: "model", Value: &djinnpb.Value{Kind: &djinnpb.Value_StringValue{StringValue: "photo"}}}}}}}})
	if err != nil || one.GetTotal() != 1 || string(one.GetItems()[0].GetServiceId()) != string(regs[1].GetServiceId()) {
		t.Fatalf("the changed item: %v %v", one, err)
	}
}
