package server_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/discovery"
	"github.com/djinn-go/djinn/internal/server"
	"github.com/djinn-go/djinn/internal/server/servertest"
	"github.com/djinn-go/djinn/internal/testproxy"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

func ldsContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 2*servertest.Timeout)
	t.Cleanup(cancel)
	return ctx
}

// ldsListener is a registration's listener: it decodes each discovery
// event and checks that the sequence numbers go up by one (LD.3.2).
type ldsListener struct {
	t      *testing.T
	lis    *client.Listener
	events chan *client.RemoteDiscoveryEvent
	seq    int64
}

func listenLDS(t *testing.T, ctx context.Context) *ldsListener {
	t.Helper()
	l := &ldsListener{t: t, events: make(chan *client.RemoteDiscoveryEvent, 64)}
	lis, err := client.Listen(ctx, "127.0.0.1:0", func(_ context.Context, ev *client.RemoteEvent) error {
		de, err := client.DiscoveryEventFrom(ev)
		if err != nil {
			t.Errorf("listener got a bad event: %v", err)
			return err
		}
		l.events <- de
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lis.Close() })
	l.lis = lis
	return l
}

// expect waits for the next event: discovered (or discarded) ids, in any
// order.
func (l *ldsListener) expect(discarded bool, ids ...djinn.ID) *client.RemoteDiscoveryEvent {
	l.t.Helper()
	select {
	case ev := <-l.events:
		var got []djinn.ID
		for _, r := range ev.Registrars {
			got = append(got, r.ServiceID)
		}
		sortIDs(got)
		sortIDs(ids)
		if ev.Discarded != discarded || !slices.Equal(got, ids) {
			l.t.Fatalf("event %d: discarded %v %v, want discarded %v %v", ev.Seq, ev.Discarded, got, discarded, ids)
		}
		if ev.Seq != l.seq+1 {
			l.t.Fatalf("event sequence number %d after %d (LD.3.2)", ev.Seq, l.seq)
		}
		l.seq = ev.Seq
		return ev
	case <-time.After(servertest.Timeout):
		l.t.Fatalf("no event within %v; want discarded %v %v", servertest.Timeout, discarded, ids)
		return nil
	}
}

func sortIDs(ids []djinn.ID) {
	slices.SortFunc(ids, func(a, b djinn.ID) int { return bytes.Compare(a[:], b[:]) })
}

