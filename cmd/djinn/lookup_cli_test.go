package main

import (
	"bufio"
	"encoding/json"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/discovery"
)

// lookupItemJSON is an item as find, ls and watch print it with -o json.
type lookupItemJSON struct {
	ID      string   `json:"id"`
	Service string   `json:"service"`
	Types   []string `json:"types"`
	Attrs   []struct {
		Type   string         `json:"type"`
		Fields map[string]any `json:"fields"`
	} `json:"attrs"`
}

type lookupFoundJSON struct {
	Total int              `json:"total"`
	Items []lookupItemJSON `json:"items"`
}

type lookupRegisteredJSON struct {
	ID    string `json:"id"`
	Lease struct {
		Token string `json:"token"`
	} `json:"lease"`
}

// TestCLILookup runs the lookup commands against a real server (issue 6,
// section 3): register two services with attributes, find them by type,
// attribute and id, list them and their types, change attributes through
// a registration's lease token; bad input is a one-line error naming it.
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
	var printer, scanner lookupRegisteredJSON
	jsonOf(&printer, "lookup", "register", "--type", "Printer", "--type", "Device", "--attr", "Name.model=laser", "--attr", "Location.floor=3",
		"--attr", `Name.serial="0042"`, "--endpoint", "127.0.0.1:9", "--duration", "10m")
	jsonOf(&scanner, "lookup", "register", "--type", "Scanner", "--type", "Device", "--attr", "Name.model=flatbed", "--attr", "Flags.color=true",
		"--attr", "net.jini.lookup.entry.Name.name=lp", "--endpoint", "127.0.0.1:8")
	if _, err := djinn.ParseID(printer.ID); err != nil || !strings.HasPrefix(printer.Lease.Token, "djinn-lease:") {
		t.Fatalf("register printed %+v (%v)", printer, err)
	}
	if text := mustRun(t, p, "lookup", "register", "--type", "Plotter", "--endpoint", "127.0.0.1:7"); !strings.HasPrefix(text, "id       ") ||
		!strings.Contains(text, "\nlease    djinn-lease:") || !strings.Contains(text, "\nexpires  ") {
		t.Errorf("register printed:\n%s", text)
	}

	for _, tc := range []struct {
		name string
		args []string
		want []string // the ids found
	}{
		{"by type", []string{"--type", "Printer"}, []string{printer.ID}},
		{"by two types", []string{"--type", "Device", "--type", "Scanner"}, []string{scanner.ID}},
		{"by a string attribute", []string{"--attr", "Name.model=laser"}, []string{printer.ID}},
		{"by an integer attribute", []string{"--attr", "Location.floor=3"}, []string{printer.ID}},
		{"an integer is no string", []string{"--attr", `Location.floor="3"`}, nil},
		{"a quoted string", []string{"--attr", `Name.serial="0042"`}, []string{printer.ID}},
		{"0042 unquoted is the integer 42", []string{"--attr", "Name.serial=0042"}, nil},
		{"by a boolean attribute", []string{"--attr", "Flags.color=true"}, []string{scanner.ID}},
		{"by an entry type alone", []string{"--attr", "Location"}, []string{printer.ID}},
		{"a qualified type", []string{"--attr", "net.jini.lookup.entry.Name.name=lp"}, []string{scanner.ID}},
		{"two fields of one entry", []string{"--attr", "Name.model=laser", "--attr", "Name.serial=\"0042\""}, []string{printer.ID}},
		{"no such value", []string{"--attr", "Location.floor=4"}, nil},
		{"by id", []string{"--id", scanner.ID}, []string{scanner.ID}},
		{"type and attribute", []string{"--type", "Device", "--attr", "Name.model=flatbed"}, []string{scanner.ID}},
	} {
		var f lookupFoundJSON
		jsonOf(&f, append([]string{"lookup", "find"}, tc.args...)...)
		var got []string
		for _, it := range f.Items {
			got = append(got, it.ID)
		}
		if f.Total != len(tc.want) || strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Errorf("find %s %v: total %d items %v, want %v", tc.name, tc.args, f.Total, got, tc.want)
		}
	}
	var f lookupFoundJSON
	jsonOf(&f, "lookup", "find", "--type", "Printer")
	if it := f.Items[0]; it.Service != "127.0.0.1:9" || strings.Join(it.Types, ",") != "Device,Printer" || len(it.Attrs) != 2 ||
		it.Attrs[0].Type != "Name" || it.Attrs[0].Fields["model"] != "laser" || it.Attrs[0].Fields["serial"] != "0042" ||
		it.Attrs[1].Type != "Location" || it.Attrs[1].Fields["floor"] != 3.0 {
		t.Errorf("find --type Printer printed %+v", it)
	}
	if out := mustRun(t, p, "lookup", "find", "--type", "Device", "--max", "1"); !strings.HasPrefix(out, "2 matching, 1 shown\n") || strings.Count(out, "\n") != 2 {
		t.Errorf("find --max 1 printed %q", out)
	}
	out := mustRun(t, p, "lookup", "ls")
	// Three items and the registrar's own (DESIGN.md 6).
	if !strings.HasPrefix(out, "4 matching\n") || !strings.Contains(out, "types=djinn.v1.LookupService,net.jini.core.lookup.ServiceRegistrar") || !strings.Contains(out, printer.ID+`  127.0.0.1:9  types=Device,Printer  Name{model="laser" serial="0042"}  Location{floor=3}`+"\n") ||
		!strings.Contains(out, `Flags{color=true}`) {
		t.Errorf("ls printed:\n%s", out)
	}
	if out := mustRun(t, p, "lookup", "types"); out != "Device\nPlotter\nPrinter\nScanner\ndjinn.v1.LookupService\nnet.jini.core.lookup.ServiceRegistrar\n" {
		t.Errorf("types printed %q", out)
	}
	var types []string
	jsonOf(&types, "lookup", "types", "--prefix", "P")
	if strings.Join(types, ",") != "Plotter,Printer" {
		t.Errorf("types --prefix P printed %v", types)
	}

	// Attributes change through the registration's lease token.
	if out := mustRun(t, p, "lookup", "attrs", "add", "--token", printer.Lease.Token, "--attr", "Status.state=idle"); out != "added 1 entry\n" {
		t.Errorf("attrs add printed %q", out)
	}
	jsonOf(&f, "lookup", "find", "--attr", "Status.state=idle")
	if f.Total != 1 || f.Items[0].ID != printer.ID || len(f.Items[0].Attrs) != 3 {
		t.Fatalf("find by the added attribute: %+v", f)
	}
	mustRun(t, p, "lookup", "attrs", "set", printer.Lease.Token, "--attr", "Status.state=busy", "--attr", "Name.model=laser")
	for attr, want := range map[string]int{"Status.state=busy": 1, "Status.state=idle": 0, "Location.floor=3": 0, "Name.model=laser": 1} {
		jsonOf(&f, "lookup", "find", "--attr", attr)
		if f.Total != want {
			t.Errorf("after attrs set, find --attr %s: %d, want %d", attr, f.Total, want)
		}
	}

	var info struct {
		ServiceID string   `json:"service_id"`
		Groups    []string `json:"groups"`
		Items     int      `json:"items"`
		Reference string   `json:"reference"`
	}
	jsonOf(&info, "lookup", "info")
	if _, err := djinn.ParseID(info.ServiceID); err != nil || info.Items != 3 || !strings.HasPrefix(info.Reference, "djinn://") {
		t.Errorf("info printed %+v", info)
	}

	wantErrors(t, p, []errRow{
		{[]string{"lookup", "find", "--attr", "model=laser"}, `--attr "model=laser"`},
		{[]string{"lookup", "find", "--attr", ".model=x"}, `--attr ".model=x"`},
		{[]string{"lookup", "find", "--attr", "Name.=x"}, `--attr "Name.=x"`},
		{[]string{"lookup", "find", "--attr", `Name.model="laser`}, `--attr "Name.model=\"laser"`},
		{[]string{"lookup", "find", "--attr", "Name.model=a", "--attr", "Name.model=b"}, "field model of Name given twice"},
		{[]string{"lookup", "find", "--max", "-1"}, "--max -1"},
		{[]string{"lookup", "find", "--id", "xyz"}, "--id"},
		{[]string{"lookup", "register", "--type", "T"}, "--endpoint"},
		{[]string{"lookup", "register", "--type", "T", "--endpoint", "nohost"}, `"nohost"`},
		{[]string{"lookup", "register", "--endpoint", "h:1"}, "--type"},
		{[]string{"lookup", "register", "--type", "T", "--endpoint", "h:1", "--duration", "soon"}, `--duration "soon"`},
		{[]string{"lookup", "attrs", "drop", "--token", printer.Lease.Token}, `attrs "drop"`},
		{[]string{"lookup", "attrs", "add", printer.ID, "--attr", "A.b=1"}, printer.ID + ": a service id, not a lease token"},
		{[]string{"lookup", "attrs", "add", "--token", "djinn-lease:garbage", "--attr", "A.b=1"}, "--token"},
		{[]string{"lookup", "attrs", "add", "--token", printer.Lease.Token}, "--attr: missing"},
		{[]string{"lookup", "watch", "--transitions", "appear"}, `transition "appear"`},
		{[]string{"lookup", "watch", "--duration", "any"}, `--duration "any"`},
	})
}

