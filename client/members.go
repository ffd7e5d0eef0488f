package client

import (
	"context"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// Member is one member of a djinn cluster, as the member list gives it.
type Member struct {
	NodeID      string
	Endpoint    string // where it serves gRPC ("" until it has recorded it)
	RaftAddress string
	Voter       bool
	// Role is leader, follower or nonvoter by the configuration; with
	// health asked, the member's own view (a candidate says candidate).
	Role string
	// Staged is a non-voter the leader promotes once it has caught up.
	Staged bool
	// With health asked: healthy, lagging or unreachable, and why.
	Health string
	Error  string
	// With health asked: the last log index the member applied, and how
	// long ago it last heard from the leader (0 on the leader, -1 never).
	AppliedIndex uint64
	LastContact  time.Duration
	// RulesMax is the highest rules version the member's binary supports,
	// as the log records it (0: not yet known).
	RulesMax uint32
}

// Members is a cluster's member list as one member sees it.
type Members struct {
	ServiceID djinn.ID
	NodeID    string // the member that answered
	LeaderID  string // "" when no leader is known
	Leader    string // the leader's endpoint
	Members   []Member
	// Previous are the service ids of the clusters this one was restored
	// from: references they made name its resources.
	Previous []djinn.ID
	// RulesVersion is the cluster's rules version, which the leader
	// raises once every member's RulesMax allows.
	RulesVersion uint32
}

// Members lists the dialled cluster's members, as whichever member answers
// sees them. With health set, that member first asks every member for its
// role, applied index and last contact with the leader.
func (c *Client) Members(ctx context.Context, health bool) (*Members, error) {
	resp, err := djinnpb.NewAdminClient(c.cluster.cc).Members(anyMember(ctx), &djinnpb.MembersRequest{Health: health})
	if err != nil {
		return nil, err
	}
	return membersFromProto(resp)
}

func membersFromProto(pb *djinnpb.MembersResponse) (*Members, error) {
	ms := &Members{NodeID: pb.GetNodeId(), LeaderID: pb.GetLeaderId(), Leader: pb.GetLeaderAddress(), RulesVersion: pb.GetRulesVersion()}
	if len(pb.GetServiceId()) > 0 {
		id, err := djinn.IDFromBytes("service id", pb.GetServiceId())
		if err != nil {
			return nil, err
		}
		ms.ServiceID = id
	}
	for _, b := range pb.GetPreviousServiceIds() {
		id, err := djinn.IDFromBytes("previous service id", b)
		if err != nil {
			return nil, err
		}
		ms.Previous = append(ms.Previous, id)
	}
	for _, m := range pb.GetMembers() {
		ms.Members = append(ms.Members, Member{
			NodeID: m.GetNodeId(), Endpoint: m.GetGrpcAddress(), RaftAddress: m.GetRaftAddress(), Voter: m.GetVoter(),
			Role: m.GetRole(), Staged: m.GetStaged(), Health: m.GetHealth(), Error: m.GetError(),
			AppliedIndex: m.GetAppliedIndex(), LastContact: time.Duration(m.GetLastContactNanos()), RulesMax: m.GetRulesMax(),
		})
	}
	return ms, nil
}

// NewMember is a server to add to a cluster: one started to wait until it
// is added (djinn serve --bootstrap=false).
type NewMember struct {
	NodeID      string
	RaftAddress string // where its peers reach it
	Endpoint    string // where it serves gRPC
	// Nonvoter keeps it a non-voter: it receives the log (and may serve
	// reads that allow staleness) but never votes. Otherwise the leader
	// promotes it to voter once it has caught up.
	Nonvoter bool
}

// AddMember adds m to the dialled cluster as a non-voter, promoted to voter
// once it has caught up unless m.Nonvoter. It needs the operator role.
func (c *Client) AddMember(ctx context.Context, m NewMember) error {
	_, err := djinnpb.NewAdminClient(c.cluster.cc).AddMember(ctx, &djinnpb.AddMemberRequest{
		NodeId: m.NodeID, RaftAddress: m.RaftAddress, GrpcAddress: m.Endpoint, Nonvoter: m.Nonvoter,
	})
	return err
}

// RemoveMember removes the member nodeID from the dialled cluster. The last
// voter cannot be removed. It needs the operator role.
func (c *Client) RemoveMember(ctx context.Context, nodeID string) error {
	_, err := djinnpb.NewAdminClient(c.cluster.cc).RemoveMember(ctx, &djinnpb.RemoveMemberRequest{NodeId: nodeID})
	return err
}

// TransferLeadership makes the leader hand leadership to nodeID (a voter),
// or to the most up-to-date voter when nodeID is empty, and returns the new
// leader's id when known. It needs the operator role.
func (c *Client) TransferLeadership(ctx context.Context, nodeID string) (string, error) {
	resp, err := djinnpb.NewAdminClient(c.cluster.cc).TransferLeadership(ctx, &djinnpb.TransferLeadershipRequest{NodeId: nodeID})
	if err != nil {
		return "", err
	}
	return resp.GetLeaderId(), nil
}

// Leave makes the member serving at endpoint leave its cluster: it hands
// leadership on if it leads, has itself removed, and stops. It needs the
// operator role.
func (c *Client) Leave(ctx context.Context, endpoint string) error {
	cc, err := c.pool.Conn(endpoint)
	if err != nil {
		return err
	}
	// Never at the leader a refusing member names: that one would leave.
	ctx = context.WithValue(ctx, redirectedKey{}, true)
	_, err = djinnpb.NewAdminClient(cc).Leave(ctx, &djinnpb.LeaveRequest{})
	return err
}
