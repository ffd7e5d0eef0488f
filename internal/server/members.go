package server

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/backoff"
	"github.com/djinn-go/djinn/internal/replica"
	"github.com/djinn-go/djinn/proto/djinnpb"
	"github.com/djinn-go/djinn/proto/statepb"
)

// Cluster membership (DESIGN.md 7a). Raft's configuration says who votes;
// the log's Member records say where each member serves gRPC and whether it
// is to vote. A server joins as a non-voter and the leader promotes it once
// its applied index is within Cluster.MaxLag of the leader's, so a new
// member never counts towards a quorum it cannot yet serve.

// probeTimeout bounds one member's answer to a health probe.
const probeTimeout = time.Second

// Members lists the members as this node sees them; with health asked it
// first probes every member.
func (a *adminRPC) Members(ctx context.Context, r *djinnpb.MembersRequest) (*djinnpb.MembersResponse, error) {
	s := a.s
	ms, err := s.node.Members()
	if err != nil {
		return nil, err
	}
	svc := s.machine.ServiceID()
	leaderID, _ := s.node.Leader()
	resp := &djinnpb.MembersResponse{
		ServiceId: svc[:], NodeId: s.node.ID(), LeaderId: leaderID, LeaderAddress: s.node.LeaderEndpoint(),
		RulesVersion: s.machine.Rules(),
	}
	for _, id := range s.machine.PreviousIDs() {
		resp.PreviousServiceIds = append(resp.PreviousServiceIds, id[:])
	}
	for _, m := range ms {
		info, _ := s.machine.Member(m.ID)
		pb := &djinnpb.Member{
			NodeId: m.ID, RaftAddress: m.RaftAddr, Voter: m.Voter, GrpcAddress: info.Endpoint,
			Role: "follower", Staged: !m.Voter && info.Voter, RulesMax: info.RulesMax,
		}
		switch {
		case m.ID == leaderID:
			pb.Role = "leader"
		case !m.Voter:
			pb.Role = "nonvoter"
		}
		resp.Members = append(resp.Members, pb)
	}
	if r.GetHealth() {
		s.probe(ctx, resp.Members)
	}
	return resp, nil
}

// probe asks every member for its status, at once, and fills in its role,
// applied index, last contact and health.
func (s *Server) probe(ctx context.Context, members []*djinnpb.Member) {
	sts := make([]*djinnpb.StatusResponse, len(members))
	errs := make([]error, len(members))
	var wg sync.WaitGroup
	for i, m := range members {
		wg.Go(func() { sts[i], errs[i] = s.memberStatus(ctx, m) })
	}
	wg.Wait()
	var leaderApplied uint64
	for i, st := range sts {
		if errs[i] == nil && st.GetState() == "Leader" {
			leaderApplied = st.GetAppliedIndex()
		}
	}
	for i, m := range members {
		s.judge(m, sts[i], errs[i], leaderApplied)
	}
}

// memberStatus returns m's own status: this node's at once, another's
// over gRPC.
func (s *Server) memberStatus(ctx context.Context, m *djinnpb.Member) (*djinnpb.StatusResponse, error) {
	if m.GetNodeId() == s.node.ID() {
		return s.nodeStatus(), nil
	}
	if m.GetGrpcAddress() == "" {
		return nil, djinn.Errorf(djinn.Unavailable, "its gRPC address is not yet recorded")
	}
	conn, err := s.pool.Conn(m.GetGrpcAddress())
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	return djinnpb.NewAdminClient(conn).Status(ctx, &djinnpb.StatusRequest{})
}

// nodeStatus is the part of Status that describes this node.
func (s *Server) nodeStatus() *djinnpb.StatusResponse {
	leaderID, _ := s.node.Leader()
	svc := s.machine.ServiceID()
	return &djinnpb.StatusResponse{
		ServiceId: svc[:], NodeId: s.node.ID(), State: s.node.State(), LeaderId: leaderID,
		LeaderAddress: s.node.LeaderEndpoint(), AppliedIndex: s.node.AppliedIndex(),
		CommitIndex: s.node.CommitIndex(), LastContactNanos: int64(s.node.LastContact()), Ready: s.ready(),
		RulesVersion: s.machine.Rules(), RulesMax: s.machine.MaxRules(), Stopped: s.stoppedReason(),
	}
}

