package lookup_test

import (
	"bytes"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/lookup"
	"github.com/djinn-go/djinn/service"
	"pgregory.net/rapid"
)

// The model is DESIGN.md 6 written out by brute force over the public
// types: no indexes, every watch checked on every change. The property
// test runs random calls against it and the registry and requires the
// same results, errors (by kind), events and state.

type model struct {
	items   map[djinn.ID]lookup.Registration // canonical items
	watches map[djinn.ID]mWatch
}

type mWatch struct {
	tmpl service.Template
	mask service.Transition
}

func newModel() *model {
	return &model{items: map[djinn.ID]lookup.Registration{}, watches: map[djinn.ID]mWatch{}}
}

func errKind(k djinn.Kind) error { return djinn.Errorf(k, "model") }

// Canonical forms: what the registry stores.

func mCanonEntry(e service.Entry) service.Entry {
	out := service.Entry{Type: e.Type}
	if len(e.Supertypes) > 0 {
		out.Supertypes = slices.Clone(e.Supertypes)
	}
	out.Fields = append(out.Fields, e.Fields...)
	slices.SortFunc(out.Fields, func(a, b service.Field) int { return strings.Compare(a.Name, b.Name) })
	return out
}

func mCanonEntries(es []service.Entry) []service.Entry {
	var out []service.Entry
	for _, e := range es {
		c := mCanonEntry(e)
		if !slices.ContainsFunc(out, func(o service.Entry) bool { return reflect.DeepEqual(o, c) }) {
			out = append(out, c)
		}
	}
	return out
}

func mCanonItem(it service.Item) service.Item {
	out := service.Item{ID: it.ID, Service: slices.Clone(it.Service), Entries: mCanonEntries(it.Entries)}
	var types []string
	for todo := slices.Clone(it.Types); len(todo) > 0; todo = todo[1:] { // with the types the hierarchy adds
		if !slices.Contains(types, todo[0]) {
			types = append(types, todo[0])
			todo = append(todo, it.Supertypes[todo[0]]...)
		}
	}
	slices.Sort(types)
	if len(types) > 0 {
		out.Types = types
	}
	for ty, sup := range it.Supertypes {
		if len(sup) > 0 {
			if out.Supertypes == nil {
				out.Supertypes = map[string][]string{}
			}
			out.Supertypes[ty] = slices.Compact(slices.Sorted(slices.Values(sup)))
		}
	}
	return out
}

// Matching.

func mIs(e service.Entry, typ string) bool {
	return e.Type == typ || slices.Contains(e.Supertypes, typ)
}

func mEntryMatches(et service.EntryTemplate, e service.Entry) bool {
	if !mIs(e, et.Type) {
		return false
	}
	for _, tf := range et.Fields {
		if tf.Value.IsNull() {
			continue
		}
		i := slices.IndexFunc(e.Fields, func(fl service.Field) bool { return fl.Name == tf.Name })
		if i < 0 || e.Fields[i].Value != tf.Value {
			return false
		}
	}
	return true
}

func mMatches(t service.Template, it service.Item) bool {
	if t.ID != nil && *t.ID != it.ID {
		return false
	}
	for _, ty := range t.Types {
		if !slices.Contains(it.Types, ty) {
			return false
		}
	}
	for _, et := range t.Entries {
		if !slices.ContainsFunc(it.Entries, func(e service.Entry) bool { return mEntryMatches(et, e) }) {
			return false
		}
	}
	return true
}

// events is every watch's transition from pre to post (nil: absent).
func (m *model) events(pre, post *service.Item) []lookup.Event {
	var out []lookup.Event
	for _, id := range sortedIDs(m.watches) {
		w := m.watches[id]
		before := pre != nil && mMatches(w.tmpl, *pre)
		after := post != nil && mMatches(w.tmpl, *post)
		var tr service.Transition
		switch {
		case before && after:
			tr = service.MatchMatch
		case before:
			tr = service.MatchNoMatch
		case after:
			tr = service.NoMatchMatch
		}
		if tr&w.mask == 0 {
			continue
		}
		ev := lookup.Event{Watch: id, Transition: tr, Item: post}
		if pre != nil {
			ev.ServiceID = pre.ID
		} else {
			ev.ServiceID = post.ID
		}
		out = append(out, ev)
	}
	return out
}

