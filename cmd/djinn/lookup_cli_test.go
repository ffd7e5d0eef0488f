package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestCLILookup runs the lookup commands against a real server: register
// two services with attributes, find them by type and by attribute, list
// them and their types, change attributes through a registration's lease
// token; bad input is a one-line error naming it.
func TestCLILookup(t *testing.T) {
	n := newNode(t)
	p := n.start(t)
	defer p.stop(t)
	jsonOf := func(v any, args ...string) {
		t.Helper()
		out := mustRun(t, p, append(args, "-o", "json")...)
		if err := json.Unmarshal([]byte(out), v); err != nil {
			t.Fatalf("djinn %v: %v in %q", args, err, out)
		}
	}
	var a struct {
		ID    string `json:"id"`
		Lease struct {
			Token string `json:"token"`
		} `json:"lease"`
	}
	jsonOf(&a, "lookup", "register", "--type", "Printer", "--type", "Device", "--attr", "Name.model=laser", "--attr", "Location.floor=3",
		"--endpoint", "127.0.0.1:9", "--duration", "10m")
	mustRun(t, p, "lookup", "register", "--type", "Scanner", "--attr", "Name.model=flatbed", "--endpoint", "127.0.0.1:8")
	type found struct {
		Total int `json:"total"`
		Items []struct {
			ID    string              `json:"id"`
			Attrs []map[string]string `json:"attrs"`
		} `json:"items"`
	}
	for _, tc := range []struct {
		args []string
		want int
	}{
		{[]string{"--type", "Device"}, 1},
		{[]string{"--attr", "Name.model=laser"}, 1},
		{[]string{"--attr", "Location.floor=3"}, 1}, // an integer value
		{[]string{"--attr", "Location.floor=4"}, 0},
		{[]string{"--id", a.ID}, 1},
		{nil, 2},
	} {
		var f found
		jsonOf(&f, append([]string{"lookup", "find"}, tc.args...)...)
		if f.Total != tc.want {
			t.Errorf("find %v: %d, want %d", tc.args, f.Total, tc.want)
		}
	}
	if out := mustRun(t, p, "lookup", "ls"); !strings.HasPrefix(out, "2 matching\n") || !strings.Contains(out, "Name{model=laser}") {
		t.Errorf("ls printed %q", out)
	}
	if out := mustRun(t, p, "lookup", "types", "--prefix", "S"); out != "Scanner\n" {
		t.Errorf("types --prefix S printed %q", out)
	}
	mustRun(t, p, "lookup", "attrs", "add", "--token", a.Lease.Token, "--attr", "Status.state=idle")
	var f found
	jsonOf(&f, "lookup", "find", "--attr", "Status.state=idle")
	if f.Total != 1 || f.Items[0].ID != a.ID {
		t.Fatalf("find by the added attribute: %+v", f)
	}
	wantErrors(t, p, []errRow{
		{[]string{"lookup", "find", "--attr", "model=laser"}, `--attr "model=laser"`},
		{[]string{"lookup", "find", "--max", "-1"}, "--max -1"},
		{[]string{"lookup", "find", "--id", "xyz"}, "--id"},
		{[]string{"lookup", "register", "--type", "T"}, "--endpoint"},
		{[]string{"lookup", "register", "--type", "T", "--endpoint", "h:1", "--duration", "soon"}, `--duration "soon"`},
		{[]string{"lookup", "attrs", "drop", "--token", a.Lease.Token}, `attrs "drop"`},
	})
}
