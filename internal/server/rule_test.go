package server

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"google.golang.org/grpc"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/grpcerr"
	"github.com/djinn-go/djinn/internal/principal"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// everyLandlordMethod is a complete set of rules for the Landlord service.
var everyLandlordMethod = Rules{"Renew": capability, "Cancel": capability, "RenewAll": capability, "CancelAll": capability, "RenewStream": capability, "Remaining": capability}

func without(r Rules, method string) Rules {
	out := Rules{}
	for k, v := range r {
		if k != method {
			out[k] = v
		}
	}
	return out
}

// TestRegisterNeedsARulePerMethod (DESIGN.md 7): a service is registered
// only with a rule for every method and stream of its description; the
// error names what is missing or wrong, and nothing is registered.
func TestRegisterNeedsARulePerMethod(t *testing.T) {
	for _, tt := range []struct {
		name  string
		rules Rules
		want  string
	}{
		{"a unary method without a rule", without(everyLandlordMethod, "CancelAll"), "/djinn.v1.Landlord/CancelAll"},
		{"a stream without a rule", without(everyLandlordMethod, "RenewStream"), "/djinn.v1.Landlord/RenewStream"},
		{"a rule for a method the service does not serve", func() Rules { r := without(everyLandlordMethod, ""); r["Renw"] = capability; return r }(), `"Renw"`},
		{"an owner rule without its ownership hook", func() Rules { r := without(everyLandlordMethod, ""); r["Cancel"] = Rule{Access: Owner}; return r }(), "ownership hook"},
		{"a rule with no access kind", func() Rules { r := without(everyLandlordMethod, ""); r["Renew"] = Rule{}; return r }(), "no access kind"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := grpc.NewServer()
			defer g.Stop()
			r := newRegistrar(g)
			err := r.serve(&djinnpb.Landlord_ServiceDesc, &landlordRPC{}, tt.rules)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("serve = %v, want an error naming %s", err, tt.want)
			}
			if len(g.GetServiceInfo()) != 0 || len(r.rules) != 0 {
				t.Fatal("a refused service was registered")
			}
		})
	}
	t.Run("every method ruled", func(t *testing.T) {
		g := grpc.NewServer()
		defer g.Stop()
		r := newRegistrar(g)
		if err := r.serve(&djinnpb.Landlord_ServiceDesc, &landlordRPC{}, everyLandlordMethod); err != nil {
			t.Fatal(err)
		}
		if err := r.verify(); err != nil || len(r.rules) != 6 {
			t.Fatalf("verify = %v with %d rules, want nil and 6", err, len(r.rules))
		}
	})
}

// TestVerifyFindsUnruledMethods: a service registered around the
// registrar, straight on the gRPC server, keeps the server from starting.
func TestVerifyFindsUnruledMethods(t *testing.T) {
	g := grpc.NewServer()
	defer g.Stop()
	r := newRegistrar(g)
	djinnpb.RegisterAdminServer(g, &adminRPC{})
	err := r.verify()
	if err == nil || !strings.Contains(err.Error(), "/djinn.v1.Admin/Join") || !strings.Contains(err.Error(), "/djinn.v1.Admin/Status") {
		t.Fatalf("verify = %v, want an error naming both Admin methods", err)
	}
}

// TestEdgeAuthorizesByRule: the edge looks up each call's rule; an Owner
// rule's hook answers for a resource of another principal before the
// handler runs, and a method without a rule is refused.
func TestEdgeAuthorizesByRule(t *testing.T) {
	notYours := djinn.Errorf(djinn.NoSuchObject, "registration: unknown")
	s := &Server{log: slog.New(slog.DiscardHandler), rules: map[string]Rule{
		"/t/Mine": owner(func(ctx context.Context, req *djinnpb.MailboxRegistrationRequest) error {
			if principal.From(ctx) != "alice" {
				return notYours
			}
			return nil
		}),
		"/t/Open": authenticated,
	}}
	call := func(ctx context.Context, method string) (ran bool, err error) {
		_, err = s.unaryEdge(ctx, &djinnpb.MailboxRegistrationRequest{}, &grpc.UnaryServerInfo{FullMethod: method}, func(context.Context, any) (any, error) {
			ran = true
			return "ok", nil
		})
		return ran, err
	}
	alice := principal.With(context.Background(), "alice")
	bob := principal.With(context.Background(), "bob")
	if ran, err := call(alice, "/t/Mine"); !ran || err != nil {
		t.Errorf("the owner's call: ran %v, %v", ran, err)
	}
	if ran, err := call(bob, "/t/Mine"); ran || !errors.Is(grpcerr.FromStatus(err), djinn.ErrNoSuchObject) {
		t.Errorf("another principal's call: ran %v, %v; want not found before the handler", ran, err)
	}
	if ran, err := call(bob, "/t/Open"); !ran || err != nil {
		t.Errorf("an authenticated call: ran %v, %v", ran, err)
	}
	if ran, err := call(alice, "/t/Unruled"); ran || err == nil {
		t.Errorf("a method without a rule: ran %v, %v; want refused", ran, err)
	}
}

// TestOpenRefusesAnUnruledRPC: a server one of whose parts registers a
// service with a method without a rule does not start, and says which.
func TestOpenRefusesAnUnruledRPC(t *testing.T) {
	saved := parts
	t.Cleanup(func() { parts = saved })
	parts = append(append([]func(*Server) *part(nil), saved...), func(*Server) *part {
		return &part{name: "unruled", enabled: true, serve: func(r *registrar) error {
			return r.serve(&djinnpb.Landlord_ServiceDesc, &landlordRPC{}, without(everyLandlordMethod, "RenewAll"))
		}}
	})
	cfg := Default()
	cfg.DataDir = t.TempDir()
	cfg.Listen, cfg.Admin, cfg.Raft, cfg.Lookup.Discovery = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0", ""
	s, err := Open(context.Background(), cfg, nil)
	if err == nil {
		s.Close()
		t.Fatal("a server with an RPC without an authorization rule started")
	}
	if !strings.Contains(err.Error(), "/djinn.v1.Landlord/RenewAll") {
		t.Fatalf("Open = %v, want an error naming /djinn.v1.Landlord/RenewAll", err)
	}
}
