package main

import (
	"bufio"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/discovery"
)

// lookupItemJSON is an item as find, ls and watch print it with -o json.
type lookupItemJSON struct {
	ID      string   `json:"id"`
	Service string   `json:"service"`
	Types   []string `json:"types"`
	// Supertypes is the item's type hierarchy.
	Supertypes map[string][]string `json:"supertypes"`
	Attrs      []struct {
		Type   string                    `json:"type"`
		Fields map[string]map[string]any `json:"fields"` // the value under its kind
	} `json:"attrs"`
}

type lookupFoundJSON struct {
	Total int              `json:"total"`
	Items []lookupItemJSON `json:"items"`
}

type lookupRegisteredJSON struct {
	ID    string    `json:"id"`
	Lease leaseJSON `json:"lease"`
}

// lookupScript is TestCLILookup's state: two registered services.
type lookupScript struct {
	*rig
	printer, scanner lookupRegisteredJSON
}

// TestCLILookup runs the lookup commands against a real server (issue 6,
// section 3): register two services with attributes, find them by type,
// attribute and id, list them and their types, change attributes through
// a registration's lease; bad input is a one-line error naming it.
func TestCLILookup(t *testing.T) {
	// The registry holds the test's items and the registrar's own: the
	// server's services do not join it.
	conf := filepath.Join(t.TempDir(), "djinn.toml")
	if err := os.WriteFile(conf, []byte("[lookup-join]\nenabled = false\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := &lookupScript{rig: newRig(t, "--config", conf)}
	s.register()
	s.find()
	s.listAndTypes()
	s.attrs()
	var info struct {
		ServiceID string   `json:"service_id"`
		Groups    []string `json:"groups"`
		Locator   *string  `json:"locator"`
		Items     int      `json:"items"`
		Reference string   `json:"reference"`
	}
	s.json(&info, "lookup", "info")
	if _, err := djinn.ParseID(info.ServiceID); err != nil || info.Items != 3 || !strings.HasPrefix(info.Reference, "djinn://") || info.Locator == nil {
		t.Errorf("info printed %+v", info)
	}
	s.errorRows()
}

// TestCLILookupHierarchy: an item registered with its most specific type
// and --supertype is found by its supertypes, lookup types answers the
// most specific type as getServiceTypes does, and the views show the
// hierarchy; a --supertype without a supertype is a usage error.
func TestCLILookupHierarchy(t *testing.T) {
	r := newRig(t)
	var reg lookupRegisteredJSON
	r.json(&reg, "lookup", "register", "--type", "Laser", "--supertype", "Laser=Printer", "--supertype", "Printer=Device,Machine",
		"--endpoint", "127.0.0.1:9")
	var f lookupFoundJSON
	r.json(&f, "lookup", "find", "--type", "Machine")
	if f.Total != 1 || f.Items[0].ID != reg.ID || strings.Join(f.Items[0].Supertypes["Printer"], ",") != "Device,Machine" ||
		strings.Join(f.Items[0].Supertypes["Laser"], ",") != "Printer" {
		t.Errorf("find --type Machine: %+v, want the laser and its hierarchy", f)
	}
	if out := r.must("lookup", "types", "--prefix", "L"); out != "Laser\n" {
		t.Errorf("lookup types --prefix L printed %q, want Laser", out)
	}
	if out := r.must("lookup", "find", "--type", "Printer"); !strings.Contains(out, "extends=Laser<Printer;Printer<Device,Machine") {
		t.Errorf("find printed %q, want the hierarchy", out)
	}
	for _, bad := range []string{"Laser", "=Printer", "Laser=", "Laser=Printer,"} {
		if _, errs, ok := r.run("lookup", "register", "--type", "Laser", "--supertype", bad, "--endpoint", "127.0.0.1:9"); ok || !strings.Contains(errs, "--supertype") {
			t.Errorf("--supertype %q: ok=%v %s, want refused naming the flag", bad, ok, errs)
		}
	}
}

func (s *lookupScript) register() {
	t := s.t
	s.json(&s.printer, "lookup", "register", "--type", "Printer", "--type", "Device", "--attr", "Name.model=laser", "--attr", "Location.floor=3",
		"--attr", `Name.serial="0042"`, "--endpoint", "127.0.0.1:9", "--lease", "10m")
	s.json(&s.scanner, "lookup", "register", "--type", "Scanner", "--type", "Device", "--attr", "Name.model=flatbed", "--attr", "Flags.color=true",
		"--attr", "net.jini.lookup.entry.Name.name=lp", "--endpoint", "127.0.0.1:8")
	if _, err := djinn.ParseID(s.printer.ID); err != nil || len(s.printer.Lease.Name) != 32 || !strings.HasPrefix(s.printer.Lease.Token, "djinn-lease:") {
		t.Fatalf("register printed %+v (%v)", s.printer, err)
	}
	if text := s.must("lookup", "register", "--type", "Plotter", "--endpoint", "127.0.0.1:7"); !strings.HasPrefix(text, "id       ") ||
		!strings.Contains(text, "\ntoken    djinn-lease:") || !strings.Contains(text, "\nexpires  ") || !strings.Contains(text, "\nlease    ") {
		t.Errorf("register printed:\n%s", text)
	}
}

// find: by type, attribute and id; no match is a negative answer.
func (s *lookupScript) find() {
	t, printer, scanner := s.t, s.printer.ID, s.scanner.ID
	for _, tc := range []struct {
		name string
		args []string
		want []string // the ids found
	}{
		{"by type", []string{"--type", "Printer"}, []string{printer}},
		{"by two types", []string{"--type", "Device", "--type", "Scanner"}, []string{scanner}},
		{"by a string attribute", []string{"--attr", "Name.model=laser"}, []string{printer}},
		{"by an integer attribute", []string{"--attr", "Location.floor=3"}, []string{printer}},
		{"an integer is no string", []string{"--attr", `Location.floor="3"`}, nil},
		{"a quoted string", []string{"--attr", `Name.serial="0042"`}, []string{printer}},
		{"0042 unquoted is the integer 42", []string{"--attr", "Name.serial=0042"}, nil},
		{"by a boolean attribute", []string{"--attr", "Flags.color=true"}, []string{scanner}},
		{"by an entry type alone", []string{"--attr", "Location"}, []string{printer}},
		{"a qualified type", []string{"--attr", "net.jini.lookup.entry.Name.name=lp"}, []string{scanner}},
		{"two fields of one entry", []string{"--attr", "Name.model=laser", "--attr", "Name.serial=\"0042\""}, []string{printer}},
		{"no such value", []string{"--attr", "Location.floor=4"}, nil},
		{"by id", []string{"--id", scanner}, []string{scanner}},
		{"type and attribute", []string{"--type", "Device", "--attr", "Name.model=flatbed"}, []string{scanner}},
	} {
		f, ok := s.findJSON(tc.args...)
		var got []string
		for _, it := range f.Items {
			got = append(got, it.ID)
		}
		if ok != (len(tc.want) > 0) || f.Total != len(tc.want) || strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Errorf("find %s %v: exit ok %v, total %d items %v, want %v", tc.name, tc.args, ok, f.Total, got, tc.want)
		}
	}
	f, _ := s.findJSON("--type", "Printer")
	if it := f.Items[0]; it.Service != "127.0.0.1:9" || strings.Join(it.Types, ",") != "Device,Printer" || len(it.Attrs) != 2 ||
		it.Attrs[0].Type != "Name" || it.Attrs[0].Fields["model"]["string"] != "laser" || it.Attrs[0].Fields["serial"]["string"] != "0042" ||
		it.Attrs[1].Type != "Location" || it.Attrs[1].Fields["floor"]["int"] != "3" {
		t.Errorf("find --type Printer printed %+v", it)
	}
	if out := s.must("lookup", "find", "--type", "Device", "--max", "1"); !strings.HasPrefix(out, "2 matching, 1 shown\n") || strings.Count(out, "\n") != 2 {
		t.Errorf("find --max 1 printed %q", out)
	}
}

// findJSON runs lookup find -o json, which exits 1 when nothing matches.
func (s *lookupScript) findJSON(args ...string) (lookupFoundJSON, bool) {
	s.t.Helper()
	out, errs, ok := s.run(append(append([]string{"lookup", "find"}, args...), "-o", "json")...)
	var f lookupFoundJSON
	if err := json.Unmarshal([]byte(out), &f); err != nil {
		s.t.Fatalf("find %v: %v in %q (%s)", args, err, out, errs)
	}
	return f, ok
}

func (s *lookupScript) listAndTypes() {
	t := s.t
	out := s.must("lookup", "ls")
	// Three items and the registrar's own (DESIGN.md 6).
	if !strings.HasPrefix(out, "4 matching\n") || !strings.Contains(out, "types=djinn.v1.LookupService,net.jini.core.lookup.ServiceRegistrar") ||
		!strings.Contains(out, s.printer.ID+`  127.0.0.1:9  types=Device,Printer  Name{model="laser" serial="0042"}  Location{floor=3}`+"\n") ||
		!strings.Contains(out, `Flags{color=true}`) {
		t.Errorf("ls printed:\n%s", out)
	}
	if out := s.must("lookup", "types"); out != "Device\nPlotter\nPrinter\nScanner\ndjinn.v1.LookupService\nnet.jini.core.lookup.ServiceRegistrar\n" {
		t.Errorf("types printed %q", out)
	}
	var types []string
	s.json(&types, "lookup", "types", "--prefix", "P")
	if strings.Join(types, ",") != "Plotter,Printer" {
		t.Errorf("types --prefix P printed %v", types)
	}
}

// attrs: attributes change through the registration's lease, by its token
// or its name.
func (s *lookupScript) attrs() {
	t := s.t
	if out := s.must("lookup", "attrs", "add", s.printer.Lease.Token, "--attr", "Status.state=idle"); out != "added 1 entry\n" {
		t.Errorf("attrs add printed %q", out)
	}
	f, _ := s.findJSON("--attr", "Status.state=idle")
	if f.Total != 1 || f.Items[0].ID != s.printer.ID || len(f.Items[0].Attrs) != 3 {
		t.Fatalf("find by the added attribute: %+v", f)
	}
	s.must("lookup", "attrs", "set", s.printer.Lease.Name, "--attr", "Status.state=busy", "--attr", "Name.model=laser")
	for attr, want := range map[string]int{"Status.state=busy": 1, "Status.state=idle": 0, "Location.floor=3": 0, "Name.model=laser": 1} {
		if f, _ := s.findJSON("--attr", attr); f.Total != want {
			t.Errorf("after attrs set, find --attr %s: %d, want %d", attr, f.Total, want)
		}
	}
}

func (s *lookupScript) errorRows() {
	printer := s.printer
	s.errors([]errRow{
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
		{[]string{"lookup", "register", "--type", "T", "--endpoint", "h:1", "--lease", "soon"}, `--lease: lease duration "soon"`},
		{[]string{"lookup", "attrs", "drop", printer.Lease.Name}, `attrs "drop"`},
		{[]string{"lookup", "attrs", "add", printer.ID, "--attr", "A.b=1"}, "a service id is not its lease"},
		{[]string{"lookup", "attrs", "add", "djinn-lease:garbage", "--attr", "A.b=1"}, `LEASE "djinn-lease:garbage"`},
		{[]string{"lookup", "attrs", "add", printer.Lease.Name}, "--attr: missing"},
		{[]string{"lookup", "watch", "--transitions", "appear"}, `transition "appear"`},
		{[]string{"lookup", "watch", "--for", "any"}, `--for "any"`},
	})
}

// watchScript is a lookup watch running in the background, read line by
// line.
type watchScript struct {
	t      *testing.T
	lines  chan string
	stderr *strings.Builder
}

func (w *watchScript) next(what string) string {
	w.t.Helper()
	select {
	case l, ok := <-w.lines:
		if !ok {
			w.t.Fatalf("watch ended before %s; stderr: %s", what, w.stderr.String())
		}
		return l
	case <-time.After(30 * time.Second):
		w.t.Fatalf("no %s from watch; stderr: %s", what, w.stderr.String())
	}
	return ""
}

type watchEventJSON struct {
	Seq        int64           `json:"sequence,string"`
	Transition string          `json:"transition"`
	ID         string          `json:"id"`
	Item       *lookupItemJSON `json:"item"`
}

func (w *watchScript) event(what string) watchEventJSON {
	w.t.Helper()
	l := w.next(what)
	var ev watchEventJSON
	if err := json.Unmarshal([]byte(l), &ev); err != nil {
		w.t.Fatalf("%s: %v in %q", what, err, l)
	}
	return ev
}

// TestCLILookupWatch runs djinn lookup watch against a real server: one
// line per service event as a printer comes, changes and goes; an
// interrupt ends it cleanly.
func TestCLILookupWatch(t *testing.T) {
	r := newRig(t)
	cmd := exec.Command(djinnBinary(t), "lookup", "watch", "--type", "Printer", "-o", "json", "--server", r.p.addr)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	w := &watchScript{t: t, lines: make(chan string, 64), stderr: &strings.Builder{}}
	cmd.Stderr = w.stderr
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
	go func() {
		defer close(w.lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			w.lines <- sc.Text()
		}
	}()
	watchEvents(r, w)
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	for range w.lines { // drain until the watcher closes its stdout
	}
	err = cmd.Wait()
	exited = true
	if err != nil {
		t.Fatalf("watch exited with %v after an interrupt; stderr: %s", err, w.stderr.String())
	}
}

// watchEvents: the registration printed first, then a printer's arrival,
// change and removal, and nothing of a scanner.
func watchEvents(r *rig, w *watchScript) {
	t := r.t
	var watching struct {
		EventID     int64     `json:"event_id,string"`
		Listener    string    `json:"listener"`
		Transitions string    `json:"transitions"`
		Lease       leaseJSON `json:"lease"`
	}
	if l := w.next("registration"); json.Unmarshal([]byte(l), &watching) != nil || watching.Listener == "" ||
		watching.Transitions != "match-nomatch|nomatch-match|match-match" || !strings.HasPrefix(watching.Lease.Token, "djinn-lease:") {
		t.Fatalf("watch printed %q first", l)
	}
	var reg lookupRegisteredJSON
	r.json(&reg, "lookup", "register", "--type", "Printer", "--attr", "Name.model=laser", "--endpoint", "127.0.0.1:9")
	r.must("lookup", "register", "--type", "Scanner", "--endpoint", "127.0.0.1:8") // no event: not a printer
	if ev := w.event("the printer's arrival"); ev.Transition != "nomatch-match" || ev.ID != reg.ID || ev.Item == nil || ev.Item.Service != "127.0.0.1:9" || ev.Seq < 1 {
		t.Errorf("on register: %+v", ev)
	}
	r.must("lookup", "attrs", "add", reg.Lease.Token, "--attr", "Status.state=idle")
	if ev := w.event("the printer's change"); ev.Transition != "match-match" || ev.ID != reg.ID || ev.Item == nil || len(ev.Item.Attrs) != 2 {
		t.Errorf("on attrs add: %+v", ev)
	}
	r.must("lease", "cancel", reg.Lease.Name)
	if ev := w.event("the printer's removal"); ev.Transition != "match-nomatch" || ev.ID != reg.ID || ev.Item != nil {
		t.Errorf("on lease cancel: %+v", ev)
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

	out, errs, ok := runDiscover(t, "--locator", loc, "--locator", loc+"/", "--wait", "20s", "-o", "json")
	var found []registrarJSON
	if !ok || json.Unmarshal([]byte(out), &found) != nil {
		t.Fatalf("discover: %q %s", out, errs)
	}
	if len(found) != 1 || found[0].ServiceID != id.String() || found[0].Endpoint != "127.0.0.1:9" || found[0].Locator != loc+"/" ||
		strings.Join(found[0].Groups, ",") != ",lab" {
		t.Errorf("discover printed %+v", found)
	}
	if out, errs, ok := runDiscover(t, "--locator", loc, "--wait", "20s"); !ok || out != id.String()+"  127.0.0.1:9  "+loc+`/  groups="",lab`+"\n" {
		t.Errorf("discover printed %q (%s)", out, errs)
	}

	// A locator nobody answers at: the registrar found is printed, then
	// the error.
	dead := "jini://" + freePort(t)
	out, errs, ok = runDiscover(t, "--locator", loc, "--locator", dead, "--wait", "1s")
	if ok || !strings.HasPrefix(out, id.String()) || strings.Count(strings.TrimSpace(errs), "\n") != 0 || !strings.Contains(errs, "--locator "+dead+"/: no answer within 1s") {
		t.Errorf("discover with a dead locator: ok=%v stdout %q stderr %q", ok, out, errs)
	}
	// A gRPC port given as the locator answers HTTP/2, not discovery: said
	// at once, naming the flag that sets the discovery port.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	go func() { _ = gs.Serve(ln) }()
	defer gs.Stop()
	grpcLoc := "jini://" + ln.Addr().String()
	out, errs, ok = runDiscover(t, "--locator", grpcLoc, "--wait", "1m")
	if ok || out != "" || !strings.Contains(errs, "--locator "+grpcLoc+"/: the port did not answer the discovery protocol, perhaps it is a server's gRPC port: give the port djinn serve's --discovery sets") ||
		strings.Contains(errs, "no answer within") {
		t.Errorf("discover at a gRPC port: ok=%v stdout %q stderr %q", ok, out, errs)
	}
	for _, tc := range []errRow{
		{[]string{"--locator", "http://h:1"}, `--locator "http://h:1"`},
		{[]string{"--wait", "0s"}, `--wait "0s"`},
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

	out, errs, ok := runDiscover(t, "--locator", "jini://"+n.discovery, "--wait", "10s", "-o", "json")
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
