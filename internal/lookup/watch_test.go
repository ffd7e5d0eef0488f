package lookup_test

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/lookup"
	"github.com/djinn-go/djinn/service"
)

// floor3 is an entry template the transition tests turn on and off.
var floor3 = service.EntryTemplate{Type: "Location", Fields: []service.Field{f("floor", i64(3))}}

// watchShapes are templates that mean the same for the printer (it has
// Location floor 3) but sit in different buckets of the watch index: by
// id, by service type, by entry type, by an entry supertype.
var watchShapes = []struct {
	name string
	tmpl service.Template
}{
	{"by id", service.Template{ID: idp(sid(1)), Entries: []service.EntryTemplate{floor3}}},
	{"by type", service.Template{Types: []string{"Printer"}, Entries: []service.EntryTemplate{floor3}}},
	{"by entry type", service.Template{Entries: []service.EntryTemplate{floor3}}},
	{"by entry supertype", service.Template{Entries: []service.EntryTemplate{{Type: "Entry", Fields: floor3.Fields}}}},
}

func onFloor(n int64) service.Item {
	it := printer()
	it.Entries[1].Fields[0] = f("floor", i64(n))
	return it
}

// TestTransitions: every transition case of notify (DESIGN.md 6, Reggie's
// generateEvent), for every shape of watch and with masks that include
// and exclude the transition.
func TestTransitions(t *testing.T) {
	type op func(r *lookup.Registry) ([]lookup.Event, error)
	reg := func(it service.Item) op {
		return func(r *lookup.Registry) ([]lookup.Event, error) { return r.Register(it, lid(5)) }
	}
	withAddress := printer()
	withAddress.Entries = append(withAddress.Entries, address)
	for _, c := range []struct {
		name    string
		initial *service.Item
		op      op
		want    service.Transition // 0: no event
		removed bool               // the event carries no item
	}{
		{"6/registered, matching: nomatch-match", nil, reg(onFloor(3)), service.NoMatchMatch, false},
		{"6/registered, not matching: nothing", nil, reg(onFloor(4)), 0, false},
		{"6/registered again, identical: match-match", new(onFloor(3)), reg(onFloor(3)), service.MatchMatch, false},
		{"6/registered again, changed, matching: match-match", new(onFloor(3)), reg(withAddress), service.MatchMatch, false},
		{"6/registered again, stops matching: match-nomatch with the item", new(onFloor(3)), reg(onFloor(4)), service.MatchNoMatch, false},
		{"6/registered again, starts matching: nomatch-match", new(onFloor(4)), reg(onFloor(3)), service.NoMatchMatch, false},
		{"6/registered again, matching neither: nothing", new(onFloor(4)), reg(onFloor(5)), 0, false},
		{"6/removed, matching: match-nomatch without an item", new(onFloor(3)), func(r *lookup.Registry) ([]lookup.Event, error) { return r.Remove(sid(1)) }, service.MatchNoMatch, true},
		{"6/removed, not matching: nothing", new(onFloor(4)), func(r *lookup.Registry) ([]lookup.Event, error) { return r.Remove(sid(1)) }, 0, false},
		{"6/attributes added, matching: match-match", new(onFloor(3)), func(r *lookup.Registry) ([]lookup.Event, error) {
			return r.AddAttributes(sid(1), []service.Entry{address})
		}, service.MatchMatch, false},
		{"6/attributes added, no change: nothing", new(onFloor(3)), func(r *lookup.Registry) ([]lookup.Event, error) {
			return r.AddAttributes(sid(1), []service.Entry{location})
		}, 0, false},
		{"6/attributes modified, stops matching: match-nomatch with the item", new(onFloor(3)), func(r *lookup.Registry) ([]lookup.Event, error) {
			return r.ModifyAttributes(sid(1), []service.EntryTemplate{{Type: "Location"}}, []service.Entry{entry(location, f("floor", i64(4)))})
		}, service.MatchNoMatch, false},
		{"6/attributes modified, starts matching: nomatch-match", new(onFloor(4)), func(r *lookup.Registry) ([]lookup.Event, error) {
			return r.ModifyAttributes(sid(1), []service.EntryTemplate{{Type: "Location"}}, []service.Entry{entry(location, f("floor", i64(3)))})
		}, service.NoMatchMatch, false},
		{"6/attributes modified, matching neither: nothing", new(onFloor(4)), func(r *lookup.Registry) ([]lookup.Event, error) {
			return r.ModifyAttributes(sid(1), []service.EntryTemplate{{Type: "Location"}}, []service.Entry{entry(location, f("floor", i64(5)))})
		}, 0, false},
		{"6/attributes set, stops matching: match-nomatch with the item", new(onFloor(3)), func(r *lookup.Registry) ([]lookup.Event, error) { return r.SetAttributes(sid(1), nil) }, service.MatchNoMatch, false},
		{"6/attributes set, the same: nothing", new(onFloor(3)), func(r *lookup.Registry) ([]lookup.Event, error) {
			return r.SetAttributes(sid(1), printer().Entries)
		}, 0, false},
	} {
		masks := []service.Transition{service.AllTransitions}
		if c.want != 0 {
			masks = append(masks, c.want, service.AllTransitions&^c.want)
		}
		for _, shape := range watchShapes {
			for _, mask := range masks {
				t.Run(fmt.Sprintf("%s/%s/%s", c.name, shape.name, mask), func(t *testing.T) {
					r := newRegistry(t, service.Limits{})
					// Decoys: watches in the same buckets that never match.
					ok(t)(r.Register(service.Item{ID: sid(2), Service: []byte("2"), Types: []string{"Printer"}, Entries: []service.Entry{location}}, lid(2)))
					for i, d := range []service.Template{{ID: idp(sid(2))}, {Types: []string{"Printer", "Scanner"}}, {Entries: []service.EntryTemplate{floor3, {Type: "Address", Fields: []service.Field{f("street", str("Nowhere"))}}}}} {
						if err := r.AddWatch(wid(byte(10+i)), d, service.AllTransitions); err != nil {
							t.Fatal(err)
						}
					}
					if c.initial != nil {
						ok(t)(r.Register(*c.initial, lid(1)))
					}
					if err := r.AddWatch(wid(1), shape.tmpl, mask); err != nil {
						t.Fatal(err)
					}
					events := ok(t)(c.op(r))
					if c.want == 0 || mask&c.want == 0 {
						if len(events) != 0 {
							t.Fatalf("events %+v, want none", events)
						}
						return
					}
					if len(events) != 1 {
						t.Fatalf("events %+v, want one %s", events, c.want)
					}
					ev := events[0]
					if ev.Watch != wid(1) || ev.ServiceID != sid(1) || ev.Transition != c.want {
						t.Fatalf("event %+v, want watch %s service %s %s", ev, wid(1), sid(1), c.want)
					}
					if c.removed {
						if ev.Item != nil {
							t.Fatalf("a removal's event carries %+v", ev.Item)
						}
						return
					}
					now, err := r.Get(sid(1))
					if err != nil {
						t.Fatal(err)
					}
					if ev.Item == nil || !reflect.DeepEqual(*ev.Item, now.Item) {
						t.Fatalf("event item %+v, want %+v", ev.Item, now.Item)
					}
				})
			}
		}
	}
}

