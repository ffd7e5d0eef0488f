package client

import (
	"context"
	"net"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/secret"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// witness is a server of a cluster's: it answers Members with its
// cluster's member list, and Health, and records whether each call it
// got carried the join secret.
type witness struct {
	djinnpb.UnimplementedAdminServer
	addr string
	svc  djinn.ID

	mu      sync.Mutex
	members []string // guarded by mu
	leader  string   // guarded by mu: when set, Health is refused naming it the leader
	calls   int      // guarded by mu
	secrets int      // guarded by mu: the calls that carried the secret
	checks  int      // guarded by mu: the Health calls (only tests make them)
	checkS  int      // guarded by mu: the Health calls that carried the secret

	// holdRefreshes: the Members calls that come over the connection of
	// the first one after it are held until released.
	holding  bool          // guarded by mu
	holdFrom string        // guarded by mu: the client address of the held connection
	held     chan struct{} // closed once the first held call arrived
	released chan struct{} // closed to let the held calls go on
}

// startWitness serves a witness of the cluster svc on ln.
func startWitness(t *testing.T, ln net.Listener, svc djinn.ID, members ...string) *witness {
	t.Helper()
	w := &witness{addr: ln.Addr().String(), svc: svc, members: members}
	w.addr = serveOn(t, ln, func(s *grpc.Server) {
		djinnpb.RegisterAdminServer(s, w)
		healthpb.RegisterHealthServer(s, health.NewServer())
	}, grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		w.record(ctx, info.FullMethod)
		w.mu.Lock()
		leader := w.leader
		w.mu.Unlock()
		if leader != "" && info.FullMethod == healthpb.Health_Check_FullMethodName {
			_ = grpc.SetTrailer(ctx, metadata.Pairs(leaderTrailer, leader))
			return nil, status.Error(codes.Unavailable, "not the leader")
		}
		return h(ctx, req)
	}), grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		w.record(ss.Context(), info.FullMethod)
		return h(srv, ss)
	}))
	return w
}

func (w *witness) record(ctx context.Context, method string) {
	md, _ := metadata.FromIncomingContext(ctx)
	got := md.Get(secret.Header)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.calls++
	if len(got) > 0 {
		w.secrets++
	}
	if method == healthpb.Health_Check_FullMethodName {
		w.checks++
		if len(got) > 0 {
			w.checkS++
		}
	}
}

// checked returns the Health calls w got (check's), and those of them
// that carried the secret: unlike seen, no refresh of a cluster's member
// list made in the background is among them.
func (w *witness) checked() (calls, secrets int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.checks, w.checkS
}

// seen returns the calls w got, and those of them that carried the secret.
func (w *witness) seen() (calls, secrets int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.calls, w.secrets
}

func (w *witness) setMembers(members ...string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.members = members
}

// holdRefreshes holds the next Members call w gets, and every later one
// over the same connection (a followed cluster's refreshes, retried when
// one times out), until release is called; held is closed once the first
// is held. Calls over other connections are answered.
func (w *witness) holdRefreshes() (held <-chan struct{}, release func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.holding, w.held, w.released = true, make(chan struct{}), make(chan struct{})
	var once sync.Once
	return w.held, func() { once.Do(func() { close(w.released) }) }
}

