package lookup_test

import (
	"reflect"
	"testing"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/lookup"
	"github.com/djinn-go/djinn/service"
)

func equalSnapshots(a, b lookup.Snapshot) bool { return reflect.DeepEqual(a, b) }

// populated is a registry with items of every shape and watches in every
// bucket of the watch index.
func populated(t *testing.T) *lookup.Registry {
	r := browsing(t)
	for i, shape := range watchShapes {
		if err := r.AddWatch(wid(byte(i+1)), shape.tmpl, service.Transition(i%7+1)); err != nil {
			t.Fatal(err)
		}
	}
	tmpl := service.Template{Types: []string{"b", "a", "b"}, Entries: []service.EntryTemplate{{Type: "E", Fields: []service.Field{f("z", null), f("y", str("1")), f("x", i64(1))}}}}
	if err := r.AddWatch(wid(9), tmpl, service.MatchMatch); err != nil {
		t.Fatal(err)
	}
	if err := r.AddWatch(wid(8), service.Template{}, service.NoMatchMatch); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestExportImport: export, import and export again gives the same
// snapshot, and the imported registry goes on answering and telling events
// exactly as the original.
func TestExportImport(t *testing.T) {
	a := populated(t)
	snap := a.Export()
	if len(snap.Registrations) != 3 || len(snap.Watches) != 6 {
		t.Fatalf("snapshot of %d registrations, %d watches", len(snap.Registrations), len(snap.Watches))
	}
	// Stored form: the watch's template lost its wildcard and got sorted.
	w9 := snap.Watches[len(snap.Watches)-1]
	want9 := service.Template{Types: []string{"a", "b"}, Entries: []service.EntryTemplate{{Type: "E", Fields: []service.Field{f("x", i64(1)), f("y", str("1"))}}}}
	if w9.ID != wid(9) || !reflect.DeepEqual(w9.Template, want9) || w9.Transitions != service.MatchMatch {
		t.Fatalf("watch 9 exported as %+v", w9)
	}
	b := newRegistry(t, service.Limits{})
	ok(t)(b.Register(printer(), lid(7))) // replaced by the import
	if err := b.Import(snap); err != nil {
		t.Fatal(err)
	}
	if !equalSnapshots(b.Export(), snap) {
		t.Fatalf("export after import differs:\n%+v\n%+v", b.Export(), snap)
	}
	// Behaviour continues identically.
	ops := []func(r *lookup.Registry) ([]lookup.Event, error){
		func(r *lookup.Registry) ([]lookup.Event, error) { return r.Register(onFloor(4), lid(1)) },
		func(r *lookup.Registry) ([]lookup.Event, error) { return r.Register(onFloor(3), lid(1)) },
		func(r *lookup.Registry) ([]lookup.Event, error) {
			return r.AddAttributes(sid(2), []service.Entry{address})
		},
		func(r *lookup.Registry) ([]lookup.Event, error) {
			return r.ModifyAttributes(sid(1), []service.EntryTemplate{{Type: "Location"}}, []service.Entry{{}})
		},
		func(r *lookup.Registry) ([]lookup.Event, error) { return r.SetAttributes(sid(3), nil) },
		func(r *lookup.Registry) ([]lookup.Event, error) { return r.Remove(sid(2)) },
		func(r *lookup.Registry) ([]lookup.Event, error) { return r.Remove(sid(2)) },
	}
	for i, op := range ops {
		ea, erra := op(a)
		eb, errb := op(b)
		if !reflect.DeepEqual(ea, eb) || djinn.KindOf(erra) != djinn.KindOf(errb) {
			t.Fatalf("op %d: %+v %v, imported: %+v %v", i, ea, erra, eb, errb)
		}
	}
	ta, ia, _ := a.Lookup(service.Template{}, 10)
	tb, ib, _ := b.Lookup(service.Template{}, 10)
	if ta != tb || !reflect.DeepEqual(ia, ib) || !equalSnapshots(a.Export(), b.Export()) {
		t.Fatal("the registries diverged")
	}
	// An empty registry exports and imports too.
	e := newRegistry(t, service.Limits{})
	if err := b.Import(e.Export()); err != nil {
		t.Fatal(err)
	}
	if n, w := b.Len(); n != 0 || w != 0 {
		t.Fatalf("%d items, %d watches after importing an empty snapshot", n, w)
	}
}

// TestImportRefuses: a bad snapshot names what is wrong and leaves the
// registry as it was. Limits are not checked: a snapshot may come from a
// registry with larger ones.
func TestImportRefuses(t *testing.T) {
	good := populated(t).Export()
	for _, c := range []struct {
		name  string
		edit  func(s *lookup.Snapshot)
		names []string
	}{
		{"a service id twice", func(s *lookup.Snapshot) { s.Registrations[1].Item.ID = s.Registrations[0].Item.ID }, []string{"registration 1", "twice"}},
		{"a zero lease", func(s *lookup.Snapshot) { s.Registrations[2].Lease = djinn.ID{} }, []string{"registration 2", "lease id"}},
		{"the registrar's own id", func(s *lookup.Snapshot) { s.Registrations[0].Item.ID = self }, []string{"registration 0", "own id"}},
		{"a bad entry", func(s *lookup.Snapshot) { s.Registrations[0].Item.Entries[0].Type = "" }, []string{"registration 0", "type"}},
		{"a watch id twice", func(s *lookup.Snapshot) { s.Watches[1].ID = s.Watches[0].ID }, []string{"watch 1", "in use"}},
		{"a watch without transitions", func(s *lookup.Snapshot) { s.Watches[0].Transitions = 0 }, []string{"watch 0", "transitions"}},
		{"a bad watch template", func(s *lookup.Snapshot) { s.Watches[0].Template.Types = []string{""} }, []string{"watch 0", "types[0]"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := populated(t)
			before := r.Export()
			bad := r.Export()
			c.edit(&bad)
			wantErr(t, r.Import(bad), djinn.InvalidArgument, append(c.names, "snapshot")...)
			if !equalSnapshots(r.Export(), before) {
				t.Fatal("a refused import changed the registry")
			}
		})
	}
	// Larger than this registry's limits is fine.
	small := newRegistry(t, service.Limits{MaxEntries: 1, MaxTypes: 1})
	if err := small.Import(good); err != nil {
		t.Fatal(err)
	}
	if !equalSnapshots(small.Export(), good) {
		t.Fatal("import under small limits changed the state")
	}
}
