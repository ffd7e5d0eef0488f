package server

import "github.com/djinn-go/djinn/proto/djinnpb"

// access is who may call an RPC (DESIGN.md 7).
type access string

const (
	// anyClient: any authenticated client.
	anyClient access = "any authenticated client"
	// operatorRole: principals with the operator role only.
	operatorRole access = "operator"
)

// adminAccess declares who may call each Admin RPC. The member list and a
// member's status are read by any authenticated client: they hold
// addresses and counts only, and clients need the list to follow the
// cluster. Every change to the membership, and snapshots, need the
// operator role. Until the authorization interceptor enforces roles, these
// RPCs answer any client, as every other RPC does; this table is where
// their rules are declared, and a test keeps it complete.
var adminAccess = map[string]access{
	djinnpb.Admin_Status_FullMethodName:             anyClient,
	djinnpb.Admin_Members_FullMethodName:            anyClient,
	djinnpb.Admin_Join_FullMethodName:               operatorRole,
	djinnpb.Admin_AddMember_FullMethodName:          operatorRole,
	djinnpb.Admin_RemoveMember_FullMethodName:       operatorRole,
	djinnpb.Admin_Leave_FullMethodName:              operatorRole,
	djinnpb.Admin_TransferLeadership_FullMethodName: operatorRole,
}
