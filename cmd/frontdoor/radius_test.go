package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// config check warns about a RADIUS secret file that cannot be read, that others may read
// or that is empty, and still passes the configuration (the file may live on the nodes
// only).
func TestConfigCheckWarnsAboutTheRADIUSSecret(t *testing.T) {
	dir := t.TempDir()
	raw, err := os.ReadFile("../../configs/lab.yaml")
	if err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(dir, "radius-secret")
	cfg := filepath.Join(dir, "site.yaml")
	site := strings.Replace(string(raw), "\nsite:\n", "\nsite:\n  auth: {radius: {servers: [\"127.0.0.1:1812\"], secret_file: "+strconv.Quote(secret)+"}}\n", 1)
	if err := os.WriteFile(cfg, []byte(site), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		prepare func()
		want    string // "" for no warning
	}{
		{"a missing file", func() {}, "warning: site.auth.radius.secret_file"},
		{"a good file", func() { os.WriteFile(secret, []byte("s3cret\n"), 0o600) }, ""},
		{"a file others may read", func() { os.Chmod(secret, 0o644) }, "read by others"},
		{"an empty file", func() { os.Chmod(secret, 0o600); os.WriteFile(secret, nil, 0o600) }, "empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.prepare()
			_, errs, err := run(t, "config", "check", cfg)
			if err != nil || (tc.want == "") != (errs == "") || !strings.Contains(errs, tc.want) {
				t.Fatalf("config check: %v, stderr %q; want no error and a warning of %q", err, errs, tc.want)
			}
		})
	}
}
