package service_test

import (
	"fmt"
	"log"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/service"
)

// A Go service describes itself: its most specific type, the types that
// one extends, and its attributes. The canonical form is what every
// registrar stores and answers with.
func ExampleItem() {
	printer := service.Item{
		ID:      djinn.ID{1},
		Service: []byte("10.0.0.7:9100"),
		Types:   []string{"example.Laser"},
		Supertypes: map[string][]string{
			"example.Laser":   {"example.Printer"},
			"example.Printer": {"example.Device"},
		},
		Entries: []service.Entry{{Type: "example.Location", Fields: []service.Field{
			{Name: "room", Value: service.NewString("301")},
			{Name: "floor", Value: service.NewInt(3)},
		}}},
	}
	canon, err := service.Limits{}.Canonical(printer)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(canon.Types)
	fmt.Println(canon.Entries[0].Fields)

	onFloor3 := service.Template{
		Types:   []string{"example.Device"},
		Entries: []service.EntryTemplate{{Type: "example.Location", Fields: []service.Field{{Name: "floor", Value: service.NewInt(3)}}}},
	}
	fmt.Println(onFloor3.Matches(printer))
	// Output:
	// [example.Device example.Laser example.Printer]
	// [{floor 3} {room "301"}]
	// true
}
