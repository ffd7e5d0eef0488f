package lds_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/lds"
	"github.com/djinn-go/djinn/proto/djinnpb"
	"github.com/djinn-go/djinn/proto/statepb"
)

// TestRules: the event rules of LD.3 and LD.4, one row each. Every row
// starts from an empty state; r1 is in groups a and b at loc(1), r2 in b at
// loc(2), r3 in c at loc(3), r9 in no group at loc(9).
func TestRules(t *testing.T) {
	r1, r2, r3, r9 := reg(1, "a", "b"), reg(2, "b"), reg(3, "c"), reg(9)
	for _, tt := range []struct {
		name string
		run  func(w *world)
	}{
		{"LD.3.1 register: the known lookup services it wants by group, in one discovered event (LD.4.2)", func(w *world) {
			w.found(r1, r2, r3)
			w.register("A", false, []string{"b"})
			w.expect("A+r1,r2")
		}},
		{"LD.3.1 register: the known lookup services it wants by locator", func(w *world) {
			w.found(r1, r2, r3)
			w.register("A", false, nil, loc(3), "jini://10.0.0.2") // the default port: loc(2)
			w.expect("A+r2,r3")
		}},
		{"LD.3.1 register with no groups (NO_GROUPS) and no locators: nothing", func(w *world) {
			w.found(r1, r2, r3)
			w.register("A", false, nil)
			w.expect()
		}},
		{"LD.3.1 register with all groups (ALL_GROUPS): every lookup service of some group", func(w *world) {
			w.found(r1, r2, r3, r9)
			w.register("A", true, nil)
			w.expect("A+r1,r2,r3")
		}},
		{"LD.3.1 register with duplicate groups and locators: as without them", func(w *world) {
			w.found(r1)
			a := w.register("A", false, []string{"x", "x", ""}, loc(1), "JINI://10.0.0.1:4160", loc(1))
			w.expect("A+r1")
			info, err := w.log.st.Registration(a)
			if err != nil || !slices.Equal(info.Groups, []string{"", "x"}) || !slices.Equal(info.Locators, []string{loc(1)}) {
				t.Errorf("registration %+v %v, want groups \"\", x and one locator", info, err)
			}
		}},
		{"LD.3.1 register twice: two registrations with their own event ids", func(w *world) {
			w.found(r1)
			a, b := w.register("A", false, []string{"a"}), w.register("B", false, []string{"a"})
			w.expect("A+r1", "B+r1")
			ia, _ := w.log.st.Registration(a)
			ib, _ := w.log.st.Registration(b)
			if ia.EventID == ib.EventID || ia.EventID == 0 {
				t.Errorf("event ids %d and %d, want two different ones", ia.EventID, ib.EventID)
			}
		}},
		{"LD.3.1 found: discovered by each registration that wants it", func(w *world) {
			w.register("A", false, []string{"a"})
			w.register("B", false, nil, loc(1))
			w.register("C", false, []string{"c"})
			w.found(r1)
			w.expect("A+r1", "B+r1")
		}},
		{"LD.4.2 found together: one discovered event per registration", func(w *world) {
			w.register("A", true, nil)
			w.found(r1, r2, r3)
			w.expect("A+r1,r2,r3")
		}},
		{"LD.3.2 found again, unchanged: no second discovered event", func(w *world) {
			w.register("A", false, []string{"b"})
			w.found(r1)
			w.found(r1, r2)
			w.found(r1, r2)
			w.expect("A+r1", "A+r2")
		}},
		{"LD.3.1 new member group: discovered by the registrations that want it and had not", func(w *world) {
			w.register("A", false, []string{"a"})
			w.register("C", false, []string{"c"})
			w.found(r3)
			w.found(reg(3, "a", "c"))
			w.expect("C+r3", "A+r3")
		}},
		{"LD.3.1 groups changed: passive no-interest discard, only to those that want it no longer", func(w *world) {
			w.register("A", false, []string{"a"})
			w.register("B", false, []string{"b"})
			w.register("L", false, []string{"a"}, loc(1)) // still wants it by locator
			w.found(r1)
			w.expect("A+r1", "B+r1", "L+r1")
			w.found(reg(1, "b"))
			w.expect("A-r1")
			if got := w.registrars(w.regNamed("L")); !slices.Equal(got, []string{"r1"}) {
				t.Errorf("L has %v, want r1", got)
			}
		}},
		{"LD.3.1 lost: passive communication discard to those that want it by group", func(w *world) {
			w.register("A", false, []string{"a"})
			w.register("AL", false, []string{"a"}, loc(1))
			w.register("L", false, nil, loc(1))
			w.found(r1)
			w.expect("A+r1", "AL+r1", "L+r1")
			w.lost(r1)
			w.expect("A-r1", "AL-r1")
			if got := w.registrars(w.regNamed("L")); !slices.Equal(got, []string{"r1"}) {
				t.Errorf("L, interested by locator only, has %v, want r1 still", got)
			}
		}},
		{"LD.3.1 lost, then found again: rediscovered by those that lost it", func(w *world) {
			w.register("A", false, []string{"a"})
			w.register("L", false, nil, loc(1))
			w.found(r1)
			w.lost(r1)
			w.register("N", false, []string{"b"}) // lost lookup services are given to no one
			w.found(r1)
			w.expect("A+r1", "L+r1", "A-r1", "A+r1", "N+r1")
		}},
		{"LD.4.1.1 addGroups: the known lookup services newly wanted, in one event", func(w *world) {
			w.found(r1, r2, r3)
			a := w.register("A", false, []string{"c"})
			w.must(nil, w.groups(a, add, false, "b"))
			w.expect("A+r3", "A+r1,r2")
		}},
		{"LD.4.1.1 addGroups under which a discovered lookup service falls: no event", func(w *world) {
			w.found(r1)
			a := w.register("A", false, []string{"a"})
			w.must(nil, w.groups(a, add, false, "b"))
			w.expect("A+r1")
		}},
		{"LD.4.1.1 addGroups with all groups: unsupported", func(w *world) {
			a := w.register("A", true, nil)
			wantErr(t, w.groups(a, add, false, "b"), djinn.Unsupported, "add groups", "all groups")
		}},
		{"LD.4.1.1 removeGroups with all groups: unsupported", func(w *world) {
			a := w.register("A", true, nil)
			wantErr(t, w.groups(a, rem, false, "b"), djinn.Unsupported, "remove groups", "all groups")
		}},
		{"LD.4.1.1 setGroups to all groups: allowed, and discovers", func(w *world) {
			w.found(r1, r3)
			a := w.register("A", false, []string{"a"})
			w.must(nil, w.groups(a, set, true))
			w.expect("A+r1", "A+r3")
			if info, _ := w.log.st.Registration(a); !info.AllGroups || len(info.Groups) != 0 {
				t.Errorf("after setGroups(all): %+v", info)
			}
		}},
		{"LD.4.1.1 setGroups from all groups to a set: discards what no group wants", func(w *world) {
			w.found(r1, r3)
			a := w.register("A", true, nil)
			w.must(nil, w.groups(a, set, false, "c"))
			w.expect("A+r1,r3", "A-r1")
		}},
		{"LD.4.1.1 setGroups empty (NO_GROUPS): discards what only groups wanted", func(w *world) {
			w.found(r1, r2)
			a := w.register("A", false, []string{"b"}, loc(2))
			w.must(nil, w.groups(a, set, false))
			w.expect("A+r1,r2", "A-r1")
		}},
		{"LD.4.1.1 removeGroups: discarded when no remaining group and no locator wants it", func(w *world) {
			w.found(r1, r2)
			a := w.register("A", false, []string{"a", "b"})
			w.must(nil, w.groups(a, rem, false, "b"))
			w.expect("A+r1,r2", "A-r2")
		}},
		{"LD.4.1.1 removeGroups: kept while another group wants it", func(w *world) {
			w.found(r1)
			a := w.register("A", false, []string{"a", "b"})
			w.must(nil, w.groups(a, rem, false, "b", "zz"))
			w.expect("A+r1")
		}},
		{"LD.4.1.1 removeGroups: kept while a locator wants it", func(w *world) {
			w.found(r2)
			a := w.register("A", false, []string{"b"}, loc(2))
			w.must(nil, w.groups(a, rem, false, "b"))
			w.expect("A+r2")
		}},
		{"LD.4.1.1 addLocators for a known lookup service: discovered", func(w *world) {
			w.found(r3)
			a := w.register("A", false, nil)
			w.must(nil, w.locators(a, add, loc(3)))
			w.expect("A+r3")
		}},
		{"LD.4.1.1 addLocators for one already discovered by group: no event", func(w *world) {
			w.found(r3)
			a := w.register("A", false, []string{"c"})
			w.must(nil, w.locators(a, add, loc(3)))
			w.expect("A+r3")
		}},
		{"LD.4.1.1 addLocators for an unknown lookup service: discovered when found", func(w *world) {
			a := w.register("A", false, nil)
			w.must(nil, w.locators(a, add, loc(3)))
			w.expect()
			w.found(r3)
			w.expect("A+r3")
		}},
		{"LD.4.1.1 removeLocators: discarded when no group wants it", func(w *world) {
			w.found(r3)
			a := w.register("A", false, nil, loc(3), loc(4))
			w.must(nil, w.locators(a, rem, loc(3)))
			w.expect("A+r3", "A-r3")
		}},
		{"LD.4.1.1 removeLocators: kept while a group wants it", func(w *world) {
			w.found(r3)
			a := w.register("A", false, []string{"c"}, loc(3))
			w.must(nil, w.locators(a, rem, loc(3)))
			w.expect("A+r3")
		}},
		{"LD.4.1.1 setLocators: discards the old ones, discovers the new, in that order", func(w *world) {
			w.found(r2, r3)
			a := w.register("A", false, nil, loc(3))
			w.must(nil, w.locators(a, set, loc(2)))
			w.expect("A+r3", "A-r3", "A+r2")
		}},
		{"LD.4.1.1 discard of a lookup service not discovered: nothing", func(w *world) {
			w.found(r1, r3)
			a := w.register("A", false, []string{"a"})
			if ok, err := w.discard(a, r3.ID); ok || err != nil {
				t.Errorf("discard r3: %v %v, want false", ok, err)
			}
			if ok, err := w.discard(a, djinn.NewID()); ok || err != nil {
				t.Errorf("discard an unknown one: %v %v, want false", ok, err)
			}
			w.expect("A+r1")
		}},
		{"LD.4.1.1 discard: a discarded event, and the lookup service back only when found again", func(w *world) {
			w.found(r1)
			a := w.register("A", false, []string{"a"})
			b := w.register("B", false, []string{"a"})
			if ok, err := w.discard(a, r1.ID); !ok || err != nil {
				t.Fatalf("discard: %v %v", ok, err)
			}
			w.expect("A+r1", "B+r1", "A-r1")
			w.must(nil, w.groups(a, add, false, "b")) // still wanted, not found again yet
			w.expect()
			if got := w.registrars(b); !slices.Equal(got, []string{"r1"}) {
				t.Errorf("B, which did not discard, has %v, want r1", got)
			}
			w.found(r1)
			w.expect("A+r1")
		}},
		{"LD.4.1.1 discard by several before rediscovery: each its discarded event, each notified on rediscovery", func(w *world) {
			w.found(r1)
			a := w.register("A", false, []string{"a"})
			b := w.register("B", false, nil, loc(1))
			w.register("C", false, []string{"b"})
			w.must(w.discard(a, r1.ID))
			w.must(w.discard(b, r1.ID))
			w.expect("A+r1", "B+r1", "C+r1", "A-r1", "B-r1")
			w.found(r1)
			w.expect("A+r1", "B+r1")
		}},
		{"LD.3.2 a registration made between discard and rediscovery: notified on rediscovery", func(w *world) {
			w.found(r1)
			a := w.register("A", false, []string{"a"})
			w.must(w.discard(a, r1.ID))
			w.register("N", false, []string{"a"})
			w.expect("A+r1", "A-r1")
			w.found(r1)
			w.expect("A+r1", "N+r1")
		}},
		{"LD.4.1 lease ended: the registration is gone", func(w *world) {
			w.found(r1)
			a := w.register("A", false, []string{"a"})
			w.cancel(a)
			if !slices.Equal(w.ended, []djinn.ID{a}) {
				t.Errorf("ended hook heard %v", w.ended)
			}
			_, err := w.log.st.Registration(a)
			wantErr(t, err, djinn.NoSuchObject, "no such registration")
			_, err = w.log.st.Registrars(a)
			wantErr(t, err, djinn.NoSuchObject)
			wantErr(t, w.groups(a, add, false, "b"), djinn.NoSuchObject)
			wantErr(t, w.locators(a, add, loc(3)), djinn.NoSuchObject)
			_, err = w.discard(a, r1.ID)
			wantErr(t, err, djinn.NoSuchObject)
			w.found(reg(1, "a", "x"))
			w.expect("A+r1")
		}},
		{"table: a lost lookup service that no registration has is forgotten", func(w *world) {
			w.register("L", false, nil, loc(1))
			w.found(r1, r2)
			w.lost(r1, r2)
			if got := w.log.st.Known(); len(got) != 1 || got[0].ID != r1.ID {
				t.Errorf("table %v, want r1 alone (L keeps it)", got)
			}
			w.cancel(w.regNamed("L"))
			if got := w.log.st.Known(); len(got) != 0 {
				t.Errorf("table %v, want empty", got)
			}
			w.expect("L+r1")
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t)
			tt.run(w)
		})
	}
}

