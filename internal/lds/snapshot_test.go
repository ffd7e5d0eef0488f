package lds_test

import (
	"bytes"
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/lds"
	"github.com/djinn-go/djinn/internal/state"
	"github.com/djinn-go/djinn/internal/state/statetest"
	"github.com/djinn-go/djinn/proto/statepb"
)

// busyWorld makes a state with every kind of thing in it: registrations
// of all groups, of groups, of locators; live lookup services, one lost
// but kept by a locator, one discarded by a client.
func busyWorld(t *testing.T) *world {
	w := newWorld(t)
	w.register("All", true, nil)
	w.register("AB", false, []string{"a", "b"}, loc(7))
	l := w.register("L", false, nil, loc(1), loc(3))
	d := w.register("D", false, []string{"c"})
	w.found(reg(1, "a"), reg(2, "b"), reg(3, "c"))
	w.lost(reg(1, "a")) // L keeps r1
	w.must(w.discard(d, reg(3).ID))
	w.must(nil, w.locators(l, add, loc(4)))
	w.events()
	return w
}

// restored snapshots w's machine through the state package's snapshot and
// returns a world over a fresh machine restored from it, which carries on
// w's sequence numbers and names.
func restored(t tb, w *world) *world {
	t.Helper()
	write, err := w.log.M.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := write(&buf); err != nil {
		t.Fatal(err)
	}
	m := state.New()
	st := statetest.Add(m, lds.NewState(m.Leases))
	if err := m.Restore(&buf); err != nil {
		t.Fatal(err)
	}
	w2 := over(t, machine{statetest.Over(m), st})
	w2.names, w2.seqs = w.names, w.seqs
	return w2
}

func records(t *testing.T, s *lds.State) [][]byte {
	t.Helper()
	recs, err := s.Records()
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for _, r := range recs {
		b, err := proto.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

// TestSnapshotRoundTrip: a restored state encodes exactly as the original
// and answers every query as it did.
func TestSnapshotRoundTrip(t *testing.T) {
	w := busyWorld(t)
	w2 := restored(t, w)
	a, b := records(t, w.log.st), records(t, w2.log.st)
	if !slices.EqualFunc(a, b, bytes.Equal) {
		t.Fatalf("restored state encodes differently:\n%q\n%q", a, b)
	}
	if got, want := w2.log.st.Wanted(), w.log.st.Wanted(); !slices.Equal(got.Groups, want.Groups) || !slices.Equal(got.Locators, want.Locators) || got.AllGroups != want.AllGroups {
		t.Errorf("wanted %+v, want %+v", got, want)
	}
	if got, want := w2.log.st.Known(), w.log.st.Known(); len(got) != len(want) {
		t.Errorf("table %v, want %v", got, want)
	}
	for id, name := range w.names {
		i1, err1 := w.log.st.Registration(id)
		if err1 != nil {
			continue // a registrar's name
		}
		i2, err2 := w2.log.st.Registration(id)
		if err2 != nil || !slices.Equal(i1.Groups, i2.Groups) || !slices.Equal(i1.Locators, i2.Locators) || i1.AllGroups != i2.AllGroups || i1.EventID != i2.EventID || i1.Seq != i2.Seq {
			t.Errorf("registration %s: %+v %v, want %+v", name, i2, err2, i1)
		}
		if r1, r2 := w.registrars(id), w2.registrars(id); !slices.Equal(r1, r2) {
			t.Errorf("registration %s has %v, want %v", name, r2, r1)
		}
	}
	// The live table and the rules carry on: the discarded r3 comes back
	// to D, the lost r1 to AB and All, and not again to L.
	w2.found(reg(1, "a"), reg(3, "c"))
	w2.expect("D+r3", "AB+r1", "All+r1")
}

// TestRestartKeepsSequenceNumbers (LD.3.2): after a restart (a snapshot
// restored) a registration's events go on from its last sequence number,
// and a new registration gets an event id no other had.
func TestRestartKeepsSequenceNumbers(t *testing.T) {
	w := newWorld(t)
	a := w.register("A", false, []string{"a"})
	w.found(reg(1, "a"))
	w.found(reg(2, "a"))
	w.lost(reg(1, "a"))
	w.expect("A+r1", "A+r2", "A-r1")
	before, _ := w.log.st.Registration(a)
	if before.Seq != 3 {
		t.Fatalf("sequence number %d before the restart, want 3", before.Seq)
	}
	w2 := restored(t, w)
	w2.found(reg(1, "a"))
	if len(w2.got) != 1 || w2.got[0].Seq != 4 || w2.got[0].EventID != before.EventID || string(w2.got[0].Handback) != "hb-"+a.String()[:4] {
		t.Fatalf("the first event after the restart: %+v, want sequence 4 of event %d", w2.got, before.EventID)
	}
	b := w2.register("B", false, nil)
	if ib, _ := w2.log.st.Registration(b); ib.EventID <= before.EventID {
		t.Errorf("new registration's event id %d, want more than %d", ib.EventID, before.EventID)
	}
	// And again, through a second restart.
	w3 := restored(t, w2)
	w3.lost(reg(2, "a"))
	if len(w3.got) != 1 || w3.got[0].Seq != 5 {
		t.Fatalf("after a second restart: %+v, want sequence 5", w3.got)
	}
}

// TestRestoreInPieces: a state cut into many records comes back whole, and
// records that break the state's rules are refused.
func TestRestoreInPieces(t *testing.T) {
	w := busyWorld(t)
	recs, err := w.log.st.Records()
	if err != nil {
		t.Fatal(err)
	}
	var all []byte
	for _, r := range recs {
		all = append(all, r.GetState()...)
	}
	s := lds.NewState(w.log.M.Leases)
	for i := 0; i < len(all); i += 7 {
		j := min(i+7, len(all))
		if err := s.Restore(&statepb.LDSRecord{State: all[i:j], Last: j == len(all)}); err != nil {
			t.Fatal(err)
		}
	}
	if a, b := records(t, w.log.st), records(t, s); !slices.EqualFunc(a, b, bytes.Equal) {
		t.Fatalf("restored in pieces, the state encodes differently")
	}

	for _, bad := range []string{
		`{`,
		`{"Registrars":[{"Registrar":"CgE=","Live":true}]}`, // a 1-byte service id
		`{"Registrations":[{"Cookie":[1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0],"EventID":1,"Discovered":[[9,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0]]}],"NextEvent":1}`,
		`{"Registrations":[{"Cookie":[1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0],"EventID":5}],"NextEvent":1}`,
	} {
		s := lds.NewState(w.log.M.Leases)
		err := s.Restore(&statepb.LDSRecord{State: []byte(bad), Last: true})
		wantErr(t, err, djinn.Internal, "lookup discovery snapshot")
		if n, k := s.Len(); n+k != 0 {
			t.Errorf("snapshot %s: refused but left %d registrations, %d registrars", bad, n, k)
		}
	}
}
