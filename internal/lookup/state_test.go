package lookup_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/lookup"
	"github.com/djinn-go/djinn/internal/quota"
	"github.com/djinn-go/djinn/internal/state"
	"github.com/djinn-go/djinn/internal/state/statetest"
	"github.com/djinn-go/djinn/proto/djinnpb"
	"github.com/djinn-go/djinn/proto/statepb"
	"github.com/djinn-go/djinn/service"
)

func newLookupState(m *state.Machine) *lookup.State {
	return lookup.NewState(m.Leases, m.ServiceID, service.Limits{})
}

func propose(t *testing.T, log *statetest.Log, cmd *statepb.Command) any {
	t.Helper()
	res, err := log.Propose(context.Background(), cmd)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func register(t *testing.T, log *statetest.Log, id djinn.ID, types ...string) djinn.ID {
	t.Helper()
	cookie := djinn.NewID()
	propose(t, log, &statepb.Command{Op: &statepb.Command_LookupRegister{LookupRegister: &statepb.LookupRegister{
		Item:   &djinnpb.ServiceItem{ServiceId: id[:], Service: []byte("ref"), Types: types},
		Cookie: cookie[:], ExpiresUnixNanos: time.Now().Add(time.Hour).UnixNano(),
	}}})
	return cookie
}

// TestSnapshotBesideLookups: a snapshot does not wait for lookups in
// progress (nor they for it): it only reads the state.
func TestSnapshotBesideLookups(t *testing.T) {
	log := statetest.For(newLookupState)
	register(t, log.Log, djinn.NewID(), "Printer")
	inside, release := make(chan struct{}), make(chan struct{})
	browsing := make(chan error, 1)
	go func() {
		browsing <- log.State.Browse(func(*lookup.Registry) error {
			close(inside)
			<-release
			return nil
		})
	}()
	<-inside
	snapped := make(chan error, 1)
	go func() {
		_, err := log.State.Records()
		snapped <- err
	}()
	select {
	case err := <-snapped:
		if err != nil {
			t.Error(err)
		}
	case <-time.After(20 * time.Second):
		t.Error("a snapshot waited for a lookup in progress")
	}
	close(release)
	if err := <-browsing; err != nil {
		t.Error(err)
	}
}

// TestStateSurvivesSnapshot: registrations, their leases' cookies, watches
// with their event ids and sequence numbers come back from a snapshot; the
// next event of a watch continues its sequence.
func TestStateSurvivesSnapshot(t *testing.T) {
	log := statetest.For(newLookupState)
	var got []lookup.Delivery
	log.State.SetNotify(func(ds []lookup.Delivery) { got = append(got, ds...) })
	watch := djinn.NewID()
	eid := propose(t, log.Log, &statepb.Command{Op: &statepb.Command_LookupNotify{LookupNotify: &statepb.LookupNotify{
		Template: &djinnpb.ServiceTemplate{Types: []string{"Printer"}}, Transitions: 7,
		Listener: &djinnpb.Ref{Endpoint: "127.0.0.1:9", ServiceId: make([]byte, 16), ObjectId: make([]byte, 16)},
		Handback: []byte("hb"), Cookie: watch[:], ExpiresUnixNanos: time.Now().Add(time.Hour).UnixNano(),
	}}}).(int64)
	a, b := djinn.NewID(), djinn.NewID()
	cookieA := register(t, log.Log, a, "Printer")
	register(t, log.Log, b, "Scanner")
	register(t, log.Log, a, "Printer", "Device") // replaces a: MATCH_MATCH
	if len(got) != 2 || got[0].Seq != 1 || got[1].Seq != 2 || got[1].Event.GetTransition() != djinnpb.Transition_TRANSITION_MATCH_MATCH || got[0].EventID != eid {
		t.Fatalf("deliveries %+v", got)
	}
	// The replaced registration's cookie no longer names it.
	if _, err := log.Propose(context.Background(), &statepb.Command{Op: &statepb.Command_LookupAttributes{LookupAttributes: &statepb.LookupAttributes{
		Cookie: cookieA[:], Op: lookup.OpAdd}}}); djinn.KindOf(err) != djinn.UnknownLease {
		t.Fatalf("attributes through a replaced registration's cookie: %v, want UnknownLease", err)
	}

	log2, err := statetest.Restart(log.Log, newLookupState)
	if err != nil {
		t.Fatal(err)
	}
	m := log2.State
	if items, watches := m.Len(); items != 2 || watches != 1 {
		t.Fatalf("restored %d items, %d watches; want 2 and 1", items, watches)
	}
	total, items, err := m.Lookup(service.Template{Types: []string{"Device"}}, 10)
	if err != nil || total != 1 || items[0].ID != a {
		t.Fatalf("restored lookup: %d %v %v", total, items, err)
	}
	if e, seq, ok := m.Watch(watch); !ok || e != eid || seq != 2 {
		t.Fatalf("restored watch: event %d seq %d %v", e, seq, ok)
	}
	var after []lookup.Delivery
	m.SetNotify(func(ds []lookup.Delivery) { after = append(after, ds...) })
	register(t, log2.Log, djinn.NewID(), "Printer")
	if len(after) != 1 || after[0].Seq != 3 || string(after[0].Handback) != "hb" {
		t.Fatalf("the next event after the restore: %+v, want sequence 3", after)
	}
}

// TestHierarchySurvivesSnapshot: an item's type hierarchy goes through the
// log and a snapshot, and browsing by type still knows it.
func TestHierarchySurvivesSnapshot(t *testing.T) {
	log := statetest.For(newLookupState)
	id, cookie := djinn.NewID(), djinn.NewID()
	propose(t, log.Log, &statepb.Command{Op: &statepb.Command_LookupRegister{LookupRegister: &statepb.LookupRegister{
		Item: &djinnpb.ServiceItem{ServiceId: id[:], Service: []byte("ref"), Types: []string{"Laser"},
			Supertypes: []*djinnpb.TypeSupertypes{{Type: "Laser", Supertypes: []string{"Printer"}}}},
		Cookie: cookie[:], ExpiresUnixNanos: time.Now().Add(time.Hour).UnixNano(),
	}}})
	log2, err := statetest.Restart(log.Log, newLookupState)
	if err != nil {
		t.Fatal(err)
	}
	total, items, err := log2.State.Lookup(service.Template{Types: []string{"Printer"}}, 1)
	want := service.Item{ID: id, Service: []byte("ref"), Types: []string{"Laser", "Printer"}, Supertypes: map[string][]string{"Laser": {"Printer"}}}
	if err != nil || total != 1 || !items[0].Equal(want) {
		t.Fatalf("restored item: %d %+v %v; want %+v", total, items, err, want)
	}
	var types []string
	err = log2.State.Browse(func(r *lookup.Registry) (err error) {
		types, err = r.ServiceTypes(service.Template{Types: []string{"Printer"}}, "")
		return err
	})
	if err != nil || !slices.Equal(types, []string{"Laser"}) {
		t.Errorf("restored service types: %v, %v; want [Laser]", types, err)
	}
}

// TestRegisterUnderAnotherPrincipalsID (DESIGN.md 7): a service id another
// principal's live item holds is refused, in the replicated state (two
// principals racing for one id cannot both win), and the owner's item and
// lease stay. The owner registers it again at its quota's limit: the new
// registration takes the old one's place, so nothing is added. Counts
// survive a restart.
func TestRegisterUnderAnotherPrincipalsID(t *testing.T) {
	log := statetest.For(newLookupState)
	propose(t, log.Log, &statepb.Command{Op: &statepb.Command_Quotas{Quotas: quota.Limits{quota.LookupItems: {PerPrincipal: 1}}.Proto()}})
	reg := func(id djinn.ID, p string) error {
		cookie := djinn.NewID()
		_, err := log.Propose(context.Background(), &statepb.Command{Op: &statepb.Command_LookupRegister{LookupRegister: &statepb.LookupRegister{
			Item:   &djinnpb.ServiceItem{ServiceId: id[:], Service: []byte(p), Types: []string{"Printer"}},
			Cookie: cookie[:], ExpiresUnixNanos: time.Now().Add(time.Hour).UnixNano(), Principal: p,
		}}})
		return err
	}
	x, y := djinn.NewID(), djinn.NewID()
	if err := reg(x, "cn:alice"); err != nil {
		t.Fatal(err)
	}
	if err := reg(x, "cn:bob"); !errors.Is(err, djinn.ErrPermissionDenied) {
		t.Fatalf("bob registers under alice's id: %v, want permission denied", err)
	}
	if err := reg(x, "cn:alice"); err != nil {
		t.Fatalf("alice registers her item again at her quota: %v", err)
	}
	if err := reg(y, "cn:alice"); !errors.Is(err, djinn.ErrResourceExhausted) {
		t.Fatalf("alice registers a second item past her quota of 1: %v", err)
	}
	if err := reg(y, "cn:bob"); err != nil {
		t.Fatalf("bob registers an item of his own: %v", err)
	}
	_, items, err := log.State.Lookup(service.Template{ID: &x}, 1)
	if err != nil || len(items) != 1 || string(items[0].Service) != "cn:alice" {
		t.Fatalf("the item under alice's id: %v, %v", items, err)
	}
	restarted, err := statetest.Restart(log.Log, newLookupState)
	if err != nil {
		t.Fatal(err)
	}
	q := restarted.M.Leases.Quotas()
	if q.Held("cn:alice", quota.LookupItems) != 1 || q.Held("cn:bob", quota.LookupItems) != 1 || q.Total(quota.Leases) != 2 {
		t.Fatalf("after a restart alice holds %d items, bob %d, all %d leases; want 1, 1, 2",
			q.Held("cn:alice", quota.LookupItems), q.Held("cn:bob", quota.LookupItems), q.Total(quota.Leases))
	}
	if lim := q.Limits()[quota.LookupItems]; lim.PerPrincipal != 1 {
		t.Fatalf("after a restart the quota is %+v, want the snapshot's", lim)
	}
}
