package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/frontdoor-vdi/frontdoor/internal/testkit"
	"github.com/frontdoor-vdi/frontdoor/store/etcdembed"
)

// TestInitMakesASecretAndOneSiteIdentity: init writes a 0600 secret once, then creates the
// site identity in a real etcd; a second init (or any node) finds the same CA.
func TestInitMakesASecretAndOneSiteIdentity(t *testing.T) {
	testkit.SecondTier(t)
	dir := t.TempDir()
	secret := filepath.Join(dir, "store.secret")
	if _, _, err := run(t, "init", "--secret", secret); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(secret); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("secret file %v %v, want mode 0600", fi, err)
	}
	if _, _, err := run(t, "init", "--secret", secret); err == nil {
		t.Fatal("init overwrote an existing secret")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := etcdembed.Start(ctx, etcdembed.Options{Dir: filepath.Join(dir, "etcd")})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cfg := filepath.Join(dir, "site.yaml")
	site := fmt.Sprintf("site:\n  name: t\n  store: {backend: etcd, endpoints: [%s], secret_file: %q}\nzones:\n  - {name: hq, primary: true}\n",
		strings.Join(c.Endpoints(), ", "), secret)
	if err := os.WriteFile(cfg, []byte(site), 0o600); err != nil {
		t.Fatal(err)
	}
	fingerprint := regexp.MustCompile(`SHA-256 ([0-9a-f]{64})`)
	var first string
	for i := 0; i < 2; i++ {
		out, _, err := run(t, "init", "--config", cfg, "--data", dir)
		if err != nil {
			t.Fatal(err)
		}
		m := fingerprint.FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("init printed no CA fingerprint:\n%s", out)
		}
		if i == 0 {
			first = m[1]
		} else if m[1] != first {
			t.Fatalf("the second init found another CA: %s, then %s", first, m[1])
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "ca.pem")); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(secret, []byte("bm90IGEgc2VjcmV0Cg==\n"), 0o600)
	if _, _, err := run(t, "init", "--config", cfg, "--data", dir); err == nil || !strings.Contains(err.Error(), "store secret") {
		t.Fatalf("a bad secret: %v, want a store secret error", err)
	}
}
