package server

import (
	"testing"

	"github.com/djinn-go/djinn/proto/djinnpb"
)

// TestEveryAdminRPCHasARule: an Admin RPC without a declared rule is a
// defect (DESIGN.md 7); membership changes need the operator role.
func TestEveryAdminRPCHasARule(t *testing.T) {
	sd := djinnpb.Admin_ServiceDesc
	var methods []string
	for _, m := range sd.Methods {
		methods = append(methods, "/"+sd.ServiceName+"/"+m.MethodName)
	}
	for _, s := range sd.Streams {
		methods = append(methods, "/"+sd.ServiceName+"/"+s.StreamName)
	}
	for _, m := range methods {
		if _, ok := adminAccess[m]; !ok {
			t.Errorf("%s has no access rule", m)
		}
	}
	if len(adminAccess) != len(methods) {
		t.Errorf("%d rules for %d Admin RPCs", len(adminAccess), len(methods))
	}
	for _, m := range []string{djinnpb.Admin_AddMember_FullMethodName, djinnpb.Admin_RemoveMember_FullMethodName,
		djinnpb.Admin_Leave_FullMethodName, djinnpb.Admin_TransferLeadership_FullMethodName, djinnpb.Admin_Join_FullMethodName} {
		if adminAccess[m] != operatorRole {
			t.Errorf("%s: %q, want the operator role", m, adminAccess[m])
		}
	}
}
