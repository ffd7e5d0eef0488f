package lint

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// root is the module root, two levels up.
var root = filepath.Join("..", "..")

// cores are the service cores: they must not import gRPC (DESIGN.md 1).
var cores = []string{"internal/lease", "internal/mailbox", "internal/renewal", "internal/txn", "internal/event", "internal/state", "internal/replica", "internal/lock", "internal/lookup", "internal/lds", "internal/wire", "service"}

// deterministic lists files whose code runs inside Apply and so must not
// read the clock (DESIGN.md 2).
var deterministic = []string{
	"internal/state/state.go",
	"internal/lds/doc.go",
	"internal/lds/registrar.go",
	"internal/lds/snapshot.go",
	"internal/lds/state.go",
	"internal/lease/table.go",
	"internal/mailbox/state.go",
	"internal/renewal/state.go",
	"internal/renewal/schedule.go",
	"internal/txn/state.go",
	"internal/lock/deadlock.go",
	"internal/lock/doc.go",
	"internal/lock/holder.go",
	"internal/lock/inspect.go",
	"internal/lock/mode.go",
	"internal/lock/snapshot.go",
	"internal/lock/state.go",
	"internal/lock/table.go",
	"internal/lock/txn.go",
	"internal/lookup/browse.go",
	"internal/wire/wire.go",
	"internal/wire/service.go",
	"internal/lookup/state.go",
	"internal/lookup/doc.go",
	"internal/lookup/item.go",
	"internal/lookup/policy.go",
	"internal/lookup/registry.go",
	"internal/lookup/snapshot.go",
	"internal/lookup/watch.go",
	"service/attributes.go",
	"service/check.go",
	"service/hierarchy.go",
	"service/item.go",
	"service/limits.go",
	"service/match.go",
	"service/record.go",
	"service/value.go",
	"service/wire.go",
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
	for _, rel := range deterministic {
		b, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			t.Fatal(err)
		}
		for _, banned := range []string{"time.Now(", "time.Since(", "time.Until(", "go func"} {
			if strings.Contains(string(b), banned) {
				t.Errorf("%s uses %s: Apply takes time from the command and starts no goroutines", rel, banned)
			}
		}
	}
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