func sortedIDs[V any](m map[djinn.ID]V) []djinn.ID {
	ids := make([]djinn.ID, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b djinn.ID) int { return bytes.Compare(a[:], b[:]) })
	return ids
}

// Calls.

func (m *model) register(it service.Item, lease djinn.ID) []lookup.Event {
	post := mCanonItem(it)
	var pre *service.Item
	if old, ok := m.items[it.ID]; ok {
		pre = &old.Item
	}
	m.items[it.ID] = lookup.Registration{Item: post, Lease: lease}
	return m.events(pre, &post)
}

func (m *model) remove(id djinn.ID) ([]lookup.Event, error) {
	old, ok := m.items[id]
	if !ok {
		return nil, errKind(djinn.NoSuchObject)
	}
	delete(m.items, id)
	return m.events(&old.Item, nil), nil
}

func (m *model) setEntries(id djinn.ID, es []service.Entry) []lookup.Event {
	old := m.items[id]
	if reflect.DeepEqual(old.Item.Entries, es) {
		return nil
	}
	post := old.Item
	post.Entries = es
	m.items[id] = lookup.Registration{Item: post, Lease: old.Lease}
	return m.events(&old.Item, &post)
}

func (m *model) addAttributes(id djinn.ID, es []service.Entry) ([]lookup.Event, error) {
	old, ok := m.items[id]
	if !ok {
		return nil, errKind(djinn.NoSuchObject)
	}
	return m.setEntries(id, mCanonEntries(append(slices.Clone(old.Item.Entries), es...))), nil
}

func (m *model) setAttributes(id djinn.ID, es []service.Entry) ([]lookup.Event, error) {
	if _, ok := m.items[id]; !ok {
		return nil, errKind(djinn.NoSuchObject)
	}
	return m.setEntries(id, mCanonEntries(es)), nil
}

func (m *model) modifyAttributes(id djinn.ID, tmpls []service.EntryTemplate, changes []service.Entry) ([]lookup.Event, error) {
	old, ok := m.items[id]
	if !ok {
		return nil, errKind(djinn.NoSuchObject)
	}
	if len(tmpls) != len(changes) {
		return nil, errKind(djinn.InvalidArgument)
	}
	isDelete := func(c service.Entry) bool { return c.Type == "" }
	for i, c := range changes {
		if isDelete(c) || c.Type == tmpls[i].Type {
			continue
		}
		for _, e := range old.Item.Entries {
			chain := append([]string{e.Type}, e.Supertypes...)
			if at := slices.Index(chain, tmpls[i].Type); at >= 0 && !slices.Contains(chain[at+1:], c.Type) {
				return nil, errKind(djinn.InvalidArgument)
			}
		}
	}
	var out []service.Entry
	for _, e := range old.Item.Entries {
		deleted := false
		ne := mCanonEntry(e)
		for i, t := range tmpls {
			if !mEntryMatches(t, e) {
				continue
			}
			if isDelete(changes[i]) {
				deleted = true
				break
			}
			for _, cf := range changes[i].Fields {
				if cf.Value.IsNull() {
					continue
				}
				if j := slices.IndexFunc(ne.Fields, func(fl service.Field) bool { return fl.Name == cf.Name }); j >= 0 {
					ne.Fields[j].Value = cf.Value
				} else {
					ne.Fields = append(ne.Fields, cf)
				}
			}
		}
		if !deleted {
			out = append(out, mCanonEntry(ne))
		}
	}
	return m.setEntries(id, mCanonEntries(out)), nil
}

