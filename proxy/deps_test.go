package proxy

import (
	"go/doc"
	"go/parser"
	"go/token"
	"io/fs"
	"os/exec"
	"strings"
	"testing"
)

// TestImportsStayOneWay guards the package rule: proxy meets gslb, broker, health and zonemap
// only through interfaces it owns.
func TestImportsStayOneWay(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	out, err := exec.Command("go", "list", "-deps", ".", "./proxyproto").Output()
	if err != nil {
		t.Fatalf("go list: %v", err) // a guard that cannot run must not pass
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, bad := range []string{"/gslb", "/broker", "/health", "/zonemap", "/store", "/api"} {
			if strings.HasPrefix(dep, "github.com/frontdoor-vdi/frontdoor") && strings.Contains(dep, bad) {
				t.Errorf("proxy depends on %s", dep)
			}
		}
	}
}

// TestPackageDocs checks that the packages and every exported name are documented, and that
// each doc comment starts with the name.
func TestPackageDocs(t *testing.T) {
	for _, dir := range []string{".", "proxyproto"} {
		fset := token.NewFileSet()
		pkgs, err := parser.ParseDir(fset, dir, func(fi fs.FileInfo) bool {
			return !strings.HasSuffix(fi.Name(), "_test.go")
		}, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pkgs {
			d := doc.New(p, "./"+dir, 0)
			if d.Doc == "" {
				t.Errorf("package %s has no doc comment", d.Name)
			}
			check := func(name, text string) {
				if !strings.HasPrefix(text, name+" ") && !strings.HasPrefix(text, "A "+name+" ") {
					t.Errorf("%s: doc %q does not start with the name", name, text)
				}
			}
			for _, f := range d.Funcs {
				check(f.Name, f.Doc)
			}
			for _, ty := range d.Types {
				check(ty.Name, ty.Doc)
				for _, f := range append(ty.Funcs, ty.Methods...) {
					check(f.Name, f.Doc)
				}
			}
		}
	}
}
