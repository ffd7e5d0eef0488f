package server

import (
	"testing"

	"google.golang.org/grpc"

	"github.com/djinn-go/djinn/proto/djinnpb"
)

// TestEveryAdminRPCHasARule: an Admin RPC without a declared rule is a
// defect (DESIGN.md 7); membership changes need the operator role, but for
// those a server makes itself (joining, leaving), which a peer may make.
func TestEveryAdminRPCHasARule(t *testing.T) {
	g := grpc.NewServer()
	defer g.Stop()
	if err := newRegistrar(g).serve(&djinnpb.Admin_ServiceDesc, &adminRPC{}, adminRules); err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"AddMember", "Leave", "TransferLeadership", "SaveSnapshot"} {
		if adminRules[m].Access != Operator {
			t.Errorf("%s: %v, want the operator role", m, adminRules[m].Access)
		}
	}
	for _, m := range []string{"Join", "RemoveMember"} {
		if adminRules[m].Access != Peer {
			t.Errorf("%s: %v, want a peer or the operator role", m, adminRules[m].Access)
		}
	}
}
