package lookup_test

import (
	"fmt"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/lookup"
	"github.com/djinn-go/djinn/service"
)

// A printer registers, a client watching for printers on floor 3 hears of
// it, and a lookup finds it.
func Example() {
	r, err := lookup.New(djinn.ID{0xff}, service.Limits{})
	if err != nil {
		panic(err)
	}
	floor3 := service.Template{
		Types: []string{"Printer"},
		Entries: []service.EntryTemplate{{Type: "Location", Fields: []service.Field{
			{Name: "floor", Value: service.NewInt(3)},
		}}},
	}
	if err := r.AddWatch(djinn.ID{1}, floor3, service.NoMatchMatch|service.MatchNoMatch); err != nil {
		panic(err)
	}
	item := service.Item{
		ID:      djinn.ID{2},
		Service: []byte("tcp://printer.example:4160"),
		Types:   []string{"Printer", "Object"},
		Entries: []service.Entry{{Type: "Location", Supertypes: []string{"Entry"}, Fields: []service.Field{
			{Name: "floor", Value: service.NewInt(3)},
			{Name: "room", Value: service.NewString("301")},
		}}},
	}
	events, err := r.Register(item, djinn.ID{3})
	if err != nil {
		panic(err)
	}
	for _, ev := range events {
		fmt.Println("watch", ev.Watch.String()[:2], "hears", ev.Transition, "of", ev.ServiceID.String()[:2])
	}
	total, items, err := r.Lookup(floor3, 10)
	if err != nil {
		panic(err)
	}
	fmt.Println(total, "printer on floor 3 in room", items[0].Entries[0].Fields[1].Value)
	// The printer moves: the watch hears it stop matching.
	events, err = r.ModifyAttributes(djinn.ID{2},
		[]service.EntryTemplate{{Type: "Location"}},
		[]service.Entry{{Type: "Location", Fields: []service.Field{{Name: "floor", Value: service.NewInt(4)}}}})
	if err != nil {
		panic(err)
	}
	fmt.Println("watch hears", events[0].Transition)
	_, _, err = r.Lookup(floor3, -1)
	fmt.Println(err)
	// Output:
	// watch 01 hears nomatch-match of 02
	// 1 printer on floor 3 in room "301"
	// watch hears match-nomatch
	// lookup max -1: must not be negative
}