func (m *model) addWatch(id djinn.ID, tmpl service.Template, mask service.Transition) error {
	if mask == 0 || mask&^service.AllTransitions != 0 {
		return errKind(djinn.InvalidArgument)
	}
	if _, ok := m.watches[id]; ok {
		return errKind(djinn.InvalidArgument)
	}
	m.watches[id] = mWatch{tmpl: tmpl, mask: mask}
	return nil
}

func (m *model) removeWatch(id djinn.ID) error {
	if _, ok := m.watches[id]; !ok {
		return errKind(djinn.NoSuchObject)
	}
	delete(m.watches, id)
	return nil
}

// matching returns the items tmpl matches, by id.
func (m *model) matching(tmpl service.Template) []service.Item {
	var out []service.Item
	for _, id := range sortedIDs(m.items) {
		if it := m.items[id].Item; mMatches(tmpl, it) {
			out = append(out, it)
		}
	}
	return out
}

func (m *model) entryTypes(tmpl service.Template) []service.EntryType {
	var out []service.EntryType
	for _, it := range m.matching(tmpl) {
		for _, e := range it.Entries {
			et := service.EntryType{Type: e.Type, Supertypes: e.Supertypes}
			if !slices.ContainsFunc(out, func(o service.EntryType) bool { return reflect.DeepEqual(o, et) }) {
				out = append(out, et)
			}
		}
	}
	slices.SortFunc(out, func(a, b service.EntryType) int {
		return slices.Compare(append([]string{a.Type}, a.Supertypes...), append([]string{b.Type}, b.Supertypes...))
	})
	return out
}

func (m *model) fieldValues(tmpl service.Template, set int, field string) []service.Value {
	var out []service.Value
	for _, it := range m.matching(tmpl) {
		for _, e := range it.Entries {
			if !mEntryMatches(tmpl.Entries[set], e) {
				continue
			}
			i := slices.IndexFunc(e.Fields, func(fl service.Field) bool { return fl.Name == field })
			if i < 0 {
				continue
			}
			v := e.Fields[i].Value
			if !slices.Contains(out, v) {
				out = append(out, v)
			}
		}
	}
	slices.SortFunc(out, service.Value.Compare)
	return out
}

func (m *model) serviceTypes(tmpl service.Template, prefix string) []string {
	var out []string
	for _, it := range m.matching(tmpl) {
		// Jini's getServiceTypes: from each most specific type, the first
		// types up the hierarchy with the prefix, stopping at a template
		// type or a supertype of one.
		var walk func(ty string)
		walk = func(ty string) {
			for _, b := range tmpl.Types {
				if mSupertypeOf(it, ty, b) {
					return
				}
			}
			if strings.HasPrefix(ty, prefix) {
				if !slices.Contains(out, ty) {
					out = append(out, ty)
				}
				return
			}
			for _, s := range it.Supertypes[ty] {
				walk(s)
			}
		}
		for _, ty := range it.Types {
			if !slices.ContainsFunc(it.Types, func(o string) bool { return slices.Contains(it.Supertypes[o], ty) }) {
				walk(ty)
			}
		}
	}
	slices.Sort(out)
	return out
}

func (m *model) snapshot() lookup.Snapshot {
	var s lookup.Snapshot
	for _, id := range sortedIDs(m.items) {
		s.Registrations = append(s.Registrations, m.items[id])
	}
	return s
}

// Generators: small universes, so that ids, types, values and templates
// collide often.

var (
	mServiceTypes = []string{"S1", "S2", "S3"}
	// mChains are entry types with their supertypes; "Name" is declared
	// two ways, as clients may.
	mChains = [][]string{{"E"}, {"Name", "E"}, {"ColorName", "Name", "E"}, {"Loc", "E"}, {"Name", "Other"}}
	mFields = []string{"a", "b", "c"}
	mValues = []service.Value{{}, service.NewString("x"), service.NewString("y"), service.NewInt(1), service.NewInt(2),
		service.NewFloat(math.NaN()), service.NewBool(true)}
	mTypeNames = []string{"E", "Name", "ColorName", "Loc", "Other"}
)