// judge fills in m's health from its status (or the error that stood in
// for it) and the leader's applied index (0 when the leader did not
// answer).
func (s *Server) judge(m *djinnpb.Member, st *djinnpb.StatusResponse, err error, leaderApplied uint64) {
	if err != nil {
		m.Health, m.Error = "unreachable", err.Error()
		return
	}
	m.AppliedIndex, m.LastContactNanos = st.GetAppliedIndex(), st.GetLastContactNanos()
	switch state := st.GetState(); {
	case state == "Leader":
		m.Role = "leader"
	case state == "Follower" && !m.GetVoter():
		m.Role = "nonvoter"
	default:
		m.Role = lower(state)
	}
	m.Health = "healthy"
	contact := time.Duration(st.GetLastContactNanos())
	stale := 2 * s.node.ElectionTimeout()
	switch {
	case m.Role == "leader":
	case contact < 0:
		m.Health, m.Error = "lagging", "has never heard from a leader"
	case contact > stale:
		m.Health, m.Error = "lagging", fmt.Sprintf("last heard from the leader %s ago", contact.Round(time.Millisecond))
	case leaderApplied > m.AppliedIndex && leaderApplied-m.AppliedIndex > s.cfg.Cluster.MaxLag:
		m.Health, m.Error = "lagging", fmt.Sprintf("%d log entries behind the leader", leaderApplied-m.AppliedIndex)
	}
}

func lower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// Join adds the calling server as a non-voter that is to vote: the leader
// promotes it once it has caught up.
//
// A peer certificate proves one node: its holder joins as that node only
// (adminRules).
func (a *adminRPC) Join(ctx context.Context, r *djinnpb.JoinRequest) (*djinnpb.JoinResponse, error) {
	if err := a.s.checkJoinRules(r.GetNodeId(), r.GetRulesMax()); err != nil {
		return nil, err
	}
	if err := a.s.addMember(ctx, r.GetNodeId(), r.GetRaftAddress(), r.GetGrpcAddress(), true, r.GetRulesMax()); err != nil {
		return nil, err
	}
	a.s.log.Info("node joined", "node", r.GetNodeId(), "raft", r.GetRaftAddress(), "grpc", r.GetGrpcAddress())
	return &djinnpb.JoinResponse{}, nil
}

// AddMember adds a server that waits to be added, as Join does for a
// server that asks.
func (a *adminRPC) AddMember(ctx context.Context, r *djinnpb.AddMemberRequest) (*djinnpb.AddMemberResponse, error) {
	if err := a.s.addMember(ctx, r.GetNodeId(), r.GetRaftAddress(), r.GetGrpcAddress(), !r.GetNonvoter(), 0); err != nil {
		return nil, err
	}
	a.s.log.Info("member added", "node", r.GetNodeId(), "raft", r.GetRaftAddress(), "grpc", r.GetGrpcAddress(), "voter", !r.GetNonvoter())
	return &djinnpb.AddMemberResponse{}, nil
}

// addMember adds a server as a non-voter, then records its address and
// whether it is to vote. A member already there keeps its suffrage.
func (s *Server) addMember(ctx context.Context, id, raftAddr, grpcAddr string, voter bool, rulesMax uint32) error {
	if err := s.node.CheckLeader(); err != nil {
		return err
	}
	if err := djinn.CheckEndpoint(grpcAddr); err != nil {
		return djinn.Errorf(djinn.InvalidArgument, "grpc address: %v", err)
	}
	if err := s.node.AddNonvoter(ctx, id, raftAddr); err != nil {
		return err
	}
	return s.recordMember(ctx, &statepb.Member{NodeId: id, GrpcAddress: grpcAddr, Voter: voter, RulesMax: rulesMax})
}

func (s *Server) recordMember(ctx context.Context, m *statepb.Member) error {
	_, err := s.node.Propose(ctx, &statepb.Command{Op: &statepb.Command_Member{Member: m}})
	return err
}

// RemoveMember removes a member; the leader alone can.
func (a *adminRPC) RemoveMember(ctx context.Context, r *djinnpb.RemoveMemberRequest) (*djinnpb.RemoveMemberResponse, error) {
	if err := a.s.removeMember(ctx, r.GetNodeId()); err != nil {
		return nil, err
	}
	a.s.log.Info("member removed", "node", r.GetNodeId())
	return &djinnpb.RemoveMemberResponse{}, nil
}

func (s *Server) removeMember(ctx context.Context, id string) error {
	if err := s.node.CheckLeader(); err != nil {
		return err
	}
	ms, err := s.node.Members()
	if err != nil {
		return err
	}
	voters, isVoter := 0, false
	for _, m := range ms {
		if m.Voter {
			voters++
			isVoter = isVoter || m.ID == id
		}
	}
	if isVoter && voters == 1 {
		return djinn.Errorf(djinn.InvalidArgument, "node %q: the last voter cannot be removed; stop the server instead", id)
	}
	if err := s.node.RemoveServer(ctx, id); err != nil {
		return err
	}
	if id == s.node.ID() {
		return nil // no longer leads; the next leader drops the record
	}
	return s.recordMember(ctx, &statepb.Member{NodeId: id, Removed: true})
}

