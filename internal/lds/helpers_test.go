package lds_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/lds"
	"github.com/djinn-go/djinn/internal/state/statetest"
	"github.com/djinn-go/djinn/proto/djinnpb"
	"github.com/djinn-go/djinn/proto/statepb"
)

// world drives the replicated state through a log, as the leader would,
// and records what the hooks hear. It checks on every event that a
// registration's sequence numbers go up by one (LD.3.2).
type world struct {
	t     tb
	log   machine
	names map[djinn.ID]string // registration cookies and registrar ids, for messages
	got   []lds.Delivery
	ended []djinn.ID
	seqs  map[djinn.ID]int64
	// changes counts the Changed hooks.
	changes int
}

// machine is a log over a state machine that holds this service's state.
type machine struct {
	*statetest.Log
	st *lds.State
}

// newMachine returns a machine with an empty, initialised state.
func newMachine() machine {
	log := statetest.New()
	return machine{log, statetest.Add(log.M, lds.NewState(log.M.Leases))}
}

func newWorld(t tb) *world {
	return over(t, newMachine())
}

// over returns a world on log, whose sequence numbers it learns from the
// state.
func over(t tb, log machine) *world {
	w := &world{t: t, log: log, names: map[djinn.ID]string{}, seqs: map[djinn.ID]int64{}}
	log.st.SetHooks(lds.Hooks{
		Deliver: func(ds []lds.Delivery) {
			for _, d := range ds {
				if last, ok := w.seqs[d.Registration]; ok && d.Seq != last+1 {
					t.Errorf("registration %s: event %d after %d (LD.3.2: strictly increasing, by one)", w.name(d.Registration), d.Seq, last)
				}
				w.seqs[d.Registration] = d.Seq
			}
			w.got = append(w.got, ds...)
		},
		Changed: func() { w.changes++ },
		Ended:   func(c djinn.ID) { w.ended = append(w.ended, c) },
	})
	return w
}

func (w *world) name(id djinn.ID) string {
	if n, ok := w.names[id]; ok {
		return n
	}
	return id.String()[:8]
}