// ids is how many service, watch and lease ids the current run draws
// from.
var ids = 4

func drawID(t *rapid.T, label string, mk func(byte) djinn.ID) djinn.ID {
	return mk(byte(rapid.IntRange(1, ids).Draw(t, label)))
}

func drawFields(t *rapid.T, label string) []service.Field {
	var out []service.Field
	for _, name := range rapid.SliceOfDistinct(rapid.SampledFrom(mFields), rapid.ID[string]).Draw(t, label) {
		out = append(out, service.Field{Name: name, Value: rapid.SampledFrom(mValues).Draw(t, label+"-value")})
	}
	return out
}

func drawEntry(t *rapid.T, label string) service.Entry {
	c := rapid.SampledFrom(mChains).Draw(t, label)
	e := service.Entry{Type: c[0], Fields: drawFields(t, label+"-fields")}
	if len(c) > 1 {
		e.Supertypes = c[1:]
	}
	return e
}

func drawEntries(t *rapid.T, label string) []service.Entry {
	n := rapid.IntRange(0, 4).Draw(t, label)
	var out []service.Entry
	for i := range n {
		out = append(out, drawEntry(t, fmt.Sprintf("%s-%d", label, i)))
	}
	return out
}

func drawEntryTemplate(t *rapid.T, label string) service.EntryTemplate {
	return service.EntryTemplate{Type: rapid.SampledFrom(mTypeNames).Draw(t, label), Fields: drawFields(t, label+"-fields")}
}

func drawTemplate(t *rapid.T, label string) service.Template {
	var tmpl service.Template
	if rapid.IntRange(0, 4).Draw(t, label+"-has-id") == 0 {
		id := drawID(t, label+"-id", sid)
		tmpl.ID = &id
	}
	tmpl.Types = rapid.SliceOfN(rapid.SampledFrom(mServiceTypes), 0, 2).Draw(t, label+"-types")
	for i := range rapid.IntRange(0, 2).Draw(t, label+"-entries") {
		tmpl.Entries = append(tmpl.Entries, drawEntryTemplate(t, fmt.Sprintf("%s-entry-%d", label, i)))
	}
	return tmpl
}

func drawItem(t *rapid.T) service.Item {
	it := service.Item{
		ID:      drawID(t, "id", sid),
		Service: []byte{byte(rapid.IntRange(0, 2).Draw(t, "ref"))},
		Types:   rapid.SliceOfN(rapid.SampledFrom(mServiceTypes), 0, 3).Draw(t, "types"),
		Entries: drawEntries(t, "entries"),
	}
	// A hierarchy of some of the links S1 < S2, S1 < S3, S2 < S3 (none,
	// often: the item lists its types flat) whose types the item has.
	for _, l := range rapid.SliceOfDistinct(rapid.SampledFrom([][2]string{{"S1", "S2"}, {"S1", "S3"}, {"S2", "S3"}}), func(l [2]string) string { return l[0] + l[1] }).Draw(t, "links") {
		if slices.Contains(mCanonItem(it).Types, l[0]) {
			if it.Supertypes == nil {
				it.Supertypes = map[string][]string{}
			}
			it.Supertypes[l[0]] = append(it.Supertypes[l[0]], l[1])
		}
	}
	return it
}

// mSupertypeOf reports whether s is t or, by it's hierarchy, a supertype
// of t.
func mSupertypeOf(it service.Item, s, t string) bool {
	return s == t || slices.ContainsFunc(it.Supertypes[t], func(u string) bool { return mSupertypeOf(it, s, u) })
}

