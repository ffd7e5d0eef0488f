package discovery_test

import (
	"fmt"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/discovery"
)

// A client finds a registrar by its locator, with no multicast at all: the
// way to go in clouds, with locators from configuration, static seeds or
// DNS SRV records.
func ExampleLookupLocatorDiscovery() {
	r, err := discovery.NewRegistrar(discovery.RegistrarConfig{
		ServiceID:        djinn.NewID(),
		Groups:           []string{"prod"},
		Endpoint:         "lookup.example.com:7000",
		ListenAddr:       "127.0.0.1:0", // in production the default, :4160
		DisableMulticast: true,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer r.Close()

	d, err := discovery.NewLookupLocatorDiscovery(discovery.LookupLocatorDiscoveryConfig{
		Locators: []discovery.Locator{r.Locator()},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer d.Close()
	select {
	case e := <-d.Events():
		fmt.Println(e.Kind, e.Registrar.Endpoint, e.Registrar.Groups)
	case <-time.After(10 * time.Second):
		fmt.Println("nothing found")
	}
	// Output: discovered lookup.example.com:7000 [prod]
}

// A client finds the registrars of a group by multicast, and learns when
// one shuts down. The example names the loopback interface because its
// tests run in a network namespace where loopback can multicast; leave
// Interfaces empty to use every multicast interface.
func ExampleLookupDiscovery() {
	d, err := discovery.NewLookupDiscovery(discovery.LookupDiscoveryConfig{
		Groups:     []string{"example"},
		Interfaces: []string{"lo"},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer d.Close()

	r, err := discovery.NewRegistrar(discovery.RegistrarConfig{
		ServiceID:  djinn.NewID(),
		Groups:     []string{"example", "other"},
		Endpoint:   "10.0.0.7:7000",
		ListenAddr: "127.0.0.1:0",
		Interfaces: []string{"lo"},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer r.Close()
	for range 2 {
		select {
		case e := <-d.Events():
			switch e.Kind {
			case discovery.Discovered:
				fmt.Println(e.Kind, e.Registrar.Endpoint, e.Registrar.Groups)
				r.Close() // announces that it leaves
			default:
				fmt.Println(e.Kind, e.Reason)
			}
		case <-time.After(10 * time.Second):
			fmt.Println("nothing happened")
			return
		}
	}
	// Output:
	// discovered 10.0.0.7:7000 [example other]
	// discarded left
}
