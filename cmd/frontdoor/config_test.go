package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/frontdoor-vdi/frontdoor/configs"
)

// run executes the CLI with args and returns stdout, stderr and the error.
func run(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	root := newRootCmd()
	var out, errb bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errb)
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), errb.String(), err
}

func TestConfigCheckShippedFiles(t *testing.T) {
	files, _ := filepath.Glob("../../configs/*.yaml")
	if len(files) < 3 {
		t.Fatalf("found %d shipped configs, want lab, two-sites and reference", len(files))
	}
	// The reference ships a placeholder password hash, which config check refuses; with a
	// real hash in its place it checks.
	for i, f := range files {
		if filepath.Base(f) != "reference.yaml" {
			continue
		}
		if _, errs, err := run(t, "config", "check", f); err == nil || !strings.Contains(errs, "placeholder") {
			t.Fatalf("config check of the reference with its placeholder: %v\n%s", err, errs)
		}
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		files[i] = filepath.Join(t.TempDir(), "reference.yaml")
		raw = []byte(strings.ReplaceAll(string(raw), configs.PasswordPlaceholder, "$2a$10$hmIm37EQl2GI6WzyFg.kUe2OoNhztKxrxmbZEcRHkzoi.ekBqG9n2"))
		if err := os.WriteFile(files[i], raw, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	out, errs, err := run(t, append([]string{"config", "check"}, files...)...)
	if err != nil {
		t.Fatalf("config check %v: %v\n%s", files, err, errs)
	}
	for _, want := range []string{"hq    primary", "desktop.vdi.lab.test.", "preferred sites amer"} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
}

func TestConfigCheckInvalidFileFails(t *testing.T) {
	f := "../../configs/testdata/invalid/two-primary-zones.yaml"
	_, errs, err := run(t, "config", "check", "../../configs/lab.yaml", f)
	if err == nil {
		t.Fatal("config check of an invalid file succeeded")
	}
	want := f + `:5: zones[1].primary: two primary zones: "hq" and "east"`
	if !strings.Contains(errs, want) {
		t.Errorf("stderr = %q, want it to contain %q", errs, want)
	}
}

func TestVersion(t *testing.T) {
	out, _, err := run(t, "version")
	if err != nil || !strings.HasPrefix(out, "frontdoor ") {
		t.Errorf("version = %q, %v", out, err)
	}
}

// TestReadmeConfigCheckExample runs the README's config check example and compares its output.
func TestReadmeConfigCheckExample(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(b), "<!-- BEGIN config-check-example -->")
	block, _, ok2 := strings.Cut(block, "<!-- END config-check-example -->")
	if !ok || !ok2 {
		t.Fatal("README.md has no config-check-example block")
	}
	lines := strings.Split(strings.TrimSpace(block), "\n")
	// lines: ``` / $ command / output... / ```
	cmdline := strings.TrimPrefix(lines[1], "$ frontdoor ")
	want := strings.Join(lines[2:len(lines)-1], "\n")
	args := strings.Fields(cmdline)
	for i, a := range args {
		if strings.HasPrefix(a, "configs/") {
			args[i] = "../../" + a
		}
	}
	_, errs, err := run(t, args...)
	if err == nil {
		t.Fatalf("README example %q succeeded; it shows a failure", cmdline)
	}
	got := strings.TrimSpace(strings.ReplaceAll(strings.Split(errs, "\nError:")[0], "../../", ""))
	if got != want {
		t.Errorf("README example output differs\ngot:  %s\nwant: %s", got, want)
	}
}
