package renewal_test

import (
	"bytes"
	"context"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"pgregory.net/rapid"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/lease"
	"github.com/djinn-go/djinn/internal/renewal"
	"github.com/djinn-go/djinn/internal/state"
	"github.com/djinn-go/djinn/internal/state/statetest"
	"github.com/djinn-go/djinn/proto/djinnpb"
	"github.com/djinn-go/djinn/proto/statepb"
)

// The order pages list a set's leases in, checked against the set's
// leases (as State.Leases lists them, in the order they came) sorted by
// key.

// failer is what the helpers below need of a test: a testing.T's or a
// rapid.T's.
type failer interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

// pageNow is when the commands of these tests apply: their leases and
// sets expire an hour later.
var pageNow = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// keyedSet is a set of a state over a log, whose leases the test adds
// and removes by command.
type keyedSet struct {
	log       *statetest.Log
	state     *renewal.State
	id        djinn.ID
	landlords []*djinnpb.Ref
}

// newKeyedSet creates a set whose leases are of n landlords.
func newKeyedSet(t failer, n int) *keyedSet {
	t.Helper()
	svc := statetest.For(newRenewalState)
	k := &keyedSet{log: svc.Log, state: svc.State, id: djinn.NewID()}
	cookie := djinn.NewID()
	k.propose(t, &statepb.Command{Op: &statepb.Command_RenewalCreate{RenewalCreate: &statepb.RenewalCreate{
		SetId: k.id[:], Cookie: cookie[:], ExpiresUnixNanos: pageNow.Add(time.Hour).UnixNano()}}})
	for range n {
		s := djinn.NewID()
		k.landlords = append(k.landlords, &djinnpb.Ref{Endpoint: "127.0.0.1:1234", ServiceId: s[:], ObjectId: lease.LandlordID[:]})
	}
	return k
}

func (k *keyedSet) propose(t failer, cmd *statepb.Command) {
	t.Helper()
	cmd.NowUnixNanos = pageNow.UnixNano()
	if _, err := k.log.Propose(context.Background(), cmd); err != nil {
		t.Fatal(err)
	}
}

// add adds the lease of landlord i under cookie c (renewFor with a new
// desired expiration, if the set holds it).
func (k *keyedSet) add(t failer, i int, c djinn.ID) {
	t.Helper()
	k.propose(t, &statepb.Command{Op: &statepb.Command_RenewalAdd{RenewalAdd: &statepb.RenewalAdd{
		SetId: k.id[:], Landlord: k.landlords[i], Cookie: c[:], ExpiresUnixNanos: pageNow.Add(time.Hour).UnixNano(),
		DesiredUnixNanos: int64(djinn.Forever), RenewNanos: int64(djinn.Forever),
	}}})
}

func (k *keyedSet) remove(t failer, key renewal.Key) {
	t.Helper()
	k.propose(t, &statepb.Command{Op: &statepb.Command_RenewalRemove{RenewalRemove: &statepb.RenewalRemove{SetId: k.id[:], Key: key[:]}}})
}

// sortedKeys returns the keys of a set's leases, sorted: what pages list,
// in order.
func sortedKeys(t failer, s *renewal.State, id djinn.ID) [][]byte {
	t.Helper()
	ls, err := s.Leases(id)
	if err != nil {
		t.Fatal(err)
	}
	keys := make([][]byte, len(ls))
	for i, c := range ls {
		k := renewal.KeyOf(c.Landlord, c.Cookie)
		keys[i] = k[:]
	}
	slices.SortFunc(keys, bytes.Compare)
	return keys
}

func pageKeys(p renewal.Page) [][]byte {
	keys := make([][]byte, len(p.Leases))
	for i, cl := range p.Leases {
		l := cl.GetLease()
		var ref djinn.Ref
		copy(ref.Service[:], l.GetLandlord().GetServiceId())
		copy(ref.Object[:], l.GetLandlord().GetObjectId())
		k := renewal.KeyOf(ref, djinn.ID(l.GetCookie()))
		keys[i] = k[:]
	}
	return keys
}

