package lookup_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/discovery"
	"github.com/djinn-go/djinn/lookup"
	"github.com/djinn-go/djinn/service"
)

// A printer service stays registered at every lookup service of group
// "lab" and at the one named by its locator, with its lease renewed and
// its attributes kept the same everywhere.
func ExampleNewJoinManager() {
	loc, err := discovery.ParseLocator("jini://lookup.example.com")
	if err != nil {
		log.Fatal(err)
	}
	dm, err := discovery.NewLookupDiscoveryManager(discovery.LookupDiscoveryManagerConfig{
		Groups:   discovery.LookupDiscoveryConfig{Groups: []string{"lab"}},
		Locators: discovery.LookupLocatorDiscoveryConfig{Locators: []discovery.Locator{loc}},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer dm.Close()
	jm, err := lookup.NewJoinManager(dm, lookup.JoinManagerConfig{
		Item: service.Item{Service: []byte("10.0.0.7:9100"), Types: []string{"Printer", "Device"},
			Entries: []service.Entry{{Type: "Name", Fields: []service.Field{{Name: "name", Value: service.NewString("lp1")}}}}},
		// Store the id, and give it back in Item after a restart.
		ServiceIDListener: func(id djinn.ID) { fmt.Println("service id", id) },
	})
	if err != nil {
		log.Fatal(err)
	}
	defer jm.Terminate() // every registration's lease is cancelled

	// Later: the new status reaches every lookup service joined, and
	// those found afterwards.
	status := service.Entry{Type: "Status", Fields: []service.Field{{Name: "state", Value: service.NewString("jammed")}}}
	if err := jm.AddAttributes(context.Background(), []service.Entry{status}); err != nil {
		log.Print(err)
	}
}

// A client follows every printer at every lookup service of group "lab":
// the cache hears of printers as they come, change and go, wherever they
// are registered.
func ExampleServiceDiscoveryManager_CreateLookupCache() {
	dm, err := discovery.NewLookupDiscoveryManager(discovery.LookupDiscoveryManagerConfig{
		Groups: discovery.LookupDiscoveryConfig{Groups: []string{"lab"}},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer dm.Close()
	sdm, err := lookup.NewServiceDiscoveryManager(dm, lookup.ServiceDiscoveryManagerConfig{})
	if err != nil {
		log.Fatal(err)
	}
	defer sdm.Terminate()

	ctx := context.Background()
	cache, err := sdm.CreateLookupCache(ctx, service.Template{Types: []string{"Printer"}}, nil, lookup.ListenerFuncs{
		Added:   func(ev lookup.ServiceDiscoveryEvent) { fmt.Println("printer", ev.Post.ID) },
		Removed: func(ev lookup.ServiceDiscoveryEvent) { fmt.Println("printer gone", ev.Pre.ID) },
	})
	if err != nil {
		log.Fatal(err)
	}
	wait, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if p, err := cache.Wait(wait, nil); err == nil {
		fmt.Println("a printer at", string(p.Service))
	}
}