// tb is what a world needs of a test: a *testing.T, or a *rapid.T.
type tb interface {
	Helper()
	Errorf(format string, args ...any)
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

// listener is a well-formed listener reference.
var listener = &djinnpb.Ref{Endpoint: "127.0.0.1:9", ServiceId: make([]byte, 16), ObjectId: make([]byte, 16)}

// reg is a registrar numbered n: id 0xaa n, locator jini://10.0.0.n:4160/.
func reg(n byte, groups ...string) lds.Registrar {
	return lds.Registrar{ID: djinn.ID{0xaa, n}, Endpoint: fmt.Sprintf("10.0.0.%d:4161", n), Locator: loc(n), Groups: groups}
}

func loc(n byte) string { return fmt.Sprintf("jini://10.0.0.%d:4160/", n) }

func (w *world) propose(cmd *statepb.Command) (any, error) {
	return w.log.Propose(context.Background(), cmd)
}

func (w *world) must(res any, err error) any {
	w.t.Helper()
	if err != nil {
		w.t.Fatal(err)
	}
	return res
}

// register makes a registration named name; all is ALL_GROUPS.
func (w *world) register(name string, all bool, groups []string, locators ...string) djinn.ID {
	w.t.Helper()
	cookie, err := w.tryRegister(all, groups, locators...)
	if err != nil {
		w.t.Fatal(err)
	}
	w.names[cookie] = name
	return cookie
}

func (w *world) tryRegister(all bool, groups []string, locators ...string) (djinn.ID, error) {
	cookie := djinn.NewID()
	_, err := w.propose(&statepb.Command{Op: &statepb.Command_LdsRegister{LdsRegister: &statepb.LDSRegister{
		AllGroups: all, Groups: groups, Locators: locators, Listener: listener, Handback: []byte("hb-" + cookie.String()[:4]),
		Cookie: cookie[:], ExpiresUnixNanos: time.Now().Add(time.Hour).UnixNano(),
	}}})
	return cookie, err
}

func (w *world) groups(cookie djinn.ID, op djinnpb.SetOp, all bool, groups ...string) error {
	_, err := w.propose(&statepb.Command{Op: &statepb.Command_LdsGroups{LdsGroups: &statepb.LDSGroups{Cookie: cookie[:], Op: op, AllGroups: all, Groups: groups}}})
	return err
}

func (w *world) locators(cookie djinn.ID, op djinnpb.SetOp, locators ...string) error {
	_, err := w.propose(&statepb.Command{Op: &statepb.Command_LdsLocators{LdsLocators: &statepb.LDSLocators{Cookie: cookie[:], Op: op, Locators: locators}}})
	return err
}

func (w *world) discard(cookie, id djinn.ID) (bool, error) {
	res, err := w.propose(&statepb.Command{Op: &statepb.Command_LdsDiscard{LdsDiscard: &statepb.LDSDiscard{Cookie: cookie[:], RegistrarServiceId: id[:]}}})
	if err != nil {
		return false, err
	}
	return res.(bool), nil
}

func (w *world) found(rs ...lds.Registrar) {
	w.t.Helper()
	c := &statepb.LDSFound{}
	for _, r := range rs {
		w.names[r.ID] = fmt.Sprintf("r%d", r.ID[1])
		c.Registrars = append(c.Registrars, r.Proto())
	}
	w.must(w.propose(&statepb.Command{Op: &statepb.Command_LdsFound{LdsFound: c}}))
}

func (w *world) lost(rs ...lds.Registrar) {
	w.t.Helper()
	c := &statepb.LDSLost{}
	for _, r := range rs {
		c.ServiceIds = append(c.ServiceIds, r.ID[:])
	}
	w.must(w.propose(&statepb.Command{Op: &statepb.Command_LdsLost{LdsLost: c}}))
}

// unwanted logs that discovery no longer looks for rs (LDSLost, unwanted);
// byGroup: it runs group discovery.
func (w *world) unwanted(byGroup bool, rs ...lds.Registrar) {
	w.t.Helper()
	c := &statepb.LDSLost{Unwanted: true, GroupDiscovery: byGroup}
	for _, r := range rs {
		c.Registrars = append(c.Registrars, r.Proto())
	}
	w.must(w.propose(&statepb.Command{Op: &statepb.Command_LdsLost{LdsLost: c}}))
}

func (w *world) cancel(cookie djinn.ID) {
	w.t.Helper()
	res := w.must(w.propose(&statepb.Command{Op: &statepb.Command_LeaseCancel{LeaseCancel: &statepb.LeaseCancel{Cookies: [][]byte{cookie[:]}}}}))
	if errs := res.([]error); errs[0] != nil {
		w.t.Fatal(errs[0])
	}
}

// events returns the events heard since the last call, each as
// "name+r1,r2" (discovered) or "name-r1" (discarded), and forgets them.
func (w *world) events() []string {
	var out []string
	for _, d := range w.got {
		sign := "+"
		if d.Discarded {
			sign = "-"
		}
		var rs []string
		for _, r := range d.Registrars {
			rs = append(rs, fmt.Sprintf("r%d", r.ID[1]))
		}
		out = append(out, w.name(d.Registration)+sign+strings.Join(rs, ","))
	}
	w.got = nil
	return out
}

// expect checks the events heard since the last check, in any order
// across registrations (each registration's own come in order).
func (w *world) expect(want ...string) {
	w.t.Helper()
	got := w.events()
	slices.Sort(got)
	want = slices.Clone(want)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		w.t.Fatalf("events %q, want %q", got, want)
	}
}

// registrars returns the names of the registrars discovered for cookie.
func (w *world) registrars(cookie djinn.ID) []string {
	w.t.Helper()
	rs, err := w.log.st.Registrars(cookie)
	if err != nil {
		w.t.Fatal(err)
	}
	var out []string
	for _, r := range rs {
		out = append(out, fmt.Sprintf("r%d", r.ID[1]))
	}
	return out
}

// wantErr checks that err is of kind k and names every string in names.
func wantErr(t testing.TB, err error, k djinn.Kind, names ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %s", k)
	}
	if !errors.Is(err, k) {
		t.Fatalf("error %q is %s, want %s", err, djinn.KindOf(err), k)
	}
	for _, n := range names {
		if !strings.Contains(err.Error(), n) {
			t.Errorf("error %q does not name %q", err, n)
		}
	}
}

const (
	add = djinnpb.SetOp_SET_OP_ADD
	set = djinnpb.SetOp_SET_OP_SET
	rem = djinnpb.SetOp_SET_OP_REMOVE
)

func containsAll(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
