package lint

import (
	"go/ast"
	"go/parser"
	"go/token"
	"regexp"
	"strconv"
	"testing"
)

// sectionRef is a bare reference to a section of a Jini specification, as
// "(TX.2.5)" or "(LR.2: …)", or of a document it does not name, as
// "(spec 2.3)".
var sectionRef = regexp.MustCompile(`\(\s*((TX|LR|LE|EM|LD|EV|DJ|DU|LU|CC)[ .]|(spec|section|§)\s*)[0-9]`)

// TestErrorsCiteNoSection: an error says its cause and the next step in
// words; a bare section number of a document the user may not have is no
// help. Documentation may cite the specifications by name and section; the
// text of errors may not.
func TestErrorsCiteNoSection(t *testing.T) {
	for _, path := range goFiles(t, ".", false) {
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || !makesError(call) {
				return true
			}
			for _, arg := range call.Args {
				lit, ok := arg.(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					continue
				}
				if s, _ := strconv.Unquote(lit.Value); sectionRef.MatchString(s) {
					t.Errorf("%s: error %q cites a section: say the cause and the next step instead", path, s)
				}
			}
			return true
		})
	}
}

// makesError reports whether call makes an error: djinn.Errorf, fmt.Errorf,
// errors.New.
func makesError(call *ast.CallExpr) bool {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	pkg, ok := sel.X.(*ast.Ident)
	if !ok {
		return false
	}
	switch pkg.Name + "." + sel.Sel.Name {
	case "djinn.Errorf", "fmt.Errorf", "errors.New", "status.Errorf", "status.Error":
		return true
	}
	return false
}
