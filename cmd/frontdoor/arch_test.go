package main

import (
	"bytes"
	"encoding/json"
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/frontdoor-vdi/frontdoor"

// mayImport lists, for each top-level folder, the project folders it may import: the house's
// one-way imports (README). gslb, proxy, health and broker never import each other; they meet
// through interfaces wired in cmd, node or lab. A folder missing here may import nothing of the project.
var mayImport = map[string][]string{
	"configs":  {},
	"internal": {}, // small helpers shared by folders that may not import each other
	"zonemap":  {"configs"},
	"health":   {"configs", "internal"},
	"gslb":     {"zonemap", "configs", "internal"},
	"broker":   {"configs"},
	"store":    {"broker", "configs"},
	"proxy":    {"configs", "ticket", "internal"}, // zonemap, gslb, health, broker: through interfaces it owns
	"ticket":   {},
	"pki":      {"configs", "internal"}, // the site CA, party certificates, ACME, client CAs and CRLs
	"logins":   {"configs", "ticket", "pki", "internal"},
	"wire":     {}, // the JSON types that cross a process boundary, for both ends
	"gateway":  {"ticket", "configs", "internal"},
	"agent":    {"configs", "ticket", "internal"},
	"api":      {"broker", "zonemap", "health", "configs", "ticket", "pki", "logins", "wire", "internal"},
	"client":   {"ticket", "configs", "wire", "internal"},
	"node":     {"configs", "zonemap", "health", "gslb", "broker", "store", "proxy", "ticket", "pki", "logins", "api", "gateway", "internal", "wire"},
	"lab":      {"node", "configs", "zonemap", "health", "gslb", "broker", "store", "proxy", "ticket", "pki", "logins", "api", "client", "gateway", "agent", "internal", "wire"},
	"drill":    {"node", "configs", "zonemap", "health", "gslb", "broker", "store", "proxy", "ticket", "pki", "logins", "api", "client", "gateway", "agent", "lab", "internal", "wire"},
	"bench":    {"configs", "zonemap", "health", "gslb", "broker", "store", "proxy", "ticket", "pki", "logins", "api", "client", "gateway", "agent", "lab", "internal", "wire"},
	"cmd":      {"node", "configs", "zonemap", "health", "gslb", "broker", "store", "proxy", "ticket", "pki", "logins", "api", "client", "gateway", "agent", "lab", "drill", "wire"},
}

// stdlibOnly lists folders whose code may import nothing outside the standard library and the
// listed modules.
var stdlibOnly = map[string][]string{
	"configs": {"go.yaml.in/yaml/v3"},
	"broker":  {},
	"ticket":  {},
	"wire":    {},
}

// noNetwork lists folders that must not touch the network: pure logic.
var noNetwork = []string{"broker", "configs"}

type listedPackage struct {
	ImportPath string
	Dir        string
	Doc        string
	Standard   bool
	Imports    []string
	Name       string
	// TestGoFiles and XTestGoFiles are the package's test files, in and beside it.
	TestGoFiles, XTestGoFiles []string
}

func listPackages(t *testing.T) []listedPackage {
	t.Helper()
	cmd := exec.Command("go", "list", "-json", module+"/...")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("go list: %v\n%s", err, errb.String())
	}
	var pkgs []listedPackage
	dec := json.NewDecoder(&out)
	for dec.More() {
		var p listedPackage
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) < 2 {
		t.Fatalf("go list found only %d packages", len(pkgs))
	}
	return pkgs
}

// folder returns the top-level folder of a project import path.
func folder(path string) string {
	rel := strings.TrimPrefix(strings.TrimPrefix(path, module), "/")
	f, _, _ := strings.Cut(rel, "/")
	return f
}

func isStd(path string) bool {
	first, _, _ := strings.Cut(path, "/")
	return !strings.Contains(first, ".")
}