// startRegistrar serves unicast discovery for a lookup service of groups
// on a loopback port, until the test ends.
func startRegistrar(t *testing.T, groups ...string) *discovery.Registrar {
	t.Helper()
	r, err := discovery.NewRegistrar(discovery.RegistrarConfig{ServiceID: djinn.NewID(), Groups: groups, Endpoint: "127.0.0.1:1",
		ListenAddr: "127.0.0.1:0", DisableMulticast: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func id(r *discovery.Registrar) djinn.ID {
	var out djinn.ID
	// The registrar's id is what its unicast answer says.
	info, err := discovery.Unicast(context.Background(), r.Locator())
	if err == nil {
		out = info.ServiceID
	}
	return out
}

// TestLDS runs the lookup discovery service of a real server against real
// lookup services found by unicast discovery at their locators: each rule
// of LD.3 and LD.4 that a network shows, with events at real listeners.
func TestLDS(t *testing.T) {
	t.Parallel()
	ctx := ldsContext(t)
	ra, rb := startRegistrar(t, "lab"), startRegistrar(t, "lab", "ops")
	idA, idB := id(ra), id(rb)
	locA, locB := ra.Locator().String(), rb.Locator().String()
	srv := servertest.Start(t, servertest.Config(t))
	c := servertest.Dial(t, srv.Addr())
	lds, err := c.LookupDiscovery(ctx)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := c.Lookup(ctx)
	if err != nil {
		t.Fatal(err)
	}
	own, err := reg.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	register := func(l *ldsListener, g client.Groups, locs ...string) *client.LDSRegistration {
		t.Helper()
		r, err := lds.Register(ctx, g, locs, l.lis.Ref(), []byte("hb"), time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}

	// LD.3.1: the server's own lookup service, by the public group.
	pl := listenLDS(t, ctx)
	register(pl, client.GroupsOf(""))
	ev := pl.expect(false, own.ServiceID)
	if ev.Registrars[0].Locator != own.Locator || !slices.Equal(ev.Registrars[0].Groups, []string{""}) {
		t.Errorf("own lookup service as discovered: %+v, want locator %s", ev.Registrars[0], own.Locator)
	}

	// LD.3.1 by locator; the event names the registration.
	ll := listenLDS(t, ctx)
	l := register(ll, client.Groups{}, locA)
	ev = ll.expect(false, idA)
	if !ev.Source.Equal(lds.Ref()) || ev.ID != l.EventRegistration().ID || string(ev.Handback) != "hb" || !slices.Equal(ev.Groups()[idA], []string{"lab"}) {
		t.Errorf("event %+v of registration %+v", ev.RemoteEvent, l.EventRegistration())
	}

	// LD.4.1.1 addLocators: found there, and by group for a registration
	// that wants ops, through the other's locator.
	gl := listenLDS(t, ctx)
	g := register(gl, client.GroupsOf("ops"))
	if err := l.AddLocators(ctx, locB); err != nil {
		t.Fatal(err)
	}
	ll.expect(false, idB)
	gl.expect(false, idB)

	// LD.4.1.1 discard: discarded, then discovered again when found again.
	if ok, err := l.Discard(ctx, idA); err != nil || !ok {
		t.Fatalf("discard: %v %v", ok, err)
	}
	ll.expect(true, idA)
	ll.expect(false, idA)
	if ok, err := l.Discard(ctx, djinn.NewID()); err != nil || ok {
		t.Errorf("discard of a lookup service not discovered: %v %v, want false", ok, err)
	}

	// LD.4.2: all groups gets every lookup service of a group in one
	// event; addGroups then is unsupported (LD.4.1.1); setGroups to none
	// discards them all, in one event.
	xl := listenLDS(t, ctx)
	x := register(xl, client.AllGroups)
	xl.expect(false, own.ServiceID, idA, idB)
	if err := x.AddGroups(ctx, "more"); !errors.Is(err, djinn.ErrUnsupported) {
		t.Errorf("addGroups on all groups: %v, want unsupported", err)
	}
	if err := x.SetGroups(ctx); err != nil {
		t.Fatal(err)
	}
	xl.expect(true, own.ServiceID, idA, idB)

	// The accessors.
	rs, err := l.Registrars(ctx)
	if err != nil || len(rs) != 2 {
		t.Fatalf("registrars %+v %v", rs, err)
	}
	if locs, err := l.Locators(ctx); err != nil || !slices.Equal(locs, slices.Sorted(slices.Values([]string{locA, locB}))) {
		t.Errorf("locators %v %v", locs, err)
	}
	if st, err := l.State(ctx); err != nil || st.Seq != ll.seq || st.EventID != l.EventRegistration().ID || st.Groups.All || len(st.Groups.Names) != 0 {
		t.Errorf("state %+v %v; %d events heard", st, err, ll.seq)
	}

	// LD.4.1.1 removeLocators: discarded for the registration; and since
	// nothing looks for it any more, for the one that wanted it by group.
	if err := l.RemoveLocators(ctx, locB); err != nil {
		t.Fatal(err)
	}
	ll.expect(true, idB)
	gl.expect(true, idB)
	if rs, err := g.Registrars(ctx); err != nil || len(rs) != 0 {
		t.Errorf("G's registrars %+v %v, want none", rs, err)
	}

	// LD.4.1: a registration whose lease ended is no such object.
	if err := l.Lease().Cancel(ctx, c); err != nil {
		t.Fatal(err)
	}
	if _, err := l.State(ctx); !errors.Is(err, djinn.ErrNoSuchObject) {
		t.Errorf("state of a cancelled registration: %v, want no such object", err)
	}
	if _, err := lds.Registration(ctx, l.Lease()); !errors.Is(err, djinn.ErrNoSuchObject) {
		t.Errorf("registration from a cancelled lease: %v, want no such object", err)
	}
	// A registration rebuilt from its lease (a token) works.
	g2, err := lds.Registration(ctx, g.Lease())
	if err != nil || g2.EventRegistration().ID != g.EventRegistration().ID {
		t.Fatalf("registration from its lease: %+v %v", g2, err)
	}

	// The server checks what it is sent too.
	conn, err := c.Conn(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	_, err = djinnpb.NewLookupDiscoveryServiceClient(conn).Register(ctx, &djinnpb.LDSRegisterRequest{Locators: []string{"jini://bad host"},
		Listener: client.RefToProto(gl.lis.Ref()), LeaseDurationNanos: int64(time.Minute)})
	if !errors.Is(err, djinn.ErrInvalidArgument) || !strings.Contains(err.Error(), "jini://bad host") {
		t.Errorf("a bad locator: %v, want invalid argument naming it", err)
	}
	st, err := servertest.Status(djinnpb.NewAdminClient(c.ClientConn()))
	if err != nil || st.GetCounts()["lds_registrations"] != 3 || st.GetLds() == nil || !slices.Contains(st.GetServices(), "lds") {
		t.Errorf("status %v %v", st, err)
	}
}

// freeAddr returns a loopback address no one listens on now.
func freeAddr(t *testing.T) string {
	t.Helper()
	addrs, err := testproxy.FreeAddrs(1)
	if err != nil {
		t.Fatal(err)
	}
	return addrs[0]
}

// TestLDSRestart: registrations and their sequence numbers survive a
// restart of the server; the restarted leader gives the lookup services it
// knew a grace period to be found again, then discards the others for the
// registrations that want them by group (a passive communication discard),
// not for those that want them only by locator.
func TestLDSRestart(t *testing.T) {
	t.Parallel()
	ctx := ldsContext(t)
	ra, rb := startRegistrar(t, "lab"), startRegistrar(t, "lab")
	idA, idB := id(ra), id(rb)
	cfg := servertest.Config(t)
	cfg.Listen, cfg.Raft = freeAddr(t), freeAddr(t)
	cfg.Lookup.Enabled = false
	cfg.LDS.Grace = server.Duration(500 * time.Millisecond)
	srv := servertest.Start(t, cfg)
	c := servertest.Dial(t, srv.Addr())
	lds, err := c.LookupDiscovery(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ll, gl := listenLDS(t, ctx), listenLDS(t, ctx)
	l, err := lds.Register(ctx, client.Groups{}, []string{ra.Locator().String()}, ll.lis.Ref(), nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	ll.expect(false, idA)
	g, err := lds.Register(ctx, client.GroupsOf("lab"), []string{rb.Locator().String()}, gl.lis.Ref(), nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	ev := gl.expect(false, idA)
	if len(ev.Registrars) == 1 {
		gl.expect(false, idB)
	}

	// ra goes away while the server is down.
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	ra.Close()
	srv = servertest.Start(t, cfg)
	c = servertest.Dial(t, srv.Addr())
	lds, err = c.LookupDiscovery(ctx)
	if err != nil {
		t.Fatal(err)
	}
	g2, err := lds.Registration(ctx, g.Lease())
	if err != nil || g2.EventRegistration().ID != g.EventRegistration().ID {
		t.Fatalf("registration after the restart: %+v %v", g2, err)
	}
	gl.expect(true, idA) // the next sequence number, after the grace period
	l2, err := lds.Registration(ctx, l.Lease())
	if err != nil {
		t.Fatal(err)
	}
	if rs, err := l2.Registrars(ctx); err != nil || len(rs) != 1 || rs[0].ServiceID != idA {
		t.Errorf("by locator only, after the grace period: %+v %v, want ra still", rs, err)
	}
	if rs, err := g2.Registrars(ctx); err != nil || len(rs) != 1 || rs[0].ServiceID != idB {
		t.Errorf("by group, after the grace period: %+v %v, want rb alone", rs, err)
	}
	if st, err := g2.State(ctx); err != nil || st.Seq != gl.seq {
		t.Errorf("state %+v %v, want sequence %d", st, err, gl.seq)
	}
}

// ldsNetnsEnv marks the copy of the test binary that runs
// TestLDSMulticast in a network namespace of its own.
const ldsNetnsEnv = "DJINN_LDS_TEST_NETNS"

// TestLDSMulticast runs group discovery by multicast, in a private network
// namespace where loopback carries multicast (as the discovery package's
// tests do): a lookup service found by group only, a change of its groups
// (a passive no-interest discard, LD.3.1) and its departure (a passive
// communication discard).
func TestLDSMulticast(t *testing.T) {
	if spec := os.Getenv(ldsRegistrarEnv); spec != "" {
		serveRegistrarUntilKilled(t, spec)
		return
	}
	if !inMulticastNetns(t, "^TestLDSMulticast$") {
		return
	}
	ctx := ldsContext(t)
	announce := 300 * time.Millisecond
	r, err := discovery.NewRegistrar(discovery.RegistrarConfig{ServiceID: djinn.NewID(), Groups: []string{"net"}, Endpoint: "127.0.0.1:1",
		ListenAddr: "127.0.0.1:0", Interfaces: []string{"lo"}, AnnouncementInterval: announce})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	rid := id(r)
	cfg := servertest.Config(t)
	cfg.Lookup.Enabled = false
	cfg.LDS.Multicast, cfg.LDS.Interfaces = true, []string{"lo"}
	cfg.Lookup.Announce = server.Duration(announce)
	srv := servertest.Start(t, cfg)
	c := servertest.Dial(t, srv.Addr())
	lds, err := c.LookupDiscovery(ctx)
	if err != nil {
		t.Fatal(err)
	}
	nl, ol := listenLDS(t, ctx), listenLDS(t, ctx)
	if _, err := lds.Register(ctx, client.GroupsOf("net"), nil, nl.lis.Ref(), nil, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := lds.Register(ctx, client.GroupsOf("other"), nil, ol.lis.Ref(), nil, time.Minute); err != nil {
		t.Fatal(err)
	}
	nl.expect(false, rid)
	// It moves to group other: N no longer wants it, O now does.
	if err := r.SetGroups([]string{"other"}); err != nil {
		t.Fatal(err)
	}
	nl.expect(true, rid)
	ev := ol.expect(false, rid)
	if !slices.Equal(ev.Groups()[rid], []string{"other"}) {
		t.Errorf("groups %v, want other", ev.Groups())
	}
	// It stops, announcing no groups: O hears it discarded.
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	ol.expect(true, rid)

	// A lookup service that ceases to announce — its process killed, no
	// final announcement — is discarded, after three missed announcements
	// and a failed unicast check, by the registrations that want it by
	// group (a passive communication discard, LD.3.1); one that wants it
	// only by locator keeps it.
	kid, kloc := startRegistrarProcess(t, "net2", announce)
	gl, ll := listenLDS(t, ctx), listenLDS(t, ctx)
	if _, err := lds.Register(ctx, client.GroupsOf("net2"), nil, gl.lis.Ref(), nil, time.Minute); err != nil {
		t.Fatal(err)
	}
	lreg, err := lds.Register(ctx, client.Groups{}, []string{kloc.String()}, ll.lis.Ref(), nil, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	gl.expect(false, kid.id)
	ll.expect(false, kid.id)
	kid.kill()
	gl.expect(true, kid.id)
	if rs, err := lreg.Registrars(ctx); err != nil || len(rs) != 1 || rs[0].ServiceID != kid.id {
		t.Errorf("the registration by locator after the lookup service died: %+v %v, want it kept", rs, err)
	}
	select {
	case ev := <-ll.events:
		t.Errorf("the registration by locator heard %+v, want nothing", ev)
	default:
	}
}

// ldsRegistrarEnv, set to "GROUP ANNOUNCE-INTERVAL", makes a copy of the
// test binary a lookup service's discovery side, until it is killed.
const ldsRegistrarEnv = "DJINN_LDS_TEST_REGISTRAR"

// serveRegistrarUntilKilled is that copy: it prints the registrar's
// service id and locator, then waits for its SIGKILL.
func serveRegistrarUntilKilled(t *testing.T, spec string) {
	group, interval, _ := strings.Cut(spec, " ")
	d, err := time.ParseDuration(interval)
	if err != nil {
		t.Fatalf("%s=%q: %v", ldsRegistrarEnv, spec, err)
	}
	sid := djinn.NewID()
	r, err := discovery.NewRegistrar(discovery.RegistrarConfig{ServiceID: sid, Groups: []string{group}, Endpoint: "127.0.0.1:1",
		ListenAddr: "127.0.0.1:0", Interfaces: []string{"lo"}, AnnouncementInterval: d})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	os.Stdout.WriteString("registrar " + sid.String() + " " + r.Locator().String() + "\n")
	<-t.Context().Done() // the test's deadline, if the kill never comes
}

// registrarProcess is a lookup service in a process of its own.
type registrarProcess struct {
	cmd *exec.Cmd
	id  djinn.ID
}

func (p *registrarProcess) kill() {
	_ = p.cmd.Process.Kill()
	_ = p.cmd.Wait()
}

// startRegistrarProcess starts a lookup service of group that announces
// every interval in a copy of this test binary, and returns it with its
// locator.
func startRegistrarProcess(t *testing.T, group string, interval time.Duration) (*registrarProcess, discovery.Locator) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^TestLDSMulticast$", "-test.count=1", "-test.timeout=2m")
	cmd.Env = append(os.Environ(), ldsRegistrarEnv+"="+group+" "+interval.String())
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &registrarProcess{cmd: cmd}
	t.Cleanup(p.kill)
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		sc.Scan()
		line <- sc.Text()
		_, _ = io.Copy(io.Discard, out)
	}()
	var l string
	select {
	case l = <-line:
	case <-time.After(servertest.Timeout):
		t.Fatal("the registrar process did not start")
	}
	f := strings.Fields(l)
	if len(f) != 3 || f[0] != "registrar" {
		t.Fatalf("the registrar process printed %q", l)
	}
	if p.id, err = djinn.ParseID(f[1]); err != nil {
		t.Fatal(err)
	}
	loc, err := discovery.ParseLocator(f[2])
	if err != nil {
		t.Fatal(err)
	}
	return p, loc
}

// runInNetns runs the tests that run matches in a copy of this test
// binary inside a new network namespace, and fails t if they fail. It
// skips t, saying why, where the kernel refuses the namespace.
// inMulticastNetns runs the test run names in a private network namespace
// whose loopback carries multicast, and reports false, when called outside
// one; inside, it makes loopback carry multicast and reports true.
func inMulticastNetns(t *testing.T, run string) bool {
	if os.Getenv(ldsNetnsEnv) != "1" {
		t.Parallel()
		runInNetns(t, run)
		return false
	}
	for _, s := range [][]string{{"ip", "link", "set", "lo", "up", "multicast", "on"}, {"ip", "route", "add", "224.0.0.0/4", "dev", "lo"}} {
		if out, err := exec.Command(s[0], s[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v: %s", strings.Join(s, " "), err, out)
		}
	}
	return true
}

func runInNetns(t *testing.T, run string) {
	flags := []string{"--net"}
	if os.Geteuid() != 0 {
		flags = append(flags, "--user", "--map-root-user")
	}
	if out, err := exec.Command("unshare", append(flags, "true")...).CombinedOutput(); err != nil {
		t.Skipf("multicast needs a private network namespace, and `unshare %s true` failed: %v: %s", strings.Join(flags, " "), err, bytes.TrimSpace(out))
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("unshare", append(append(flags, "--", exe), "-test.run="+run, "-test.count=1", "-test.timeout=2m", "-test.v")...)
	cmd.Env = append(os.Environ(), ldsNetnsEnv+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s in a network namespace: %v\n%s", run, err, out)
	}
	if !bytes.Contains(out, []byte("--- PASS")) {
		t.Fatalf("%s in a network namespace ran no test:\n%s", run, out)
	}
	t.Logf("in a network namespace:\n%s", out)
}
