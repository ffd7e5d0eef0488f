package server_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/internal/grpcerr"
	"github.com/djinn-go/djinn/internal/server"
	"github.com/djinn-go/djinn/internal/server/servertest"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// The authorization matrix (DESIGN.md 7; issue 17): a real server under
// mutual TLS, every RPC of every service it registered — the list comes
// from the server, so an RPC without a row fails the test — called as
// each of five identities, each cell's outcome checked against the rule
// the RPC was registered under:
//
//	rule           owner    other              operator   no cert  other CA
//	public         allowed  allowed            allowed    refused  refused
//	authenticated  allowed  allowed            allowed    refused  refused
//	owner          allowed  not found          not found  refused  refused
//	capability     allowed  not found (forged) allowed    refused  refused
//	operator, peer denied   denied             allowed    refused  refused
//
// "owner" created the resources a call names; "other" is another
// principal, which for a capability presents a forged one (a random value
// in its place); "operator" is a principal [security] operators names. A
// refused cell that the server answered otherwise — with success, or an
// error from past authorization — is an unauthorized success; the test
// wants none.
//
// Every unary RPC is driven twice: on its own, and carried in a session
// (djinn.v1.Session/Open, one stream carrying calls by id), where the call
// must meet its own rule, not the session's. Session/Open itself has a row
// of its own.

// identity is a matrix column.
type identity int

const (
	asOwner identity = iota
	asOther
	asOperator
	asNoCert
	asOtherCA
	identities
)

func (i identity) String() string {
	return [...]string{"owner", "other", "operator", "no certificate", "another CA's certificate"}[i]
}

// outcome is what a cell wants.
type outcome int

const (
	allowed     outcome = iota // authorization let the call through
	notFound                   // the resource does not exist for the caller
	denied                     // PermissionDenied: a role is missing
	refused                    // the TLS handshake refused the caller
	wrongAnswer                // an answer no rule gives: a session that did not carry the call, a list without the own
	leaked                     // the answer holds another principal's resource
)

func (o outcome) String() string {
	return [...]string{"allowed", "not found", "permission denied", "refused by TLS", "a wrong answer", "leaked another principal's resource"}[o]
}

// want returns the outcome the rule of access wants for identity id.
func want(access server.Access, id identity) outcome {
	switch {
	case id == asNoCert || id == asOtherCA:
		return refused
	case access == server.Public || access == server.Authenticated:
		return allowed
	case access == server.Owner:
		if id == asOwner {
			return allowed
		}
		return notFound
	case access == server.Capability:
		if id == asOther {
			return notFound
		}
		return allowed
	}
	if id == asOperator { // Operator, Peer
		return allowed
	}
	return denied
}

// notFoundKinds answer for a resource that does not exist for the caller.
var notFoundKinds = []djinn.Kind{djinn.NoSuchObject, djinn.UnknownLease, djinn.UnknownTransaction}

// got classifies a call's error as the outcome it shows, for a call of
// an RPC under a rule of access that wanted w: a refusal, or allowed — the
// call got past authorization (it succeeded, or failed for another
// reason). For an RPC whose resource is named by the call (owner and
// capability rules) not found is a refusal even where the call wanted
// through: the owner's call must find what it names.
func got(access server.Access, w outcome, err error) outcome {
	if err == nil {
		return allowed
	}
	if errors.Is(err, errWrongAnswer) {
		return wrongAnswer
	}
	if errors.Is(err, errLeaked) {
		return leaked
	}
	k := djinn.KindOf(err)
	switch {
	case k == djinn.Unavailable && w == refused:
		return refused
	case k == djinn.PermissionDenied:
		return denied
	case slices.Contains(notFoundKinds, k) && (w == notFound || access == server.Owner || access == server.Capability):
		return notFound
	}
	return allowed
}

// call is one RPC of a row, made on conn. real is false for the other
// principal's call of a capability RPC: it presents a forged capability.
type call func(ctx context.Context, conn grpc.ClientConnInterface, r *resources, real bool) error

// matrixEnv is the server and a connection as each identity, whose
// unary calls go on their own.
type matrixEnv struct {
	srv   *server.Server
	conns [identities]*grpc.ClientConn
}

// path is how a cell's unary calls reach the server.
type path struct {
	name string
	conn func(*grpc.ClientConn) grpc.ClientConnInterface
}

