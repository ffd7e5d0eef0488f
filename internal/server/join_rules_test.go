package server

import (
	"strings"
	"testing"

	"google.golang.org/grpc"

	"github.com/djinn-go/djinn/proto/djinnpb"
)

// TestJoinAdminRules: every JoinAdmin RPC has a rule (the registrar
// refuses a service with a method without one); every change needs the
// operator role, and reads an authenticated caller.
func TestJoinAdminRules(t *testing.T) {
	g := grpc.NewServer()
	defer g.Stop()
	if err := newRegistrar(g).serve(&djinnpb.JoinAdmin_ServiceDesc, &joinRPC{}, joinRules); err != nil {
		t.Fatal(err)
	}
	for name, rule := range joinRules {
		want := Operator
		if strings.HasPrefix(name, "Get") || name == "ListJoins" {
			want = Authenticated
		}
		if rule.Access != want {
			t.Errorf("%s: %v, want %v", name, rule.Access, want)
		}
	}
}