// regNamed returns the cookie of the registration named name.
func (w *world) regNamed(name string) djinn.ID {
	w.t.Helper()
	for id, n := range w.names {
		if n == name {
			return id
		}
	}
	w.t.Fatalf("no registration %s", name)
	return djinn.ID{}
}

// TestWanted: the union of the managed sets, and Changed only when it
// changes.
func TestWanted(t *testing.T) {
	w := newWorld(t)
	a := w.register("A", false, []string{"a", "b"}, loc(1))
	b := w.register("B", false, []string{"b"}, loc(1), loc(2))
	got := w.log.st.Wanted()
	if got.AllGroups || !slices.Equal(got.Groups, []string{"a", "b"}) || !slices.Equal(got.Locators, []string{loc(1), loc(2)}) {
		t.Fatalf("wanted %+v", got)
	}
	n, v := w.changes, got.Version
	w.must(nil, w.groups(a, rem, false, "b")) // b still wants b
	w.must(nil, w.locators(b, rem, loc(1)))   // a still wants loc(1)
	if w.changes != n || w.log.st.Wanted().Version != v {
		t.Errorf("a change that leaves the union alone: %d changes, version %d → %d", w.changes-n, v, w.log.st.Wanted().Version)
	}
	w.must(nil, w.groups(b, set, true))
	if got := w.log.st.Wanted(); !got.AllGroups || w.changes != n+1 {
		t.Errorf("all groups: %+v after %d changes", got, w.changes-n)
	}
	w.cancel(a)
	w.cancel(b)
	if got := w.log.st.Wanted(); got.AllGroups || len(got.Groups)+len(got.Locators) != 0 {
		t.Errorf("no registrations: wanted %+v", got)
	}
}

