package lint

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Nothing the project cites is missing: the design (docs/DESIGN.md, cited
// as "DESIGN.md N") has every section the code and the documents cite,
// every specification cited by prefix is listed in docs/specs.md, and no
// citation names a file the repository does not have.

var (
	// designRef is a citation of the design: "DESIGN.md 6",
	// "DESIGN.md section 7", "DESIGN.md 7a".
	designRef = regexp.MustCompile(`DESIGN\.md(?: section)? ([0-9]+[a-z]?)\b`)
	// designSection is a section heading of docs/DESIGN.md: "## 7a. Clusters".
	designSection = regexp.MustCompile(`(?m)^## ([0-9]+[a-z]?)\. `)
	// specRef is a citation of a specification's section: "LE.2.2".
	specRef = regexp.MustCompile(`\b([A-Z]{2})\.[0-9]+(?:\.[0-9]+)*\b`)
	// specPrefixes are the prefixes of specifications the project cites;
	// other two capitals and a number ("IO.3") are not citations.
	specPrefixes = map[string]bool{"LE": true, "EV": true, "EM": true, "TX": true, "LR": true, "LD": true, "DJ": true, "DU": true, "LU": true}
	// fileRef is a citation of a document by its path, under specs or docs.
	fileRef = regexp.MustCompile(`\b((?:specs|docs)/[A-Za-z0-9_./-]+\.md)\b`)
)

// citingFiles are the files that may cite: source, protos, documents and
// test scripts.
func citingFiles(t *testing.T) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "djinn-data") {
			return filepath.SkipDir
		}
		switch filepath.Ext(p) {
		case ".go", ".proto", ".md", ".txt":
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestCitationsResolve(t *testing.T) {
	design, err := os.ReadFile(filepath.Join(root, "docs", "DESIGN.md"))
	if err != nil {
		t.Fatal(err)
	}
	specs, err := os.ReadFile(filepath.Join(root, "docs", "specs.md"))
	if err != nil {
		t.Fatal(err)
	}
	sections := map[string]bool{}
	for _, m := range designSection.FindAllStringSubmatch(string(design), -1) {
		sections[m[1]] = true
	}
	for _, path := range citingFiles(t) {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		text := string(b)
		for _, m := range designRef.FindAllStringSubmatch(text, -1) {
			if !sections[m[1]] {
				t.Errorf("%s cites DESIGN.md %s, which docs/DESIGN.md does not have", path, m[1])
			}
		}
		for _, m := range specRef.FindAllStringSubmatch(text, -1) {
			if specPrefixes[m[1]] && !strings.Contains(string(specs), "| "+m[1]+" |") {
				t.Errorf("%s cites %s, a specification docs/specs.md does not list", path, m[0])
			}
		}
		for _, m := range fileRef.FindAllStringSubmatch(text, -1) {
			if _, err := os.Stat(filepath.Join(root, m[1])); err != nil {
				if _, err2 := os.Stat(filepath.Join(filepath.Dir(path), m[1])); err2 != nil {
					t.Errorf("%s cites %s, which the repository does not have", path, m[1])
				}
			}
		}
	}
}

// codeSpan is the first code span of a table cell's item: the path in
// "`internal/lease`" or "`*.go` (package `djinn`)".
var codeSpan = regexp.MustCompile("`([^`]+)`")

// TestLayoutListsEveryPackage: the README's project layout table names
// every package of the module with hand-written code (its first cell
// holds paths, `path` or `path/`, separated by commas), and names no path
// that is gone.
func TestLayoutListsEveryPackage(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(b), "\n## Project layout\n")
	if !ok {
		t.Fatal(`README.md has no "## Project layout" section`)
	}
	table, _, _ = strings.Cut(table, "\n## ")
	listed := map[string]bool{}
	for _, line := range strings.Split(table, "\n") {
		first, _, ok := strings.Cut(strings.TrimPrefix(line, "| "), " |")
		if !ok || !strings.HasPrefix(line, "| `") {
			continue
		}
		for _, item := range strings.Split(first, ", ") {
			if m := codeSpan.FindStringSubmatch(item); m != nil {
				listed[strings.TrimSuffix(m[1], "/")] = true
			}
		}
	}
	pkgs := map[string]bool{}
	for _, f := range repositoryFiles(t) {
		if dir := filepath.Dir(f.rel); dir != "." && !strings.HasSuffix(f.rel, "_test.go") {
			pkgs[filepath.ToSlash(dir)] = true
		}
	}
	for p := range pkgs {
		if !listed[p] {
			t.Errorf("package %s is missing from the README's project layout table: add a row saying what it holds", p)
		}
	}
	for p := range listed {
		if strings.Contains(p, "*") {
			continue
		}
		if _, err := os.Stat(filepath.Join(root, p)); err != nil {
			t.Errorf("the README's project layout table names %s, which does not exist", p)
		}
	}
}