// TestCLILookupWatch runs djinn lookup watch against a real server: one
// line per service event as a printer comes, changes and goes; an
// interrupt ends it cleanly.
func TestCLILookupWatch(t *testing.T) {
	n := newNode(t)
	p := n.start(t)
	defer p.stop(t)

	cmd := exec.Command(djinnBinary(t), "lookup", "watch", "--type", "Printer", "-o", "json", "--server", p.addr)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := false
	defer func() {
		if !exited {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	}()
	lines := make(chan string, 64)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	next := func(what string) string {
		t.Helper()
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("watch ended before %s; stderr: %s", what, stderr.String())
			}
			return l
		case <-time.After(30 * time.Second):
			t.Fatalf("no %s from watch; stderr: %s", what, stderr.String())
		}
		return ""
	}
	var watching struct {
		EventID     int64  `json:"event_id"`
		Listener    string `json:"listener"`
		Transitions string `json:"transitions"`
		Lease       string `json:"lease"`
	}
	if l := next("registration"); json.Unmarshal([]byte(l), &watching) != nil || watching.Listener == "" ||
		watching.Transitions != "match-nomatch|nomatch-match|match-match" || !strings.HasPrefix(watching.Lease, "djinn-lease:") {
		t.Fatalf("watch printed %q first", l)
	}
	type eventJSON struct {
		Seq        int64           `json:"sequence"`
		Transition string          `json:"transition"`
		ID         string          `json:"id"`
		Item       *lookupItemJSON `json:"item"`
	}
	event := func(what string) eventJSON {
		t.Helper()
		l := next(what)
		var ev eventJSON
		if err := json.Unmarshal([]byte(l), &ev); err != nil {
			t.Fatalf("%s: %v in %q", what, err, l)
		}
		return ev
	}

	var reg lookupRegisteredJSON
	if err := json.Unmarshal([]byte(mustRun(t, p, "lookup", "register", "--type", "Printer", "--attr", "Name.model=laser", "--endpoint", "127.0.0.1:9", "-o", "json")), &reg); err != nil {
		t.Fatal(err)
	}
	mustRun(t, p, "lookup", "register", "--type", "Scanner", "--endpoint", "127.0.0.1:8") // no event: not a printer
	if ev := event("the printer's arrival"); ev.Transition != "nomatch-match" || ev.ID != reg.ID || ev.Item == nil || ev.Item.Service != "127.0.0.1:9" || ev.Seq < 1 {
		t.Errorf("on register: %+v", ev)
	}
	mustRun(t, p, "lookup", "attrs", "add", reg.Lease.Token, "--attr", "Status.state=idle")
	if ev := event("the printer's change"); ev.Transition != "match-match" || ev.ID != reg.ID || ev.Item == nil || len(ev.Item.Attrs) != 2 {
		t.Errorf("on attrs add: %+v", ev)
	}
	mustRun(t, p, "lease", "cancel", reg.Lease.Token)
	if ev := event("the printer's removal"); ev.Transition != "match-nomatch" || ev.ID != reg.ID || ev.Item != nil {
		t.Errorf("on lease cancel: %+v", ev)
	}

	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	for range lines { // drain until the watcher closes its stdout
	}
	err = cmd.Wait()
	exited = true
	if err != nil {
		t.Fatalf("watch exited with %v after an interrupt; stderr: %s", err, stderr.String())
	}
}