func (w *witness) Members(ctx context.Context, _ *djinnpb.MembersRequest) (*djinnpb.MembersResponse, error) {
	from := ""
	if pr, ok := peer.FromContext(ctx); ok {
		from = pr.Addr.String()
	}
	w.mu.Lock()
	if w.holding && w.holdFrom == "" {
		w.holdFrom = from
		close(w.held)
	}
	hold, released := w.holding && w.holdFrom == from, w.released
	w.mu.Unlock()
	if hold {
		select {
		case <-released:
		case <-ctx.Done():
			return nil, status.FromContextError(ctx.Err()).Err()
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	resp := &djinnpb.MembersResponse{ServiceId: w.svc[:]}
	for _, m := range w.members {
		resp.Members = append(resp.Members, &djinnpb.Member{GrpcAddress: m})
	}
	return resp, nil
}

// check makes one call on cc.
func check(t *testing.T, cc *grpc.ClientConn) {
	t.Helper()
	if _, err := healthpb.NewHealthClient(cc).Check(t.Context(), &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}
}

// TestJoinSecretGoesToTheDialledClusterAlone: a join secret (the operator
// role; README Security, "The operator role") goes with the calls to the
// cluster the client dialled — its endpoint, and a member it learnt after
// it started — and with no call to an endpoint outside it: a listener's,
// or a member of another cluster that a reference names (the calls that
// learn that cluster, and those to it once it is followed). Before, an
// explicit secret went with every call of the pool.
func TestJoinSecretGoesToTheDialledClusterAlone(t *testing.T) {
	t.Parallel()
	for _, row := range []struct {
		name string
		opt  Option
	}{
		{"WithJoinSecret", WithJoinSecret("s3cret")},
		{"WithLocalJoinSecret", WithLocalJoinSecret("s3cret")}, // every endpoint here is on loopback
	} {
		t.Run(row.name, func(t *testing.T) {
			t.Parallel()
			svc := djinn.NewID()
			lnA, lnB, lnOut := listen(t), listen(t), listen(t)
			a := startWitness(t, lnA, svc, lnA.Addr().String())
			b := startWitness(t, lnB, svc, lnA.Addr().String(), lnB.Addr().String())
			out := startWitness(t, lnOut, djinn.NewID(), lnOut.Addr().String())

			c, err := Dial(t.Context(), a.addr, row.opt)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			check(t, c.ClientConn())
			cc, err := c.Conn(a.addr)
			if err != nil {
				t.Fatal(err)
			}
			check(t, cc)

			// Outside the cluster: a listener's endpoint, then a
			// reference to another cluster's service.
			cc, err = c.Conn(out.addr)
			if err != nil {
				t.Fatal(err)
			}
			check(t, cc)
			ref := djinn.Ref{Endpoint: out.addr, Service: out.svc, Object: djinn.NewID()}
			if err := c.Learn(t.Context(), ref); err != nil {
				t.Fatal(err)
			}
			if !c.Pool().Follows(out.svc) {
				t.Fatal("the other cluster was not learnt")
			}
			cc, err = c.ConnFor(ref)
			if err != nil {
				t.Fatal(err)
			}
			check(t, cc)

			// A member the dialled cluster's list names after the start.
			a.setMembers(a.addr, b.addr)
			c.cluster.refresh(t.Context())
			cc, err = c.Conn(b.addr)
			if err != nil {
				t.Fatal(err)
			}
			check(t, cc)

			for _, w := range []struct {
				name string
				w    *witness
				want bool
			}{{"the dialled endpoint", a, true}, {"a member learnt later", b, true}, {"an endpoint outside the cluster", out, false}} {
				calls, secrets := w.w.seen()
				if calls == 0 {
					t.Fatalf("%s got no call", w.name)
				}
				if w.want && secrets == 0 {
					t.Errorf("%s: no call of %d carried the secret", w.name, calls)
				}
				if !w.want && secrets > 0 {
					t.Errorf("%s: %d calls of %d carried the secret", w.name, secrets, calls)
				}
			}
		})
	}
}

// TestJoinSecretFollowsALeaderHint: a member of the dialled cluster that
// names another endpoint the leader (one not yet in the member list the
// client holds) is believed, and the call it sends there carries the
// secret; an endpoint outside the cluster that names a leader gets no
// secret to it, the leader it names neither.
func TestJoinSecretFollowsALeaderHint(t *testing.T) {
	t.Parallel()
	svc := djinn.NewID()
	lnA := listen(t)
	a := startWitness(t, lnA, svc, lnA.Addr().String())
	leader := startWitness(t, listen(t), svc)
	out := startWitness(t, listen(t), djinn.NewID())
	lured := startWitness(t, listen(t), djinn.NewID())
	c, err := Dial(t.Context(), a.addr, WithJoinSecret("s3cret"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	a.mu.Lock()
	a.leader = leader.addr
	a.mu.Unlock()
	out.mu.Lock()
	out.leader = lured.addr
	out.mu.Unlock()
	for _, ep := range []string{a.addr, out.addr} {
		cc, err := c.Conn(ep)
		if err != nil {
			t.Fatal(err)
		}
		check(t, cc) // answered by the leader named
	}
	for _, w := range []struct {
		name string
		w    *witness
		want bool
	}{{"the leader a member names", leader, true}, {"an endpoint outside the cluster", out, false}, {"the leader it names", lured, false}} {
		calls, secrets := w.w.seen()
		if calls == 0 {
			t.Fatalf("%s got no call", w.name)
		}
		if presented := secrets > 0; presented != w.want {
			t.Errorf("%s: %d of %d calls carried the secret, want the secret presented %v", w.name, secrets, calls, w.want)
		}
	}
}

// TestJoinSecretToTheFollowedClusterLearntEarly: a reference to the
// service of the cluster a pool follows (Follow), met before that
// cluster's member list came, reaches that cluster, and its calls carry
// the join secret. Before, learning the reference made a second
// connection to the cluster, learnt and so without the secret, and the
// reference's calls went there for good. Learnt at the member followed,
// whose answer is as good as the followed cluster's own refresh, it
// reaches the followed cluster at once; learnt at another member (one the
// followed cluster does not know yet), once that cluster's member list
// comes; so does a reference with no service id to that member. A
// reference to another cluster learnt meanwhile gets no secret,
// nor does one whose member list names the followed cluster's member as
// its own: the endpoint it was learnt at is none of the followed
// cluster's, so it is not believed.
func TestJoinSecretToTheFollowedClusterLearntEarly(t *testing.T) {
	t.Parallel()
	for _, row := range []struct {
		name string
		atB  bool // the reference names the member the followed cluster does not know yet
	}{
		{"at the member followed", false},
		{"at another member", true},
	} {
		t.Run(row.name, func(t *testing.T) {
			t.Parallel()
			svc := djinn.NewID()
			lnA, lnB, lnOut, lnLure := listen(t), listen(t), listen(t), listen(t)
			members := []string{lnA.Addr().String(), lnB.Addr().String()}
			a := startWitness(t, lnA, svc, members...)
			b := startWitness(t, lnB, svc, members...)
			out := startWitness(t, lnOut, djinn.NewID(), lnOut.Addr().String())
			lure := startWitness(t, lnLure, djinn.NewID(), a.addr)

			held, release := a.holdRefreshes()
			defer release()
			p := NewPool(WithJoinSecret("s3cret"), WithoutSession())
			defer p.Close()
			if err := p.Follow(a.addr); err != nil {
				t.Fatal(err)
			}
			<-held // the followed cluster's member list is held back

			// through learns ref and makes one call through it; the
			// witnesses ws may answer it. It returns whether the call
			// carried the secret.
			through := func(ref djinn.Ref, ws ...*witness) bool {
				t.Helper()
				if err := p.Learn(t.Context(), ref); err != nil {
					t.Fatal(err)
				}
				var calls, secrets int
				for _, w := range ws {
					c, s := w.checked()
					calls, secrets = calls-c, secrets-s
				}
				cc, err := p.ConnFor(ref)
				if err != nil {
					t.Fatal(err)
				}
				check(t, cc)
				for _, w := range ws {
					c, s := w.checked()
					calls, secrets = calls+c, secrets+s
				}
				if calls != 1 {
					t.Fatalf("a call through %v: %d calls at the witnesses, want 1", ref, calls)
				}
				return secrets == 1
			}
			own := djinn.Ref{Endpoint: a.addr, Service: svc, Object: djinn.NewID()}
			if row.atB {
				own.Endpoint = b.addr
				if err := p.Learn(t.Context(), own); err != nil {
					t.Fatal(err)
				}
				release()
				p.mu.Lock()
				followed := p.told[0]
				p.mu.Unlock()
				followed.refresh(t.Context()) // the member list comes
			}
			if !through(own, a, b) {
				t.Errorf("a reference to the followed cluster's service learnt %s: its call carried no secret", row.name)
			}
			if !through(djinn.Ref{Endpoint: b.addr, Object: djinn.NewID()}, a, b) {
				t.Errorf("a reference with no service id to the followed cluster's member, learnt %s: its call carried no secret", row.name)
			}
			if through(djinn.Ref{Endpoint: out.addr, Service: out.svc, Object: djinn.NewID()}, out) {
				t.Error("a reference to another cluster's service: its call carried the secret")
			}
			if through(djinn.Ref{Endpoint: lure.addr, Service: lure.svc, Object: djinn.NewID()}, a, lure) {
				t.Error("a reference to a cluster whose member list names the followed cluster's member: its call carried the secret")
			}
			if !p.Follows(out.svc) || !p.Follows(lure.svc) {
				t.Error("the other clusters were not learnt")
			}
		})
	}
}

// TestJoinSecretScope: one row per audience the secret is kept from.
func TestJoinSecretScope(t *testing.T) {
	t.Parallel()
	ln := listen(t)
	w := startWitness(t, ln, djinn.NewID(), ln.Addr().String())
	// The endpoint dialled is on loopback, but the connection names
	// another host (as one to another machine does).
	elsewhere := WithDialOptions(grpc.WithAuthority("djinn.example:4161"))
	tests := []struct {
		name      string
		dial      bool // Dial the witness; otherwise a pool's Conn to it
		opts      []Option
		presented bool
	}{
		{"local secret, loopback endpoint", true, []Option{WithLocalJoinSecret("s3cret")}, true},
		{"local secret, another host", true, []Option{WithLocalJoinSecret("s3cret"), elsewhere}, false},
		{"secret, another host of the dialled cluster", true, []Option{WithJoinSecret("s3cret"), elsewhere}, true},
		{"secret, a pool told of no cluster", false, []Option{WithJoinSecret("s3cret")}, false},
		{"local secret, a pool told of no cluster", false, []Option{WithLocalJoinSecret("s3cret")}, false},
		{"secret to a peer the program names", false, []Option{WithJoinSecretTo("s3cret", func(ep string) bool { return ep == w.addr })}, true},
		{"secret to peers, an endpoint not one", false, []Option{WithJoinSecretTo("s3cret", func(string) bool { return false })}, false},
	}
	for _, tt := range tests {
		before, secretsBefore := w.seen()
		var cc *grpc.ClientConn
		opts := append(tt.opts, WithoutSession())
		if tt.dial {
			c, err := Dial(t.Context(), w.addr, opts...)
			if err != nil {
				t.Fatalf("%s: %v", tt.name, err)
			}
			cc = c.ClientConn()
			defer c.Close()
		} else {
			p := NewPool(opts...)
			defer p.Close()
			var err error
			if cc, err = p.Conn(w.addr); err != nil {
				t.Fatal(err)
			}
		}
		check(t, cc)
		calls, secrets := w.seen()
		if calls == before {
			t.Fatalf("%s: no call", tt.name)
		}
		if presented := secrets > secretsBefore; presented != tt.presented {
			t.Errorf("%s: %d of %d calls carried the secret, want the secret presented %v", tt.name, secrets-secretsBefore, calls-before, tt.presented)
		}
	}
}

// TestLoopbackAudience: one row per form of a call's audience.
func TestLoopbackAudience(t *testing.T) {
	tests := []struct {
		uri  string
		want bool
	}{
		{"https://127.0.0.1:4161/djinn.v1.Admin", true},
		{"https://127.9.9.9:4161/djinn.v1.Admin", true},
		{"https://localhost:4161/djinn.v1.Admin", true},
		{"https://[::1]:4161/djinn.v1.Admin", true},
		{"https://localhost/djinn.v1.Admin", true}, // the default port left out
		{"https://127.0.0.1:4161,127.0.0.1:4171/djinn.v1.Admin", true},
		{"https://127.0.0.1:4161,10.0.0.7:4161/djinn.v1.Admin", false},
		{"https://10.0.0.7:4161/djinn.v1.EventListener", false},
		{"https://djinn.example:4161/djinn.v1.Landlord", false},
		{"https://localhost.example:4161/djinn.v1.Landlord", false},
		{"", false},
	}
	for _, tt := range tests {
		if got := loopbackAudience([]string{tt.uri}); got != tt.want {
			t.Errorf("loopbackAudience(%q) = %v, want %v", tt.uri, got, tt.want)
		}
	}
	if loopbackAudience(nil) {
		t.Error("no audience taken for loopback")
	}
}
