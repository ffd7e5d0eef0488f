package lds_test

import (
	"context"
	"testing"
	"testing/synctest"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/lds"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// TestLocatorBound (DESIGN.md 7: everything that holds memory is bounded;
// excess gets RESOURCE_EXHAUSTED naming the limit): the registrations
// together want at most MaxLocators distinct locators discovered — each one
// a lookup service the node dials until it answers. A registration or a
// change that would want more is refused, naming the locator and the
// limit, and logs nothing; locators already wanted cost nothing, removing
// is never refused, and a registration that ends frees its own. Before,
// 256 locators a registration times 10,000 registrations a principal had
// the node dial millions of addresses, a goroutine each.
func TestLocatorBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := start(t, newMachine(), lds.Config{MaxLocators: 3})
		ctx := context.Background()
		_, first := f.register(&djinnpb.LDSRegisterRequest{Locators: []string{loc(1), loc(2)}})
		_, second := f.register(&djinnpb.LDSRegisterRequest{Locators: []string{loc(2), loc(3)}})
		n := len(f.log.Commands())
		_, err := f.svc.Register(ctx, &djinnpb.LDSRegisterRequest{Listener: listener, LeaseDurationNanos: 1, Locators: []string{loc(1), loc(4)}})
		wantErr(t, err, djinn.ResourceExhausted, "4 distinct locators", "limit of 3", "10.0.0.4")
		_, err = f.svc.ChangeLocators(ctx, &djinnpb.LDSLocatorsRequest{LeaseCookie: first, Op: djinnpb.SetOp_SET_OP_ADD, Locators: []string{loc(4)}})
		wantErr(t, err, djinn.ResourceExhausted, "limit of 3", "10.0.0.4")
		_, err = f.svc.ChangeLocators(ctx, &djinnpb.LDSLocatorsRequest{LeaseCookie: first, Op: djinnpb.SetOp_SET_OP_SET, Locators: []string{loc(4)}})
		wantErr(t, err, djinn.ResourceExhausted, "limit of 3", "10.0.0.4")
		if m := len(f.log.Commands()); m != n {
			t.Errorf("refused calls logged %d commands", m-n)
		}
		// Locators wanted already, and removals, go through at the limit.
		f.register(&djinnpb.LDSRegisterRequest{Locators: []string{loc(3), loc(1)}})
		if _, err := f.svc.ChangeLocators(ctx, &djinnpb.LDSLocatorsRequest{LeaseCookie: first, Op: djinnpb.SetOp_SET_OP_REMOVE, Locators: []string{loc(9)}}); err != nil {
			t.Fatalf("remove at the limit: %v", err)
		}
		// The second registration ends (the others want its locators too);
		// the first gives loc(2) up, and then loc(4) fits.
		if errs := f.lessor.Cancel(ctx, []djinn.ID{djinn.ID(second)}); errs[0] != nil {
			t.Fatal(errs[0])
		}
		if _, err := f.svc.ChangeLocators(ctx, &djinnpb.LDSLocatorsRequest{LeaseCookie: first, Op: djinnpb.SetOp_SET_OP_SET, Locators: []string{loc(1)}}); err != nil {
			t.Fatal(err)
		}
		if _, err := f.svc.ChangeLocators(ctx, &djinnpb.LDSLocatorsRequest{LeaseCookie: first, Op: djinnpb.SetOp_SET_OP_ADD, Locators: []string{loc(4)}}); err != nil {
			t.Fatalf("add once another locator was freed: %v", err)
		}
	})
}