var paths = []path{
	{"", func(c *grpc.ClientConn) grpc.ClientConnInterface { return c }},
	{" in a session", func(c *grpc.ClientConn) grpc.ClientConnInterface { return sessionConn{c} }},
}

func newMatrixEnv(t *testing.T) *matrixEnv {
	t.Helper()
	pki, other := servertest.NewPKI(t), servertest.NewPKI(t)
	cfg := servertest.Config(t)
	cfg.TLS = server.TLSConfig{Cert: pki.ServerCert, Key: pki.ServerKey, CA: pki.CA, ClientAuth: true}
	cfg.Security.Operators = []string{"cn:ops"}
	e := &matrixEnv{srv: servertest.Start(t, cfg)}
	tlsAs := map[identity]*tls.Config{
		asOwner:    pki.TLSFor(pki.NewClient(t, "alice")),
		asOther:    pki.TLSFor(pki.NewClient(t, "bob")),
		asOperator: pki.TLSFor(pki.NewClient(t, "ops")),
		asNoCert:   {RootCAs: pki.Roots, MinVersion: tls.VersionTLS12},
		asOtherCA:  {Certificates: []tls.Certificate{other.Client}, RootCAs: pki.Roots, MinVersion: tls.VersionTLS12},
	}
	for id := range identities {
		e.conns[id] = servertest.Conn(t, e.srv.Addr(), client.WithTLS(tlsAs[id]), client.WithoutSession())
	}
	return e
}

// matrixTimeout bounds one cell's call.
const matrixTimeout = 10 * time.Second

// TestAuthorizationMatrix drives every RPC the server serves as every
// identity and checks each cell against the RPC's rule. It reports the
// figure the README quotes: RPCs × identities, and unauthorized
// successes (which must be 0).
func TestAuthorizationMatrix(t *testing.T) {
	t.Parallel()
	run := &matrixRun{t: t, e: newMatrixEnv(t)}
	for id := range identities {
		run.tally[id] = map[outcome]int{}
	}
	served := server.AccessOf(run.e.srv)
	methods := slices.Sorted(maps.Keys(served))
	rows, hooked := matrixRows(), hookRows()
	for m := range rows {
		if _, ok := served[m]; !ok {
			t.Errorf("matrix row for %s, which the server does not serve: remove it", m)
		}
	}
	inSession := server.SessionMethods(run.e.srv)
	for _, m := range methods {
		vs := hooked[m]
		if c, ok := rows[m]; ok {
			vs = append(vs, variant{as: served[m], call: c})
		}
		switch {
		case len(vs) == 0:
			t.Errorf("no matrix row for %s (rule: %v): add one to matrixRows", m, served[m])
			continue
		case len(hooked[m]) > 0 && served[m] != server.Owner:
			t.Errorf("%s has hook rows but rule %v: a hook row is for an owner rule whose hook decides by the call's arguments", m, served[m])
		}
		for _, p := range paths {
			if p.name != "" {
				if !inSession[m] {
					continue
				}
				run.carried++
			}
			for _, v := range vs {
				run.row(m, p, v)
			}
		}
	}
	t.Logf("authorization matrix: %d RPCs (%d of them also in a session) × %d identities = %d cells, %d unauthorized successes",
		len(methods), run.carried, int(identities), run.cells, run.unauthorized)
	for id := range identities {
		t.Logf("  as %s: %v", id, run.tally[id])
	}
	if run.unauthorized != 0 {
		t.Errorf("%d unauthorized successes, want 0", run.unauthorized)
	}
	checkREADMEFigure(t, len(methods), run.carried, run.cells)
}

// variant is a row of an RPC: its call, and the rule whose outcomes it
// wants — the RPC's own, or for an owner rule whose hook decides by the
// call's arguments, the rule the hook applies to these.
type variant struct {
	name string
	as   server.Access
	call call
}

// matrixRun is the matrix's counts as it runs.
type matrixRun struct {
	t                            *testing.T
	e                            *matrixEnv
	cells, carried, unauthorized int
	tally                        [identities]map[outcome]int
}