// Leave makes this node leave the cluster: it hands leadership on if it
// leads, has itself removed by the leader, and then stops serving (Left).
func (a *adminRPC) Leave(ctx context.Context, _ *djinnpb.LeaveRequest) (*djinnpb.LeaveResponse, error) {
	s := a.s
	if s.node.IsLeader() {
		if err := s.node.TransferLeadership(ctx, ""); err != nil {
			s.log.Warn("leave: leadership transfer failed; removing this leader anyway", "err", err)
		}
	}
	// A leadership just handed on is not known at once: ask until the
	// new leader answers, or ctx ends.
	for b := backoff.New(50*time.Millisecond, time.Second); ; {
		err := s.removeSelf(ctx)
		if err == nil {
			break
		}
		if djinn.KindOf(err) != djinn.Unavailable {
			return nil, err
		}
		s.log.Warn("leave: this node's removal is not done yet; retrying", "err", err, "within", b.Next())
		if !b.Wait(ctx) {
			return nil, err
		}
	}
	s.log.Info("left the cluster", "node", s.node.ID())
	s.leaveOnce.Do(func() { close(s.left) })
	return &djinnpb.LeaveResponse{}, nil
}

// removeSelf asks the leader (this node, or another over gRPC) to remove
// this node.
func (s *Server) removeSelf(ctx context.Context) error {
	if s.node.IsLeader() {
		return s.removeMember(ctx, s.node.ID())
	}
	leader := s.node.LeaderEndpoint()
	if leader == "" {
		return djinn.Errorf(djinn.Unavailable, "no leader is known to remove this node; try again once the cluster has one")
	}
	conn, err := s.peers.Conn(leader)
	if err != nil {
		return err
	}
	_, err = djinnpb.NewAdminClient(conn).RemoveMember(ctx, &djinnpb.RemoveMemberRequest{NodeId: s.node.ID()})
	return err
}

// Left is closed when this node has left the cluster (Admin/Leave): the
// process should close the server and stop.
func (s *Server) Left() <-chan struct{} { return s.left }

// TransferLeadership hands leadership on; a follower points the call at
// the leader.
func (a *adminRPC) TransferLeadership(ctx context.Context, r *djinnpb.TransferLeadershipRequest) (*djinnpb.TransferLeadershipResponse, error) {
	s := a.s
	if err := s.node.TransferLeadership(ctx, r.GetNodeId()); err != nil {
		return nil, err
	}
	leader, _ := s.node.Leader()
	s.log.Info("leadership transferred", "from", s.node.ID(), "to", leader)
	return &djinnpb.TransferLeadershipResponse{LeaderId: leader}, nil
}

// tendMembers is leader work: it keeps the log's member records and
// Raft's configuration in step, and promotes caught-up non-voters, every
// promoteEvery until ctx ends.
func (s *Server) tendMembers(ctx context.Context) {
	every := max(time.Duration(s.cfg.Raftcfg.HeartbeatTimeout), 50*time.Millisecond)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		s.tendOnce(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (s *Server) tendOnce(ctx context.Context) {
	ms, err := s.node.Members()
	if err != nil {
		return
	}
	s.dropStaleRecords(ctx, ms)
	s.tendRules(ctx, ms)
	for _, m := range ms {
		info, ok := s.machine.Member(m.ID)
		if m.Voter || !ok || !info.Voter {
			continue
		}
		st, err := s.memberStatus(ctx, &djinnpb.Member{NodeId: m.ID, GrpcAddress: info.Endpoint})
		if err != nil {
			continue // not up yet; the next round asks again
		}
		if !caughtUp(s.node.AppliedIndex(), st.GetAppliedIndex(), s.cfg.Cluster.MaxLag) {
			continue
		}
		if err := s.node.AddVoter(ctx, m.ID, m.RaftAddr); err != nil {
			s.log.Warn("promoting a caught-up member failed; retrying", "node", m.ID, "err", err)
			continue
		}
		s.log.Info("member promoted to voter", "node", m.ID, "applied", st.GetAppliedIndex())
	}
}

// caughtUp reports whether a member that applied the log up to applied
// has caught up with a leader that applied it up to leader: it has applied
// something (the log or a snapshot reached it), and is within maxLag.
func caughtUp(leader, applied, maxLag uint64) bool {
	return applied > 0 && (applied >= leader || leader-applied <= maxLag)
}

// dropStaleRecords forgets member records of servers no longer in the
// configuration (a leader that removed itself could not).
func (s *Server) dropStaleRecords(ctx context.Context, ms []replica.Member) {
	in := make(map[string]bool, len(ms))
	for _, m := range ms {
		in[m.ID] = true
	}
	for _, id := range s.machine.MemberIDs() {
		if !in[id] {
			if err := s.recordMember(ctx, &statepb.Member{NodeId: id, Removed: true}); err != nil {
				return
			}
		}
	}
}