// TestEventsInWatchOrder: a change heard by several watches gives one event
// each, sorted by watch id, sharing one item.
func TestEventsInWatchOrder(t *testing.T) {
	r := newRegistry(t, service.Limits{})
	order := []byte{7, 2, 9, 4, 1}
	for i, b := range order {
		tmpl := watchShapes[i%len(watchShapes)].tmpl
		if i == 4 {
			tmpl = service.Template{} // the empty template: checked on every change
		}
		if err := r.AddWatch(wid(b), tmpl, service.AllTransitions); err != nil {
			t.Fatal(err)
		}
	}
	events := ok(t)(r.Register(printer(), lid(1)))
	var got []byte
	for _, ev := range events {
		got = append(got, ev.Watch[1])
		if ev.Item != events[0].Item {
			t.Error("events of one change carry different items")
		}
	}
	if !reflect.DeepEqual(got, []byte{1, 2, 4, 7, 9}) {
		t.Fatalf("watches %v", got)
	}
	// A removed watch hears nothing more.
	if err := r.RemoveWatch(wid(4)); err != nil {
		t.Fatal(err)
	}
	events = ok(t)(r.Remove(sid(1)))
	if len(events) != 4 {
		t.Fatalf("%d events after removing a watch", len(events))
	}
	if _, n := r.Len(); n != 4 {
		t.Fatalf("%d watches", n)
	}
}

func TestAddWatchRules(t *testing.T) {
	for _, c := range []struct {
		name  string
		id    djinn.ID
		tmpl  service.Template
		mask  service.Transition
		kind  djinn.Kind
		names []string
	}{
		{"6/zero watch id", djinn.ID{}, service.Template{}, service.MatchMatch, djinn.InvalidArgument, []string{"watch id"}},
		{"6/a watch id in use", wid(1), service.Template{}, service.MatchMatch, djinn.InvalidArgument, []string{wid(1).String(), "in use"}},
		{"6/no transitions", wid(2), service.Template{}, 0, djinn.InvalidArgument, []string{"transitions 0x0"}},
		{"6/an unknown transition bit", wid(2), service.Template{}, service.MatchMatch | 8, djinn.InvalidArgument, []string{"transitions 0xc"}},
		{"6/a bad template", wid(2), service.Template{Types: []string{""}}, service.MatchMatch, djinn.InvalidArgument, []string{"template types[0]"}},
		{"6/a zero template id", wid(2), service.Template{ID: &djinn.ID{}}, service.MatchMatch, djinn.InvalidArgument, []string{"template service id"}},
		{"6/every transition alone is fine", wid(2), service.Template{}, service.MatchNoMatch, "", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newRegistry(t, service.Limits{})
			if err := r.AddWatch(wid(1), service.Template{}, service.AllTransitions); err != nil {
				t.Fatal(err)
			}
			err := r.AddWatch(c.id, c.tmpl, c.mask)
			if c.kind == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			wantErr(t, err, c.kind, c.names...)
			if _, n := r.Len(); n != 1 {
				t.Fatalf("%d watches after a refused one", n)
			}
		})
	}
	r := newRegistry(t, service.Limits{})
	wantErr(t, r.RemoveWatch(wid(3)), djinn.NoSuchObject, wid(3).String())
}