// checkPage reads the page of at most max leases after after and checks
// it against the set's leases sorted by key: the first max of those after
// after, a next when more follow (the key of its last lease), the set's
// total; and that it looked at no more than its leases and the one after.
// It returns the page's next.
func checkPage(t failer, s *renewal.State, id djinn.ID, after []byte, max int) []byte {
	t.Helper()
	keys := sortedKeys(t, s, id)
	i, at := slices.BinarySearchFunc(keys, after, bytes.Compare)
	if at {
		i++
	}
	rest := keys[i:]
	visited := s.Visited()
	p, err := s.PageAfter(id, after, max, pageNow, 1<<30)
	if err != nil {
		t.Fatalf("page of %d after %x: %v", max, after, err)
	}
	if v := s.Visited() - visited; v > len(p.Leases)+1 {
		t.Fatalf("page of %d leases after %x of a set of %d looked at %d leases, want at most %d", len(p.Leases), after, len(keys), v, len(p.Leases)+1)
	}
	want := rest[:min(max, len(rest))]
	if got := pageKeys(p); !slices.EqualFunc(got, want, bytes.Equal) {
		t.Fatalf("page of %d after %x:\n got %x\nwant %x (of the set's %d keys sorted)", max, after, got, want, len(keys))
	}
	if p.Total != len(keys) {
		t.Fatalf("page after %x: total %d, want %d", after, p.Total, len(keys))
	}
	switch {
	case len(rest) > max && !bytes.Equal(p.Next, want[len(want)-1]):
		t.Fatalf("page of %d after %x, %d leases after it: next %x, want %x (its last)", max, after, len(rest), p.Next, want[len(want)-1])
	case len(rest) <= max && p.Next != nil:
		t.Fatalf("page of %d after %x, the last (%d leases after it): next %x, want none", max, after, len(rest), p.Next)
	}
	return p.Next
}

// listAll reads every page of max leases, checking each, and returns the
// keys listed.
func listAll(t failer, s *renewal.State, id djinn.ID, max int) int {
	t.Helper()
	n := 0
	for after := []byte(nil); ; n++ {
		if after = checkPage(t, s, id, after, max); after == nil {
			return n + 1
		}
	}
}

// TestGetLeasesPageLooksAtItsLeases (LR.2 getLeases): a page looks at its
// own leases and the one after, however many the set holds — it starts
// where the last ended in the set's key order. Before, every page looked
// at every lease of the set, under the lock every call of the renewal
// service waits for (5,000 a page here; a million in a full set).
func TestGetLeasesPageLooksAtItsLeases(t *testing.T) {
	k := newKeyedSet(t, 3)
	const n = 5000
	for i := range n {
		k.add(t, i%3, djinn.NewID())
	}
	want := sortedKeys(t, k.state, k.id)
	for _, max := range []int{1, 10, 999} {
		var (
			got   [][]byte
			after []byte
		)
		for {
			visited := k.state.Visited()
			p, err := k.state.PageAfter(k.id, after, max, pageNow, 1<<30)
			if err != nil {
				t.Fatal(err)
			}
			if v := k.state.Visited() - visited; v > len(p.Leases)+1 {
				t.Fatalf("a page of %d leases of a set of %d looked at %d leases, want at most %d (its own and the one after)", len(p.Leases), n, v, len(p.Leases)+1)
			}
			got = append(got, pageKeys(p)...)
			if after = p.Next; after == nil {
				break
			}
		}
		if !slices.EqualFunc(got, want, bytes.Equal) {
			t.Errorf("pages of %d: %d leases, want the set's %d in key order", max, len(got), n)
		}
	}
}

// TestGetLeasesPagesMatchSortedListing (LR.2 getLeases): while leases are
// added and removed between pages (among them the lease a page ended at),
// each page is the next leases, in key order, of the set as it is then:
// those a listing of the set sorted by key has after the last page's end.
func TestGetLeasesPagesMatchSortedListing(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		k := newKeyedSet(rt, 3)
		cookie := func(label string) djinn.ID {
			var c djinn.ID
			// Few cookies, so that landlords share some and adds repeat.
			c[0] = rapid.Byte().Draw(rt, label)
			return c
		}
		for i := range rapid.IntRange(0, 30).Draw(rt, "initial") {
			k.add(rt, i%3, cookie("initial cookie"))
		}
		var after []byte
		for range rapid.IntRange(1, 40).Draw(rt, "pages") {
			after = checkPage(rt, k.state, k.id, after, rapid.IntRange(1, 6).Draw(rt, "max"))
			for range rapid.IntRange(0, 3).Draw(rt, "adds") {
				k.add(rt, rapid.IntRange(0, 2).Draw(rt, "landlord"), cookie("cookie"))
			}
			keys := sortedKeys(rt, k.state, k.id)
			for range rapid.IntRange(0, 3).Draw(rt, "removes") {
				if len(keys) == 0 {
					break
				}
				i := rapid.IntRange(0, len(keys)-1).Draw(rt, "remove")
				if after != nil && rapid.Bool().Draw(rt, "remove the last page's end") {
					if j, ok := slices.BinarySearchFunc(keys, after, bytes.Compare); ok {
						i = j
					}
				}
				k.remove(rt, renewal.Key(keys[i]))
				keys = slices.Delete(keys, i, i+1)
			}
		}
	})
}

