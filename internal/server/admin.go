package server

import (
	"context"
	"net/http"
	"net/http/pprof"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/lease"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// adminRPC serves the Admin service.
type adminRPC struct {
	djinnpb.UnimplementedAdminServer
	s *Server
}

func refProto(r djinn.Ref) *djinnpb.Ref {
	return &djinnpb.Ref{Endpoint: r.Endpoint, ServiceId: r.Service[:], ObjectId: r.Object[:]}
}

func (a *adminRPC) Status(ctx context.Context, _ *djinnpb.StatusRequest) (*djinnpb.StatusResponse, error) {
	s := a.s
	regs, events := s.states.mailbox.Len()
	sets, clientLeases := s.states.renewal.Len()
	txns, activeTxns := s.states.txn.Len()
	lockSets, lockOwners := s.states.lock.Len()
	resp := s.nodeStatus()
	resp.Services = []string{"landlord", "admin"}
	resp.Counts = map[string]int64{
		"leases":                int64(s.machine.Leases.Len()),
		"mailbox_registrations": int64(regs),
		"mailbox_stored_events": int64(events),
		"renewal_sets":          int64(sets),
		"renewal_leases":        int64(clientLeases),
		"transactions":          int64(txns),
		"transactions_active":   int64(activeTxns),
		"lock_sets":             int64(lockSets),
		"lock_owners":           int64(lockOwners),
	}
	resp.Landlord = refProto(s.ref(lease.LandlordID)())
	if s.cfg.Mailbox.Enabled {
		resp.Services = append(resp.Services, "mailbox")
		resp.Mailbox = refProto(s.ref(MailboxID)())
	}
	if s.cfg.Txn.Enabled {
		resp.Services = append(resp.Services, "txn")
		resp.Txn = refProto(s.ref(TxnID)())
	}
	if s.cfg.Lookup.Enabled {
		resp.Services = append(resp.Services, "lookup")
		resp.Lookup = refProto(s.ref(LookupID)())
		items, watches := s.states.lookup.Len()
		resp.Counts["lookup_items"], resp.Counts["lookup_watches"] = int64(items), int64(watches)
	}
	if s.cfg.LDS.Enabled {
		resp.Services = append(resp.Services, "lds")
		resp.Lds = refProto(s.ref(LDSID)())
		regs, registrars := s.states.lds.Len()
		resp.Counts["lds_registrations"], resp.Counts["lds_registrars"] = int64(regs), int64(registrars)
	}
	if s.cfg.Lock.Enabled {
		resp.Services = append(resp.Services, "lock")
		resp.Lock = refProto(s.ref(LockID)())
	}
	if s.cfg.Renewal.Enabled {
		resp.Services = append(resp.Services, "renewal")
		resp.Renewal = refProto(s.ref(RenewalID)())
	}
	members, err := s.node.Members()
	if err == nil {
		for _, m := range members {
			resp.Members = append(resp.Members, &djinnpb.Member{NodeId: m.ID, RaftAddress: m.RaftAddr, Voter: m.Voter, GrpcAddress: s.machine.Endpoint(m.ID)})
		}
	}
	return resp, nil
}

// adminHandler serves /healthz, /readyz, /metrics and /debug/pprof/.
func (s *Server) adminHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !s.ready() {
			http.Error(w, "not ready: no leader or cluster not initialised", http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ready\n"))
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.metrics.registry, promhttp.HandlerOpts{}))
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}
