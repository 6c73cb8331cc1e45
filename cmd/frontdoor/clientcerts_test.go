package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/frontdoor-vdi/frontdoor/pki"
)

// config check warns about an operator CA file or a CRL that a node could not use, and
// still passes the configuration (the files may live on the nodes only).
func TestConfigCheckWarnsAboutClientCertificateFiles(t *testing.T) {
	dir := t.TempDir()
	raw, err := os.ReadFile("../../configs/lab.yaml")
	if err != nil {
		t.Fatal(err)
	}
	caPEM, _, err := pki.GenerateCA("corp")
	if err != nil {
		t.Fatal(err)
	}
	caFile, crl := filepath.Join(dir, "corp-ca.pem"), filepath.Join(dir, "corp.crl")
	os.WriteFile(caFile, caPEM, 0o644)
	os.WriteFile(crl, []byte("not a CRL"), 0o644)
	check := func(ca string) string {
		t.Helper()
		auth := "  auth:\n    client_certificates:\n      - {ca_file: " + strconv.Quote(ca) + ", crl_files: [" + strconv.Quote(crl) + "]}\n"
		cfg := filepath.Join(dir, "site.yaml")
		os.WriteFile(cfg, []byte(strings.Replace(string(raw), "\nsite:\n", "\nsite:\n"+auth, 1)), 0o644)
		_, errs, err := run(t, "config", "check", cfg)
		if err != nil {
			t.Fatalf("config check: %v\n%s", err, errs)
		}
		return errs
	}
	if errs := check(filepath.Join(dir, "missing.pem")); !strings.Contains(errs, "warning: site.auth.client_certificates[0].ca_file: ") || !strings.Contains(errs, "the node does not start") {
		t.Fatalf("a missing CA file: stderr %q, want a warning naming its key", errs)
	}
	if errs := check(caFile); !strings.Contains(errs, "warning: site.auth.client_certificates[0].crl_files[0]: ") || !strings.Contains(errs, "refused until it can be used") {
		t.Fatalf("a CRL that does not parse: stderr %q, want a warning naming its key", errs)
	}
}