// runDiscover runs djinn discover, which needs no server.
func runDiscover(t *testing.T, args ...string) (string, string, bool) {
	t.Helper()
	cmd := exec.Command(djinnBinary(t), append([]string{"discover"}, args...)...)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	return out.String(), errb.String(), err == nil
}

type registrarJSON struct {
	ServiceID string   `json:"service_id"`
	Endpoint  string   `json:"endpoint"`
	Locator   string   `json:"locator"`
	Groups    []string `json:"groups"`
}

// TestCLIDiscover runs djinn discover by locator (unicast only) against a
// registrar's discovery side started in the test: it lists the registrar
// once however many locators reach it, and names a locator that never
// answers in a one-line error.
func TestCLIDiscover(t *testing.T) {
	id := djinn.NewID()
	r, err := discovery.NewRegistrar(discovery.RegistrarConfig{ServiceID: id, Groups: []string{"", "lab"}, Endpoint: "127.0.0.1:9",
		ListenAddr: "127.0.0.1:0", DisableMulticast: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	loc := "jini://" + r.Addr().String()

	out, errs, ok := runDiscover(t, "--locator", loc, "--locator", loc+"/", "--timeout", "20s", "-o", "json")
	var found []registrarJSON
	if !ok || json.Unmarshal([]byte(out), &found) != nil {
		t.Fatalf("discover: %q %s", out, errs)
	}
	if len(found) != 1 || found[0].ServiceID != id.String() || found[0].Endpoint != "127.0.0.1:9" || found[0].Locator != loc+"/" ||
		strings.Join(found[0].Groups, ",") != ",lab" {
		t.Errorf("discover printed %+v", found)
	}
	if out, errs, ok := runDiscover(t, "--locator", loc, "--timeout", "20s"); !ok || out != id.String()+"  127.0.0.1:9  "+loc+`/  groups="",lab`+"\n" {
		t.Errorf("discover printed %q (%s)", out, errs)
	}

	// A locator nobody answers at: the registrar found is printed, then
	// the error.
	dead := "jini://" + freePort(t)
	out, errs, ok = runDiscover(t, "--locator", loc, "--locator", dead, "--timeout", "1s")
	if ok || !strings.HasPrefix(out, id.String()) || strings.Count(strings.TrimSpace(errs), "\n") != 0 || !strings.Contains(errs, "--locator "+dead+"/: no answer within 1s") {
		t.Errorf("discover with a dead locator: ok=%v stdout %q stderr %q", ok, out, errs)
	}
	for _, tc := range []errRow{
		{[]string{"--locator", "http://h:1"}, `--locator "http://h:1"`},
		{[]string{"--timeout", "0s"}, `--timeout "0s"`},
		{[]string{"--all-groups", "--groups", "lab"}, "--all-groups and --groups"},
	} {
		_, errs, ok := runDiscover(t, tc.args...)
		if ok || strings.Count(strings.TrimSpace(errs), "\n") != 0 || !strings.Contains(errs, tc.want) {
			t.Errorf("discover %v: ok=%v stderr %q, want one line naming %q", tc.args, ok, errs, tc.want)
		}
	}
}

// TestCLIDiscoverNode: djinn discover finds a node's lookup service at the
// unicast discovery address djinn serve --discovery gives it, and the
// registrar it reports is the one djinn lookup info describes.
func TestCLIDiscoverNode(t *testing.T) {
	n := newNode(t)
	p := n.start(t, "--multicast=false")
	defer p.stop(t)

	out, errs, ok := runDiscover(t, "--locator", "jini://"+n.discovery, "--timeout", "10s", "-o", "json")
	var found []registrarJSON
	if !ok || json.Unmarshal([]byte(out), &found) != nil {
		t.Fatalf("discover --locator jini://%s: %q %s\nserver:\n%s", n.discovery, out, errs, p.output())
	}
	var info struct {
		ServiceID string `json:"service_id"`
		Locator   string `json:"locator"`
	}
	if err := json.Unmarshal([]byte(mustRun(t, p, "lookup", "info", "-o", "json")), &info); err != nil {
		t.Fatal(err)
	}
	if len(found) != 1 || found[0].ServiceID != info.ServiceID || found[0].Endpoint != p.addr || found[0].Locator != "jini://"+n.discovery+"/" ||
		info.Locator != found[0].Locator || strings.Join(found[0].Groups, ",") != "" || len(found[0].Groups) != 1 {
		t.Errorf("discover printed %+v; lookup info %+v", found, info)
	}
}
