package lint

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// root is the module root, two levels up.
var root = filepath.Join("..", "..")

// cores are the service cores: they must not import gRPC (DESIGN.md 1).
var cores = []string{"internal/lease", "internal/mailbox", "internal/renewal", "internal/txn", "internal/event", "internal/state", "internal/replica", "internal/lock", "internal/lookup", "internal/lds", "internal/join", "internal/wire", "service"}

// deterministic are the packages whose state machines run inside Apply
// (DESIGN.md 2). Every file of them is checked (their sub-packages are
// packages of their own): none reads the clock — the state takes time from
// the command, the leader side from the clock it is given — and none
// starts a goroutine or a timer, except the leader-side files below.
var deterministic = []string{
	"internal/state", "internal/lease", "internal/mailbox", "internal/renewal", "internal/txn",
	"internal/lock", "internal/lookup", "internal/lds", "internal/join", "internal/wire", "service",
}

// leaderSide are the files of deterministic packages that run only on the
// leader, outside Apply, and so may start goroutines and timers. A file
// listed here that starts neither is an error: the list stays exact.
var leaderSide = map[string]string{
	"internal/lease/lessor.go":    "the expiry and checkpoint loops",
	"internal/mailbox/deliver.go": "delivery to targets",
	"internal/mailbox/stream.go":  "a delivery stream's acknowledgement receiver and recorder",
	"internal/mailbox/shared.go":  "a shared delivery stream's receiver and its registrations' senders",
	"internal/renewal/deliver.go": "delivery of renewal events",
	"internal/renewal/renewer.go": "renewing client leases",
	"internal/renewal/service.go": "the service's loops",
	"internal/txn/notify.go":      "telling participants outcomes",
	"internal/txn/pool.go":        "the workers of votes and outcomes",
	"internal/txn/remote.go":      "promoting into another manager",
	"internal/txn/service.go":     "the waitFor of commit and abort",
	"internal/txn/vote.go":        "votes: retries and the slow vote's VOTING record",
	"internal/lock/service.go":    "waiting lock requests and the request sweep",
	"internal/lds/discover.go":    "the discovery runner",
}

func parse(t *testing.T, path string) *ast.File {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly|parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func goFiles(t *testing.T, dir string, tests bool) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(filepath.Join(root, dir), func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "testdata" {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, ".go") && strings.HasSuffix(p, "_test.go") == tests {
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestCoresDoNotImportGRPC(t *testing.T) {
	for _, dir := range cores {
		for _, path := range goFiles(t, dir, false) {
			for _, imp := range parse(t, path).Imports {
				p, _ := strconv.Unquote(imp.Path.Value)
				if strings.HasPrefix(p, "google.golang.org/grpc") {
					t.Errorf("%s imports %s: service cores never import gRPC", path, p)
				}
			}
		}
	}
}

func TestStateMachinesDoNotReadTheClock(t *testing.T) {
	used := map[string]bool{}
	for _, dir := range deterministic {
		paths, err := filepath.Glob(filepath.Join(root, dir, "*.go"))
		if err != nil || len(paths) == 0 {
			t.Fatalf("deterministic package %s: no Go files (%v)", dir, err)
		}
		for _, path := range paths {
			if strings.HasSuffix(path, "_test.go") {
				continue
			}
			rel := filepath.ToSlash(strings.TrimPrefix(path, root+string(filepath.Separator)))
			_, leader := leaderSide[rel]
			starts := checkDeterministic(t, path, rel, leader)
			if leader {
				used[rel] = true
				if !starts {
					t.Errorf("%s is listed as leader-side but starts no goroutine or timer: take it off the list", rel)
				}
			}
		}
	}
	for rel := range leaderSide {
		if !used[rel] {
			t.Errorf("leader-side file %s: not a file of a deterministic package", rel)
		}
	}
}

// checkDeterministic reports the clock reads in the file at path and,
// unless it is leader-side, the goroutines and timers it starts; it
// returns whether it starts any.
func checkDeterministic(t *testing.T, path, rel string, leader bool) (starts bool) {
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.GoStmt:
			starts = true
			if !leader {
				t.Errorf("%s starts a goroutine: code that runs inside Apply starts none", rel)
			}
		case *ast.CallExpr:
			sel, ok := n.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); !ok || x.Name != "time" {
				return true
			}
			switch sel.Sel.Name {
			case "Now", "Since", "Until":
				t.Errorf("%s calls time.%s: the state takes time from the command, the leader side from its injected clock", rel, sel.Sel.Name)
			case "NewTimer", "NewTicker", "After", "AfterFunc", "Sleep", "Tick":
				starts = true
				if !leader {
					t.Errorf("%s calls time.%s: code that runs inside Apply waits for nothing", rel, sel.Sel.Name)
				}
			}
		}
		return true
	})
	return starts
}

// TestSleepsOnlyOnTheFakeClock: a test file that calls time.Sleep must run
// under testing/synctest, where sleeping advances a fake clock instantly.
func TestSleepsOnlyOnTheFakeClock(t *testing.T) {
	for _, path := range goFiles(t, ".", true) {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		s := string(b)
		if strings.Contains(s, "time.Sleep(") && !strings.Contains(s, "synctest.") && !strings.Contains(path, "lint_test.go") {
			t.Errorf("%s sleeps outside testing/synctest: wait for the event itself", path)
		}
	}
}

// TestStateMachinesAreChecked: every package that gives the state machine
// a part (a method Part() state.Part) runs inside Apply, so it is in
// deterministic — a new service cannot slip past the clock lint. Test
// support packages (named …test) are left out: they build parts for tests.
func TestStateMachinesAreChecked(t *testing.T) {
	found := 0
	for _, path := range goFiles(t, ".", false) {
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		if !declaresPart(f) {
			continue
		}
		found++
		dir, _ := filepath.Rel(root, filepath.Dir(path))
		dir = filepath.ToSlash(dir)
		if strings.HasSuffix(dir, "test") || slices.Contains(deterministic, dir) {
			continue
		}
		t.Errorf("%s declares a state machine part but package %s is not in the deterministic list of internal/lint: add it", path, dir)
	}
	if found == 0 {
		t.Error("no package declares Part() state.Part: the lint no longer finds the state machine's parts")
	}
}

// declaresPart reports whether f declares a method Part() state.Part.
func declaresPart(f *ast.File) bool {
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || fn.Recv == nil || fn.Name.Name != "Part" || fn.Type.Results == nil || len(fn.Type.Results.List) != 1 {
			continue
		}
		sel, ok := fn.Type.Results.List[0].Type.(*ast.SelectorExpr)
		if !ok {
			continue
		}
		if x, ok := sel.X.(*ast.Ident); ok && x.Name == "state" && sel.Sel.Name == "Part" {
			return true
		}
	}
	return false
}
