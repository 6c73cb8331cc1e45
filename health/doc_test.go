package health

import (
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"io/fs"
	"strings"
	"testing"
)

// TestDocs checks the package doc and that every exported name's comment starts with it.
func TestDocs(t *testing.T) {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, ".", func(fi fs.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, f := range pkgs["health"].Files {
		files = append(files, f)
	}
	p, err := doc.NewFromFiles(fset, files, "github.com/frontdoor-vdi/frontdoor/health")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(p.Doc, "Package health ") {
		t.Errorf("package doc starts %.30q", p.Doc)
	}
	check := func(name, text string) {
		if !strings.HasPrefix(text, name+" ") && !strings.HasPrefix(text, "The ") && !strings.HasPrefix(text, "A ") {
			t.Errorf("%s: doc %.40q does not start with its name", name, text)
		}
	}
	for _, f := range p.Funcs {
		check(f.Name, f.Doc)
	}
	for _, ty := range p.Types {
		check(ty.Name, ty.Doc)
		for _, f := range append(ty.Funcs, ty.Methods...) {
			check(f.Name, f.Doc)
		}
	}
}