// TestGetLeasesPagesAfterRestore (LR.2 getLeases): a state restored from
// a snapshot, and one that replays the log, list a set's leases in pages
// in key order as the state they came from did — the key order is
// rebuilt with the leases — and keep it as leases come and go.
func TestGetLeasesPagesAfterRestore(t *testing.T) {
	k := newKeyedSet(t, 4)
	var removed int
	for i := range 3000 {
		c := djinn.NewID()
		k.add(t, i%4, c)
		if i%7 == 0 {
			var ref djinn.Ref
			copy(ref.Service[:], k.landlords[i%4].GetServiceId())
			copy(ref.Object[:], k.landlords[i%4].GetObjectId())
			k.remove(t, renewal.KeyOf(ref, c))
			removed++
		}
	}
	want := sortedKeys(t, k.state, k.id)
	if len(want) != 3000-removed {
		t.Fatalf("the set holds %d leases, want %d", len(want), 3000-removed)
	}
	restored, err := statetest.Restart(k.log, newRenewalState)
	if err != nil {
		t.Fatal(err)
	}
	replayed := state.New()
	rs := statetest.Add(replayed, newRenewalState(replayed))
	for i, cmd := range k.log.Commands() {
		if err, ok := replayed.Apply(uint64(i+1), cmd).(error); ok {
			t.Fatalf("replay of command %d: %v", i+1, err)
		}
	}
	// Records restored one by one, with no word that the last is read:
	// the order is built at the first use, a remove before it included.
	bare := state.New()
	br := statetest.Add(bare, newRenewalState(bare))
	for _, rec := range k.state.Records() {
		if err := br.Restore(rec); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := br.ApplyRemove(&statepb.RenewalRemove{SetId: k.id[:], Key: want[0]}); err != nil {
		t.Fatal(err)
	}
	if got := sortedKeys(t, br, k.id); !slices.EqualFunc(got, want[1:], bytes.Equal) {
		t.Fatalf("records restored one by one, less a lease: %d leases, want %d", len(got), len(want)-1)
	}
	listAll(t, br, k.id, 100)
	for _, c := range []struct {
		name string
		k    *keyedSet
	}{
		{"restored from a snapshot", &keyedSet{log: restored.Log, state: restored.State, id: k.id, landlords: k.landlords}},
		{"replayed", &keyedSet{log: statetest.Over(replayed), state: rs, id: k.id, landlords: k.landlords}},
	} {
		if got := sortedKeys(t, c.k.state, k.id); !slices.EqualFunc(got, want, bytes.Equal) {
			t.Fatalf("%s: %d leases, want the %d of the state it came from", c.name, len(got), len(want))
		}
		listAll(t, c.k.state, k.id, 100)
		// The order is live: leases added and removed after are listed
		// in their places.
		for i := range 50 {
			c.k.add(t, i%4, djinn.NewID())
		}
		for _, key := range want[:50] {
			c.k.remove(t, renewal.Key(key))
		}
		if pages := listAll(t, c.k.state, k.id, 100); pages != (len(want)+99)/100 {
			t.Errorf("%s: %d pages of 100, want %d", c.name, pages, (len(want)+99)/100)
		}
	}
}

// TestGetLeasesWholeLooksAtWhatItAnswers (LR.2 getLeases): a request
// without a max refused because the set's leases pass what one answer
// holds looks at those that fit and the one that does not, and the first
// leases of a set (the console's) at those; not the whole set. Before,
// both went through every lease of the set under the state's lock. An
// answer without a max keeps the order the leases came in.
func TestGetLeasesWholeLooksAtWhatItAnswers(t *testing.T) {
	k := newKeyedSet(t, 3)
	const n = 5000
	for i := range n {
		k.add(t, i%3, djinn.NewID())
	}
	came, err := k.state.Leases(k.id)
	if err != nil {
		t.Fatal(err)
	}
	one, _, err := k.state.Whole(k.id, pageNow, 1<<30)
	if err != nil || len(one.Leases) != n {
		t.Fatalf("every lease in one answer: %d leases, %v; want %d", len(one.Leases), err, n)
	}
	for i, cl := range one.Leases {
		if djinn.ID(cl.GetLease().GetCookie()) != came[i].Cookie {
			t.Fatalf("lease %d of the answer without a max: %x, want %s (the order the leases came in)", i, cl.GetLease().GetCookie(), came[i].Cookie)
		}
	}
	visited := k.state.Visited()
	p, more, err := k.state.Whole(k.id, pageNow, 10*proto.Size(one.Leases[0])+10)
	if err != nil || !more {
		t.Fatalf("every lease in the bytes of about 10: %d leases, more %v, %v; want more", len(p.Leases), more, err)
	}
	if v := k.state.Visited() - visited; v > len(p.Leases)+1 {
		t.Errorf("a refused answer without a max, %d leases fitting, looked at %d leases of %d, want at most %d", len(p.Leases), v, n, len(p.Leases)+1)
	}
	visited = k.state.Visited()
	first, err := k.state.FirstLeases(k.id, 10)
	if err != nil || len(first) != 10 {
		t.Fatalf("the first 10 leases: %d, %v", len(first), err)
	}
	if v := k.state.Visited() - visited; v != 10 {
		t.Errorf("the first 10 leases looked at %d leases of %d, want 10", v, n)
	}
}