// storedTemplate is a template as the registry stores and exports it.
func storedTemplate(tmpl service.Template) service.Template {
	out := service.Template{ID: tmpl.ID}
	if len(tmpl.Types) > 0 {
		out.Types = slices.Compact(slices.Sorted(slices.Values(tmpl.Types)))
	}
	for _, et := range tmpl.Entries {
		st := service.EntryTemplate{Type: et.Type}
		for _, fl := range et.Fields {
			if !fl.Value.IsNull() {
				st.Fields = append(st.Fields, fl)
			}
		}
		slices.SortFunc(st.Fields, func(a, b service.Field) int { return strings.Compare(a.Name, b.Name) })
		out.Entries = append(out.Entries, st)
	}
	return out
}

func sameErr(t *rapid.T, what string, got, want error) {
	if djinn.KindOf(got) != djinn.KindOf(want) {
		t.Fatalf("%s: error %v, model says %v", what, got, want)
	}
}

func sameEvents(t *rapid.T, what string, got, want []lookup.Event) {
	if len(got) == 0 && len(want) == 0 {
		return
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s: events\n%s\nmodel says\n%s", what, showEvents(got), showEvents(want))
	}
}

func showEvents(evs []lookup.Event) string {
	var b strings.Builder
	for _, ev := range evs {
		fmt.Fprintf(&b, "  watch %x service %x %s item %+v\n", ev.Watch[:2], ev.ServiceID[:2], ev.Transition, ev.Item)
	}
	return b.String()
}

// TestAgainstModel: random registrations, attribute changes, removals,
// watches, lookups, browsing and snapshot round trips give what the
// brute-force model gives: zero divergences.
func TestAgainstModel(t *testing.T) {
	for _, u := range []struct {
		name       string
		ids, steps int
	}{{"crowded", 3, 40}, {"few", 4, 80}, {"many", 10, 150}} {
		t.Run(u.name, func(t *testing.T) {
			ids = u.ids
			rapid.Check(t, modelRun(u.steps))
		})
	}
}