// TestImportRules fails when a package imports one that mayImport does not allow.
func TestImportRules(t *testing.T) {
	for _, p := range listPackages(t) {
		from := folder(p.ImportPath)
		allowed, known := mayImport[from]
		if !known {
			t.Errorf("%s: folder %q has no import rule; add it to mayImport", p.ImportPath, from)
			continue
		}
		for _, imp := range p.Imports {
			if strings.HasPrefix(imp, module+"/") {
				to := folder(imp)
				if to == "cmd" {
					t.Errorf("%s imports %s: nothing imports cmd", p.ImportPath, imp)
				} else if to != from && !contains(allowed, to) {
					t.Errorf("%s imports %s: %s may import only %v", p.ImportPath, imp, from, allowed)
				}
				continue
			}
			if extra, ok := stdlibOnly[from]; ok && !isStd(imp) && !contains(extra, imp) {
				t.Errorf("%s imports %s: %s may import only the standard library and %v", p.ImportPath, imp, from, extra)
			}
			if contains(noNetwork, from) && (imp == "net" || strings.HasPrefix(imp, "net/http") || imp == "crypto/tls") {
				t.Errorf("%s imports %s: %s is pure logic with no network code", p.ImportPath, imp, from)
			}
		}
	}
}

// TestDocs fails when a package has no doc comment or an exported name has no comment that
// starts with its name.
func TestDocs(t *testing.T) {
	for _, p := range listPackages(t) {
		if strings.TrimSpace(p.Doc) == "" {
			t.Errorf("%s has no package doc comment", p.ImportPath)
		}
		if p.Name == "main" {
			continue
		}
		for _, miss := range undocumented(t, p.Dir) {
			t.Errorf("%s: %s", p.ImportPath, miss)
		}
	}
}

func undocumented(t *testing.T, dir string) []string {
	t.Helper()
	fset := token.NewFileSet()
	files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	var asts []*ast.File
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		a, err := parser.ParseFile(fset, f, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		asts = append(asts, a)
	}
	if len(asts) == 0 {
		return nil
	}
	d, err := doc.NewFromFiles(fset, asts, "x")
	if err != nil {
		t.Fatal(err)
	}
	var miss []string
	// check wants text to start with name (or "A/An/The name"); shown names what is checked.
	check := func(shown, name, text string) {
		if !ast.IsExported(name) {
			return
		}
		first := strings.Fields(text)
		if len(first) == 0 {
			miss = append(miss, shown+" has no doc comment")
			return
		}
		w := strings.TrimRight(first[0], ",.:")
		if w != name && !(len(first) > 1 && (w == "A" || w == "An" || w == "The") && strings.TrimRight(first[1], ",.:") == name) {
			miss = append(miss, shown+"'s doc comment does not start with its name")
		}
	}
	for _, f := range d.Funcs {
		check("func "+f.Name, f.Name, f.Doc)
	}
	for _, ty := range d.Types {
		check("type "+ty.Name, ty.Name, ty.Doc)
		for _, f := range ty.Funcs {
			check("func "+f.Name, f.Name, f.Doc)
		}
		if !ast.IsExported(ty.Name) {
			continue
		}
		for _, m := range ty.Methods {
			check("method "+ty.Name+"."+m.Name, m.Name, m.Doc)
		}
	}
	sort.Strings(miss)
	return miss
}

// Every package with tests checks them for leaked goroutines: its TestMain is testkit's.
func TestEveryPackageChecksLeaks(t *testing.T) {
	for _, p := range listPackages(t) {
		files := append(p.TestGoFiles, p.XTestGoFiles...)
		if len(files) == 0 {
			continue
		}
		checked := false
		for _, f := range files {
			src, err := os.ReadFile(filepath.Join(p.Dir, f))
			if err != nil {
				t.Fatal(err)
			}
			main := bytes.Contains(src, []byte("func TestMain(m *testing.M)"))
			if main && (bytes.Contains(src, []byte("testkit.Main")) || p.Name == "testkit" && bytes.Contains(src, []byte("Main(m)"))) {
				checked = true
				break
			}
		}
		if !checked {
			t.Errorf("%s: no TestMain of testkit.Main or testkit.MainFastChecked (goroutine leaks go unseen)", p.ImportPath)
		}
	}
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}
