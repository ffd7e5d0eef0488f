package server

import (
	"context"
	"net/http"
	"net/http/pprof"
	"net/url"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/console"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// adminPart is the Admin service, and the leader's tending of the
// cluster's members.
func adminPart(s *Server) *part {
	return &part{
		name:    "admin",
		enabled: true,
		serve: func(r *registrar) error {
			return r.serve(&djinnpb.Admin_ServiceDesc, &adminRPC{s: s}, adminRules)
		},
		run: s.tendMembers,
		page: &page{
			title: "Cluster",
			view:  func(ctx context.Context, _ url.Values) (any, error) { return s.clusterView(ctx) },
			actions: map[string]func(context.Context, string) error{
				"remove": s.removeMember,
			},
		},
	}
}

// clusterView is the console's cluster page: this node, the leader, the
// rules version (with this member's supported maximum and, when it stopped
// applying the log, why), and every member with its health as the probe
// finds it and the rules version its binary supports.
func (s *Server) clusterView(ctx context.Context) (any, error) {
	type member struct {
		Node          string `json:"node"`
		Raft          string `json:"raft"`
		GRPC          string `json:"grpc"`
		Voter         bool   `json:"voter"`
		Role          string `json:"role"`
		Health        string `json:"health"`
		Error         string `json:"error,omitempty"`
		Applied       uint64 `json:"applied"`
		LastContactMs int64  `json:"lastContactMs"`
		RulesMax      uint32 `json:"rulesMax"`
	}
	ms, err := (&adminRPC{s: s}).Members(ctx, &djinnpb.MembersRequest{Health: true})
	if err != nil {
		return nil, err
	}
	n := s.node
	v := struct {
		Now           int64    `json:"now"`
		Node          string   `json:"node"`
		State         string   `json:"state"`
		Leader        string   `json:"leader"`
		Term          uint64   `json:"term"`
		Applied       uint64   `json:"applied"`
		Commit        uint64   `json:"commit"`
		LogBytes      int64    `json:"logBytes"`
		SnapshotBytes int64    `json:"snapshotBytes"`
		RulesVersion  uint32   `json:"rulesVersion"`
		RulesMax      uint32   `json:"rulesMax"`
		Stopped       string   `json:"stopped,omitempty"`
		Members       []member `json:"members"`
	}{Now: s.nowMs(), Node: n.ID(), State: n.State(), Leader: ms.GetLeaderId(), Term: n.Term(), Applied: n.AppliedIndex(),
		Commit: n.CommitIndex(), LogBytes: n.LogBytes(), SnapshotBytes: n.SnapshotBytes(),
		RulesVersion: s.machine.Rules(), RulesMax: s.machine.MaxRules(), Stopped: s.stoppedReason(), Members: []member{}}
	for _, m := range ms.GetMembers() {
		contact := m.GetLastContactNanos()
		if contact > 0 {
			contact /= 1e6
		}
		v.Members = append(v.Members, member{Node: m.GetNodeId(), Raft: m.GetRaftAddress(), GRPC: m.GetGrpcAddress(), Voter: m.GetVoter(),
			Role: m.GetRole(), Health: m.GetHealth(), Error: m.GetError(), Applied: m.GetAppliedIndex(), LastContactMs: contact, RulesMax: m.GetRulesMax()})
	}
	return v, nil
}

// adminRules declares who may call each Admin RPC. The member list and a
// member's status are read by any authenticated client: they hold
// addresses and counts only, and clients need the list to follow the
// cluster. Every change to the membership needs the operator role, but for
// the two a server makes itself: Join (a new server asks to be added,
// proving itself a peer) and RemoveMember (a leaving server asks the
// leader to remove it) — each of its own node.
var adminRules = Rules{
	"Status":             authenticated,
	"Members":            authenticated,
	"Join":               peerSelf((*djinnpb.JoinRequest).GetNodeId),
	"AddMember":          operator,
	"RemoveMember":       peerSelf((*djinnpb.RemoveMemberRequest).GetNodeId),
	"Leave":              operator,
	"TransferLeadership": operator,
	"SaveSnapshot":       operator,
}

// adminRPC serves the Admin service.
type adminRPC struct {
	djinnpb.UnimplementedAdminServer
	s *Server
}

func refProto(r djinn.Ref) *djinnpb.Ref {
	return &djinnpb.Ref{Endpoint: r.Endpoint, ServiceId: r.Service[:], ObjectId: r.Object[:]}
}

// Status reports the node, the cluster and every service: the names of
// those this node serves, their references and their counts.
func (a *adminRPC) Status(ctx context.Context, r *djinnpb.StatusRequest) (*djinnpb.StatusResponse, error) {
	s := a.s
	if r.GetReadIndex() {
		index, err := s.node.ReadIndex()
		if err != nil {
			return nil, err
		}
		return &djinnpb.StatusResponse{NodeId: s.node.ID(), State: "Leader", CommitIndex: index}, nil
	}
	resp := s.nodeStatus()
	resp.Counts = map[string]int64{}
	for _, p := range s.parts {
		if p.enabled && p.serve != nil {
			resp.Services = append(resp.Services, p.name)
		}
		if p.status != nil {
			p.status(resp)
		}
	}
	members, err := s.node.Members()
	if err == nil {
		for _, m := range members {
			resp.Members = append(resp.Members, &djinnpb.Member{NodeId: m.ID, RaftAddress: m.RaftAddr, Voter: m.Voter, GrpcAddress: s.machine.Endpoint(m.ID)})
		}
	}
	return resp, nil
}

// adminHandler serves /healthz, /readyz, /metrics, /debug/pprof/ and the
// console (/ and /api/).
func (s *Server) adminHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		if why := s.stoppedReason(); why != "" {
			http.Error(w, "stopped: "+why, http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if why := s.stoppedReason(); why != "" {
			http.Error(w, "not ready: stopped: "+why, http.StatusServiceUnavailable)
			return
		}
		if !s.ready() {
			http.Error(w, "not ready: no leader, the cluster not initialised, or the leader's services still starting", http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ready\n"))
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.metrics.registry, promhttp.HandlerOpts{}))
	console.Register(mux, s.consoleSource())
	mux.HandleFunc("/debug/pprof/", s.profiler(pprof.Index))
	mux.HandleFunc("/debug/pprof/cmdline", s.profiler(pprof.Cmdline))
	mux.HandleFunc("/debug/pprof/profile", s.profiler(pprof.Profile))
	mux.HandleFunc("/debug/pprof/symbol", s.profiler(pprof.Symbol))
	mux.HandleFunc("/debug/pprof/trace", s.profiler(pprof.Trace))
	return mux
}

// profiler serves a /debug/pprof/ endpoint to an operator alone under
// TLS: a profile or trace runs as long as its caller asks (one CPU
// profile at a time), and stacks and the command line are the server's
// insides. Without TLS there is the one local principal, who reads the
// admin port as it reads /metrics.
func (s *Server) profiler(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.adminTLS != nil {
			if err := s.operatorHTTP(r); err != nil {
				http.Error(w, err.Error(), http.StatusForbidden)
				return
			}
		}
		h(w, r)
	}
}