func modelRun(maxSteps int) func(*rapid.T) {
	return func(t *rapid.T) {
		r, err := lookup.New(self, service.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		m := newModel()
		steps := rapid.IntRange(1, maxSteps).Draw(t, "steps")
		for step := range steps {
			switch op := rapid.IntRange(0, 11).Draw(t, "op"); op {
			case 0, 1:
				it := drawItem(t)
				lease := drawID(t, "lease", lid)
				got, err := r.Register(it, lease)
				if err != nil {
					t.Fatalf("register %+v: %v", it, err)
				}
				sameEvents(t, "register", got, m.register(it, lease))
			case 2:
				id := drawID(t, "id", sid)
				got, err := r.Remove(id)
				want, werr := m.remove(id)
				sameErr(t, "remove", err, werr)
				sameEvents(t, "remove", got, want)
			case 3:
				id, es := drawID(t, "id", sid), drawEntries(t, "add")
				got, err := r.AddAttributes(id, es)
				want, werr := m.addAttributes(id, es)
				sameErr(t, "add attributes", err, werr)
				sameEvents(t, "add attributes", got, want)
			case 4:
				id, es := drawID(t, "id", sid), drawEntries(t, "set")
				got, err := r.SetAttributes(id, es)
				want, werr := m.setAttributes(id, es)
				sameErr(t, "set attributes", err, werr)
				sameEvents(t, "set attributes", got, want)
			case 5, 6:
				id := drawID(t, "id", sid)
				n := rapid.IntRange(0, 3).Draw(t, "modify-n")
				var tmpls []service.EntryTemplate
				var changes []service.Entry
				for i := range n {
					tmpls = append(tmpls, drawEntryTemplate(t, fmt.Sprintf("modify-tmpl-%d", i)))
					if rapid.IntRange(0, 3).Draw(t, "delete") == 0 {
						changes = append(changes, service.Entry{})
					} else {
						changes = append(changes, drawEntry(t, fmt.Sprintf("modify-change-%d", i)))
					}
				}
				if rapid.IntRange(0, 20).Draw(t, "mismatch") == 0 {
					changes = append(changes, service.Entry{})
				}
				got, err := r.ModifyAttributes(id, tmpls, changes)
				want, werr := m.modifyAttributes(id, tmpls, changes)
				sameErr(t, "modify attributes", err, werr)
				sameEvents(t, "modify attributes", got, want)
			case 7:
				id, tmpl := drawID(t, "watch", wid), drawTemplate(t, "watch-tmpl")
				mask := service.Transition(rapid.IntRange(0, 8).Draw(t, "mask"))
				sameErr(t, "add watch", r.AddWatch(id, tmpl, mask), m.addWatch(id, storedTemplate(tmpl), mask))
			case 8:
				id := drawID(t, "watch", wid)
				sameErr(t, "remove watch", r.RemoveWatch(id), m.removeWatch(id))
			case 9:
				tmpl := drawTemplate(t, "lookup")
				max := rapid.IntRange(0, 5).Draw(t, "max")
				total, items, err := r.Lookup(tmpl, max)
				if err != nil {
					t.Fatal(err)
				}
				all := m.matching(tmpl)
				want := all[:min(max, len(all))]
				if total != len(all) || len(items) != len(want) || (len(want) > 0 && !reflect.DeepEqual(items, want)) {
					t.Fatalf("lookup %+v max %d: %d %+v, model says %d %+v", tmpl, max, total, items, len(all), want)
				}
			case 10:
				tmpl := drawTemplate(t, "browse")
				ets, err := r.EntryTypes(tmpl)
				if err != nil {
					t.Fatal(err)
				}
				if want := m.entryTypes(tmpl); !reflect.DeepEqual(ets, want) {
					t.Fatalf("entry types %+v: %+v, model says %+v", tmpl, ets, want)
				}
				prefix := rapid.SampledFrom([]string{"", "S", "S2", "X"}).Draw(t, "prefix")
				sts, err := r.ServiceTypes(tmpl, prefix)
				if err != nil {
					t.Fatal(err)
				}
				if want := m.serviceTypes(tmpl, prefix); !reflect.DeepEqual(sts, want) {
					t.Fatalf("service types %+v %q: %v, model says %v", tmpl, prefix, sts, want)
				}
				if len(tmpl.Entries) > 0 {
					set := rapid.IntRange(0, len(tmpl.Entries)-1).Draw(t, "set")
					field := rapid.SampledFrom(mFields).Draw(t, "field")
					vals, err := r.FieldValues(tmpl, set, field)
					if err != nil {
						t.Fatal(err)
					}
					if want := m.fieldValues(tmpl, set, field); !reflect.DeepEqual(vals, want) {
						t.Fatalf("field values %+v %d %q: %v, model says %v", tmpl, set, field, vals, want)
					}
				}
			case 11:
				snap := r.Export()
				n, err := lookup.New(self, service.Limits{})
				if err != nil {
					t.Fatal(err)
				}
				if err := n.Import(snap); err != nil {
					t.Fatalf("import: %v", err)
				}
				if again := n.Export(); !reflect.DeepEqual(again, snap) {
					t.Fatalf("export, import, export differs")
				}
				r = n
			}
			// The state matches the model's after every step.
			snap := r.Export()
			want := m.snapshot()
			if !reflect.DeepEqual(snap.Registrations, want.Registrations) {
				t.Fatalf("step %d: registrations\n%+v\nmodel says\n%+v", step, snap.Registrations, want.Registrations)
			}
			if len(snap.Watches) != len(m.watches) {
				t.Fatalf("step %d: %d watches, model has %d", step, len(snap.Watches), len(m.watches))
			}
			for _, w := range snap.Watches {
				mw := m.watches[w.ID]
				if !reflect.DeepEqual(w.Template, mw.tmpl) || w.Transitions != mw.mask {
					t.Fatalf("step %d: watch %s: %+v, model says %+v", step, w.ID, w, mw)
				}
			}
		}
	}
}
