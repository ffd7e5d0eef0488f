package client_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/server/servertest"
	"github.com/djinn-go/djinn/service"
)

// TestRegistrarServiceTypes is Jini's getServiceTypes through the client
// against a real server: the types of the matching items that are neither
// a template type nor a supertype of one, for an item that declares its
// hierarchy (a Laser, which is a Printer, which is a Device) and for one
// that lists its types flat.
func TestRegistrarServiceTypes(t *testing.T) {
	srv := servertest.Start(t, servertest.Config(t))
	c := servertest.Dial(t, srv.Addr())
	ctx, cancel := context.WithTimeout(t.Context(), servertest.Timeout)
	defer cancel()
	reg, err := c.Lookup(ctx)
	if err != nil {
		t.Fatal(err)
	}
	laser := service.Item{Service: []byte("127.0.0.1:9"), Types: []string{"example.Laser"},
		Supertypes: map[string][]string{"example.Laser": {"example.Printer"}, "example.Printer": {"example.Device"}}}
	sr, err := reg.Register(ctx, laser, djinn.Any)
	if err != nil {
		t.Fatal(err)
	}
	got, err := reg.ServiceTypes(ctx, service.Template{Types: []string{"example.Printer"}}, "")
	if err != nil || !reflect.DeepEqual(got, []string{"example.Laser"}) {
		t.Errorf("service types of a Laser found as a Printer: %v, %v; want [example.Laser] alone", got, err)
	}
	it, err := reg.Lookup(ctx, service.Template{Types: []string{"example.Device"}})
	want := service.Item{ID: sr.ID, Service: laser.Service, Types: []string{"example.Device", "example.Laser", "example.Printer"}, Supertypes: laser.Supertypes}
	if err != nil || it == nil || !it.Equal(want) {
		t.Errorf("the Laser found as a Device: %+v, %v; want %+v", it, err, want)
	}
	if _, err := reg.Register(ctx, service.Item{Service: []byte("127.0.0.1:8"), Types: []string{"example.Printer", "example.Fax"}}, djinn.Any); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		types  []string
		prefix string
		want   []string
	}{
		{"getServiceTypes/the template's type and its supertypes left out", []string{"example.Printer"}, "example.", []string{"example.Fax", "example.Laser"}},
		{"getServiceTypes/the most specific types", nil, "example.", []string{"example.Fax", "example.Laser", "example.Printer"}},
		{"getServiceTypes/prefix: supertypes in a type's stead, once", nil, "example.D", []string{"example.Device"}},
	} {
		got, err := reg.ServiceTypes(ctx, service.Template{Types: c.types}, c.prefix)
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %v, %v; want %v", c.name, got, err, c.want)
		}
	}
}