// TestBadInput: every bad argument is refused with an error naming it, and
// changes nothing.
func TestBadInput(t *testing.T) {
	long := strings.Repeat("g", 600)
	var many []string
	for i := range lds.MaxGroups + 1 {
		many = append(many, strings.Repeat("x", i%7)+string(rune('a'+i%26))+string(rune('a'+i/26)))
	}
	cookie := func(w *world) djinn.ID { return w.register("A", false, []string{"a"}) }
	for _, tt := range []struct {
		name  string
		run   func(w *world) error
		kind  djinn.Kind
		names []string
	}{
		{"LD.3.1 register without a listener", func(w *world) error {
			c := djinn.NewID()
			_, err := w.propose(&statepb.Command{Op: &statepb.Command_LdsRegister{LdsRegister: &statepb.LDSRegister{Cookie: c[:], ExpiresUnixNanos: 1 << 62}}})
			return err
		}, djinn.InvalidArgument, []string{"listener"}},
		{"LD.3.1 register with a bad locator", func(w *world) error {
			_, err := w.tryRegister(false, nil, loc(1), "http://h:1")
			return err
		}, djinn.InvalidArgument, []string{"locators", "http://h:1"}},
		{"LD.3.1 register with a group too long for a packet", func(w *world) error {
			_, err := w.tryRegister(false, []string{long})
			return err
		}, djinn.InvalidArgument, []string{"groups", "ggg"}},
		{"register with too many groups", func(w *world) error {
			_, err := w.tryRegister(false, many)
			return err
		}, djinn.ResourceExhausted, []string{"257 groups", "256"}},
		{"register with all groups and groups", func(w *world) error {
			_, err := w.tryRegister(true, []string{"a"})
			return err
		}, djinn.InvalidArgument, []string{`"a"`, "all groups"}},
		{"addGroups beyond the bound", func(w *world) error { return w.groups(cookie(w), add, false, many[1:]...) }, djinn.ResourceExhausted, []string{"257 groups"}},
		{"all groups with add", func(w *world) error { return w.groups(cookie(w), add, true) }, djinn.InvalidArgument, []string{"add groups", "all groups"}},
		{"all groups with names", func(w *world) error { return w.groups(cookie(w), set, true, "a") }, djinn.InvalidArgument, []string{"set groups"}},
		{"no groups operation", func(w *world) error { return w.groups(cookie(w), 0, false, "a") }, djinn.InvalidArgument, []string{"groups operation 0"}},
		{"an unknown locators operation", func(w *world) error { return w.locators(cookie(w), 9, loc(1)) }, djinn.InvalidArgument, []string{"locators operation 9"}},
		{"addLocators with a bad one", func(w *world) error { return w.locators(cookie(w), add, "jini://") }, djinn.InvalidArgument, []string{"jini://"}},
		{"a short registration cookie", func(w *world) error {
			_, err := w.propose(&statepb.Command{Op: &statepb.Command_LdsGroups{LdsGroups: &statepb.LDSGroups{Cookie: []byte{1, 2, 3}, Op: add}}})
			return err
		}, djinn.InvalidArgument, []string{"cookie", "3 bytes"}},
		{"discard without a lookup service", func(w *world) error {
			c := cookie(w)
			_, err := w.propose(&statepb.Command{Op: &statepb.Command_LdsDiscard{LdsDiscard: &statepb.LDSDiscard{Cookie: c[:]}}})
			return err
		}, djinn.InvalidArgument, []string{"registrar service id: missing"}},
		{"found: a short service id", func(w *world) error {
			_, err := w.propose(&statepb.Command{Op: &statepb.Command_LdsFound{LdsFound: &statepb.LDSFound{Registrars: []*djinnpb.DiscoveredRegistrar{reg(1).Proto(), {ServiceId: []byte{7}}}}}})
			return err
		}, djinn.InvalidArgument, []string{"service id", "1 bytes"}},
		{"found: a zero service id", func(w *world) error {
			r := reg(1)
			r.ID = djinn.ID{}
			_, err := w.propose(&statepb.Command{Op: &statepb.Command_LdsFound{LdsFound: &statepb.LDSFound{Registrars: []*djinnpb.DiscoveredRegistrar{r.Proto()}}}})
			return err
		}, djinn.InvalidArgument, []string{"zero"}},
		{"found: a bad locator", func(w *world) error {
			r := reg(1)
			r.Locator = "jini://a b/"
			_, err := w.propose(&statepb.Command{Op: &statepb.Command_LdsFound{LdsFound: &statepb.LDSFound{Registrars: []*djinnpb.DiscoveredRegistrar{r.Proto()}}}})
			return err
		}, djinn.InvalidArgument, []string{"jini://a b/"}},
		{"found: a bad endpoint", func(w *world) error {
			r := reg(1)
			r.Endpoint = "nowhere"
			_, err := w.propose(&statepb.Command{Op: &statepb.Command_LdsFound{LdsFound: &statepb.LDSFound{Registrars: []*djinnpb.DiscoveredRegistrar{r.Proto()}}}})
			return err
		}, djinn.InvalidArgument, []string{"nowhere"}},
		{"lost: a short service id", func(w *world) error {
			_, err := w.propose(&statepb.Command{Op: &statepb.Command_LdsLost{LdsLost: &statepb.LDSLost{ServiceIds: [][]byte{{1}}}}})
			return err
		}, djinn.InvalidArgument, []string{"lost registrar service id"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t)
			w.found(reg(1, "a"))
			err := tt.run(w)
			wantErr(t, err, tt.kind, tt.names...)
			// Nothing changed: the one registration the row may have made
			// still has r1 and its sets.
			for id, n := range w.names {
				if n != "A" {
					continue
				}
				info, err := w.log.st.Registration(id)
				if err != nil || info.AllGroups || !slices.Equal(info.Groups, []string{"a"}) || len(info.Locators) != 0 || !slices.Equal(w.registrars(id), []string{"r1"}) {
					t.Errorf("after the refused call: %+v %v, registrars %v", info, err, w.registrars(id))
				}
			}
			if got := w.log.st.Known(); len(got) != 1 || got[0].ID != reg(1).ID {
				t.Errorf("table after the refused call: %v", got)
			}
		})
	}
}

// TestCheckGroups: a group must be text (the log could not even carry
// one that is not); the public group "" is a group.
func TestCheckGroups(t *testing.T) {
	_, err := lds.CheckGroups("groups", []string{"ok", "a\xff"}, lds.MaxGroups)
	wantErr(t, err, djinn.InvalidArgument, "groups", `a\xff`)
	got, err := lds.CheckGroups("groups", []string{"b", "", "b"}, lds.MaxGroups)
	if err != nil || !slices.Equal(got, []string{"", "b"}) {
		t.Errorf("CheckGroups: %q %v", got, err)
	}
}