// row runs one row of method m by path p as every identity.
func (run *matrixRun) row(m string, p path, v variant) {
	r := &resources{t: run.t, owner: run.e.conns[asOwner], srv: run.e.srv}
	// The owner calls last: its call may end what the others' name.
	for _, id := range []identity{asNoCert, asOtherCA, asOther, asOperator, asOwner} {
		w := want(v.as, id)
		ctx, cancel := context.WithTimeout(context.Background(), matrixTimeout)
		r.caller = id
		err := v.call(ctx, p.conn(run.e.conns[id]), r, id != asOther)
		cancel()
		g := got(v.as, w, err)
		run.cells++
		run.tally[id][g]++
		if g != w {
			if w != allowed || g == leaked {
				run.unauthorized++
			}
			run.t.Errorf("%s%s%s as %s (rule %v): %v (%v), want %v", m, v.name, p.name, id, v.as, g, err, w)
		}
	}
}

// readmeFigure is the matrix's figure as README.md's Security section
// quotes it.
var readmeFigure = regexp.MustCompile(`(\d+) RPCs, the (\d+) unary ones both on their own and carried in a session, (\d+) cells`)

// checkREADMEFigure fails the test when the README quotes another figure
// than the matrix's.
func checkREADMEFigure(t *testing.T, rpcs, carried, cells int) {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatalf("read the README: %v", err)
	}
	m := readmeFigure.FindStringSubmatch(strings.Join(strings.Fields(string(b)), " "))
	if m == nil {
		t.Fatalf("README.md's Security section quotes no matrix figure matching %q", readmeFigure)
	}
	if want := fmt.Sprintf("%d RPCs, the %d unary ones both on their own and carried in a session, %d cells", rpcs, carried, cells); m[0] != want {
		t.Errorf("README.md quotes %q, the matrix drove %q: update the README's Security section", m[0], want)
	}
}

// firstError turns a batch's per-element errors, which answer a call
// that itself succeeded, into the call's error.
func firstError[E interface{ GetError() *djinnpb.Error }](errs []E) error {
	for _, e := range errs {
		if pe := e.GetError(); pe != nil {
			return grpcerr.FromProto(pe)
		}
	}
	return nil
}

// recvFirst receives a stream's first message: its error is the call's.
func recvFirst[T any](s interface{ Recv() (T, error) }) (T, error) {
	m, err := s.Recv()
	if errors.Is(err, io.EOF) {
		err = nil
	}
	return m, err
}

// named wraps err with what a call did, for the test's messages.
func named(what string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", what, err)
}

// errWrongAnswer is an answer no rule gives.
var errWrongAnswer = errors.New("a wrong answer")

// errLeaked is an answer that holds what is not the caller's.
var errLeaked = errors.New("the answer holds another principal's resource")

// sessionConn makes each unary call in a session stream of its own
// (djinn.v1.Session/Open), so that every cell of the session path is
// certainly carried by one: the client's own session may send a call on
// its own. Streams go on the connection as they are.
type sessionConn struct{ *grpc.ClientConn }

func (c sessionConn) Invoke(ctx context.Context, method string, args, reply any, _ ...grpc.CallOption) error {
	req, err := proto.Marshal(args.(proto.Message))
	if err != nil {
		return err
	}
	call := &djinnpb.SessionCall{Id: 1, Method: method, Request: req}
	if d, ok := ctx.Deadline(); ok {
		call.TimeoutNanos = int64(time.Until(d))
	}
	md, _ := metadata.FromOutgoingContext(ctx)
	for k, vs := range md {
		for _, v := range vs {
			call.Metadata = append(call.Metadata, &djinnpb.MetadataEntry{Key: k, Value: []byte(v)})
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s, err := djinnpb.NewSessionClient(c.ClientConn).Open(ctx)
	if err == nil {
		err = s.Send(&djinnpb.SessionRequest{Calls: []*djinnpb.SessionCall{call}})
	}
	for err == nil {
		var resp *djinnpb.SessionResponse
		if resp, err = s.Recv(); err != nil {
			break
		}
		for _, r := range resp.GetReplies() {
			if r.GetId() == call.GetId() {
				return sessionAnswer(r, reply)
			}
		}
	}
	return err
}

// sessionAnswer is a session's reply as a unary call's answer.
func sessionAnswer(r *djinnpb.SessionReply, reply any) error {
	st := r.GetStatus()
	if st == nil {
		return proto.Unmarshal(r.GetResponse(), reply.(proto.Message))
	}
	if codes.Code(st.GetCode()) == codes.Unimplemented {
		return fmt.Errorf("%w: the session did not carry the call: %s", errWrongAnswer, st.GetMessage())
	}
	return grpcerr.FromStatus(status.ErrorProto(&spb.Status{Code: st.GetCode(), Message: st.GetMessage(), Details: st.GetDetails()}))
}
