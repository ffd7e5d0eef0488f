package server

import (
	"net/url"
	"strings"
	"testing"

	"github.com/djinn-go/djinn"
)

// FuzzBrowseTemplate: the lookup page's search terms, from anyone who
// reaches the admin port, make a template or an invalid-argument error
// naming the bad term; never a panic.
func FuzzBrowseTemplate(f *testing.F) {
	for _, seed := range []string{
		"type=Printer", "attr=Name.name%3Dlaser", "attr=Name", "attr=Name.%3D", "attr=.x%3Dy", "attr=%3D",
		"id=0123456789abcdef0123456789abcdef", "id=zz", "type=&attr=&id=", "attr=A.b%3Dc%3Dd",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		tmpl, err := browseTemplate(q)
		if err != nil {
			if djinn.KindOf(err) != djinn.InvalidArgument {
				t.Fatalf("%q: %v, want an invalid argument", raw, err)
			}
			if !strings.Contains(err.Error(), "attribute") && !strings.Contains(err.Error(), "service id") {
				t.Fatalf("%q: %v names no term", raw, err)
			}
			return
		}
		for _, e := range tmpl.Entries {
			if e.Type == "" {
				t.Fatalf("%q: an entry template without a type", raw)
			}
		}
	})
}
