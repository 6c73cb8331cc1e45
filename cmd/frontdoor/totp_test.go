package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/frontdoor-vdi/frontdoor/logins"
)

// totp enroll writes the user's secret to the site's TOTP file (mode 0600) and prints the
// otpauth:// URL and the secret; to a file the site does not name yet it says what to set.
func TestTOTPEnroll(t *testing.T) {
	dir := t.TempDir()
	raw, err := os.ReadFile("../../configs/lab.yaml")
	if err != nil {
		t.Fatal(err)
	}
	secrets := filepath.Join(dir, "totp-secrets")
	withFile := filepath.Join(dir, "with-file.yaml")
	os.WriteFile(withFile, []byte(strings.Replace(string(raw), "\nsite:\n", "\nsite:\n  auth: {totp_file: "+strconv.Quote(secrets)+"}\n", 1)), 0o644)
	out, errs, err := run(t, "totp", "enroll", "--config", withFile, "--user", "alice")
	if err != nil {
		t.Fatalf("totp enroll: %v\n%s", err, errs)
	}
	m, err := logins.ReadTOTPFile(secrets)
	if err != nil || m["alice"] == "" {
		t.Fatalf("the TOTP file after the enrolment: %v, %v", m, err)
	}
	for _, want := range []string{"enrolled alice", "otpauth://totp/lab:alice?", "secret:      " + m["alice"], "--otp CODE"} {
		if !strings.Contains(out, want) {
			t.Errorf("the output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "does not read this file") {
		t.Errorf("it says to set the file the site names already:\n%s", out)
	}
	if st, _ := os.Stat(secrets); st.Mode().Perm() != 0o600 {
		t.Errorf("the file's mode is %04o, want 0600", st.Mode().Perm())
	}

	other := filepath.Join(dir, "other-secrets")
	out, errs, err = run(t, "totp", "enroll", "--config", "../../configs/lab.yaml", "--user", "bob", "--file", other)
	if err != nil || !strings.Contains(out, "totp_file: "+other) {
		t.Fatalf("totp enroll --file for a site without one: %v\n%s%s", err, out, errs)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"a site without a TOTP file and no --file", []string{"--config", "../../configs/lab.yaml", "--user", "bob"}, "give --file PATH"},
		{"a user the site does not have", []string{"--config", withFile, "--user", "mallory"}, `no user "mallory"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, errs, err := run(t, append([]string{"totp", "enroll"}, tc.args...)...)
			if err == nil || !strings.Contains(err.Error()+errs, tc.want) {
				t.Fatalf("err %v, stderr %q; want %q", err, errs, tc.want)
			}
		})
	}
}

// config check warns about a TOTP file that cannot be read or that others may read, and
// still passes the configuration (the file may live on the nodes only).
func TestConfigCheckWarnsAboutTheTOTPFile(t *testing.T) {
	dir := t.TempDir()
	raw, err := os.ReadFile("../../configs/lab.yaml")
	if err != nil {
		t.Fatal(err)
	}
	secrets := filepath.Join(dir, "totp-secrets")
	cfg := filepath.Join(dir, "site.yaml")
	os.WriteFile(cfg, []byte(strings.Replace(string(raw), "\nsite:\n", "\nsite:\n  auth: {totp_file: "+strconv.Quote(secrets)+"}\n", 1)), 0o644)
	if _, errs, err := run(t, "config", "check", cfg); err != nil || !strings.Contains(errs, "warning: site.auth.totp_file") {
		t.Fatalf("a missing TOTP file: %v, stderr %q; want a warning and no error", err, errs)
	}
	if _, err := logins.EnrollTOTP(secrets, "lab", "alice"); err != nil {
		t.Fatal(err)
	}
	if _, errs, err := run(t, "config", "check", cfg); err != nil || errs != "" {
		t.Fatalf("a good TOTP file: %v, stderr %q", err, errs)
	}
	os.Chmod(secrets, 0o640)
	if _, errs, _ := run(t, "config", "check", cfg); !strings.Contains(errs, "read by others") {
		t.Fatalf("a TOTP file of mode 0640: stderr %q, want a warning about its mode", errs)
	}
}
