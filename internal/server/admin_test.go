package server_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/server"
	"github.com/djinn-go/djinn/internal/server/servertest"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// TestCloseEndsSilentAdminConnections: a connection to the admin port
// that never sends a request (a probe, a port scan) does not outlive the
// server's Close.
func TestCloseEndsSilentAdminConnections(t *testing.T) {
	t.Parallel()
	srv := servertest.Open(t, servertest.Config(t))
	conn, err := net.Dial("tcp", srv.AdminAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// A request on a connection made after it is answered only once the
	// server accepted it (connections are accepted in order): closing
	// before that would reset the silent one unaccepted, not close it.
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: servertest.Timeout}
	resp, err := hc.Get("http://" + srv.AdminAddr() + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	// Closed by the server means its end of the stream is already here:
	// a peek that does not wait reads it (0 bytes, no error) rather than
	// finding nothing to read yet (EAGAIN).
	raw, err := conn.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var n int
	var peekErr error
	if err := raw.Read(func(fd uintptr) bool {
		n, _, peekErr = syscall.Recvfrom(int(fd), make([]byte, 1), syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if n != 0 || peekErr != nil {
		t.Errorf("a silent admin connection after Close: peek gave %d bytes, %v; want its end (0 bytes, no error)", n, peekErr)
	}
}

// TestAdminHTTP: the admin port's /healthz, /readyz, /metrics and pprof
// (DESIGN.md 8).
func TestAdminHTTP(t *testing.T) {
	t.Parallel()
	cfg := servertest.Config(t)
	cfg.LookupJoin.Enabled = false // counts only the test's own lease and calls
	srv := servertest.Start(t, cfg)
	c := servertest.Dial(t, srv.Addr())
	if _, err := c.Mailbox().Register(testContext(t), time.Minute); err != nil {
		t.Fatal(err)
	}
	// No keep-alive: no idle connection outlives the test.
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: servertest.Timeout}
	base := "http://" + srv.AdminAddr()
	tests := []struct {
		method, path string
		code         int
		contains     []string
	}{
		{"GET", "/healthz", http.StatusOK, []string{"ok"}},
		{"GET", "/readyz", http.StatusOK, []string{"ready"}},
		{"GET", "/metrics", http.StatusOK, []string{
			"djinn_leases 1", `grpc_server_handled_total{grpc_code="OK",grpc_method="Register",grpc_service="djinn.v1.EventMailbox",grpc_type="unary"} 1`,
			`grpc_server_handled_total{grpc_code="OK",grpc_method="Register",grpc_service="djinn.v1.LookupService",grpc_type="unary"} 0`,
			"djinn_is_leader 1", "djinn_mailbox_registrations 1", "grpc_server_handling_seconds_bucket", "go_goroutines",
			// What djinn bench's leases workload reads of the server's memory.
			"go_gc_heap_live_bytes", "djinn_process_resident_memory_peak_bytes", "go_gc_heap_allocs_objects_total",
			"go_gc_heap_allocs_bytes_total", "go_cpu_classes_gc_total_cpu_seconds_total", "go_cpu_classes_total_cpu_seconds_total",
		}},
		{"GET", "/debug/pprof/", http.StatusOK, []string{"goroutine"}},
		{"GET", "/debug/pprof/cmdline", http.StatusOK, nil},
		{"POST", "/healthz", http.StatusMethodNotAllowed, nil},
		{"GET", "/nothing-here", http.StatusNotFound, nil},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			req, err := http.NewRequestWithContext(testContext(t), tt.method, base+tt.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tt.code {
				t.Errorf("status %d, want %d: %s", resp.StatusCode, tt.code, body)
			}
			for _, s := range tt.contains {
				if !strings.Contains(string(body), s) {
					t.Errorf("body lacks %q", s)
				}
			}
		})
	}
}

// TestAdminGRPC: the Admin service's status, gRPC health, and Describe.
func TestAdminGRPC(t *testing.T) {
	t.Parallel()
	srv := servertest.Start(t, servertest.Config(t))
	c := servertest.Dial(t, srv.Addr())

	servertest.Eventually(t, "gRPC health to report SERVING", func() bool {
		ctx, cancel := context.WithTimeout(t.Context(), servertest.Timeout)
		defer cancel()
		resp, err := healthpb.NewHealthClient(c.ClientConn()).Check(ctx, &healthpb.HealthCheckRequest{})
		return err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING
	})

	st, err := servertest.Status(djinnpb.NewAdminClient(c.ClientConn()))
	if err != nil {
		t.Fatal(err)
	}
	if st.GetState() != "Leader" || st.GetNodeId() != srv.NodeID() || st.GetLeaderAddress() != srv.Addr() || len(st.GetMembers()) != 1 {
		t.Errorf("status: state %s node %s leader at %s, %d members; want Leader %s at %s, 1 member",
			st.GetState(), st.GetNodeId(), st.GetLeaderAddress(), len(st.GetMembers()), srv.NodeID(), srv.Addr())
	}
	if len(st.GetServiceId()) != 16 || st.GetMailbox().GetEndpoint() != srv.Addr() || st.GetLandlord().GetEndpoint() != srv.Addr() {
		t.Errorf("status: service id %x, mailbox %v, landlord %v", st.GetServiceId(), st.GetMailbox(), st.GetLandlord())
	}

	d := srv.Describe()
	names := map[string]bool{}
	for _, s := range d.Services {
		names[s.Name] = true
		if s.Ref.Endpoint != srv.Addr() || s.Ref.Service.IsZero() {
			t.Errorf("service %s: reference %v", s.Name, s.Ref)
		}
		if s.Name == "mailbox" && s.Ref.Object != server.MailboxID {
			t.Errorf("mailbox reference %v, want object %s", s.Ref, server.MailboxID)
		}
	}
	if d.NodeID != srv.NodeID() || !names["landlord"] || !names["mailbox"] {
		t.Errorf("describe: %+v", d)
	}

	t.Run("a server with the mailbox off does not serve it", func(t *testing.T) {
		cfg := servertest.Config(t)
		cfg.Mailbox.Enabled = false
		off := servertest.Start(t, cfg)
		for _, s := range off.Describe().Services {
			if s.Name == "mailbox" {
				t.Errorf("describe lists the mailbox: %v", s.Ref)
			}
		}
		c := servertest.Dial(t, off.Addr())
		if _, err := c.Mailbox().Register(testContext(t), time.Minute); !errors.Is(err, djinn.ErrUnsupported) {
			t.Errorf("register at a server with the mailbox off: %v, want unsupported", err)
		}
	})
}
