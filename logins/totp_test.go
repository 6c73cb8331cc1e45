package logins

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// An enrolment replaces the user's secret and keeps the others'; the file is read again when
// it changes.
func TestEnrolmentReplacesTheUsersSecret(t *testing.T) {
	file := filepath.Join(t.TempDir(), "totp")
	a1, err := EnrollTOTP(file, "site", "alice")
	if err != nil {
		t.Fatal(err)
	}
	b, err := EnrollTOTP(file, "site", "bob")
	if err != nil {
		t.Fatal(err)
	}
	ts := &totpSecrets{path: file}
	if got, ok, err := ts.secret("alice"); err != nil || !ok || got != a1.Secret {
		t.Fatalf("alice's secret: %q %v %v", got, ok, err)
	}
	a2, err := EnrollTOTP(file, "site", "alice")
	if err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(file)
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("the file's mode %04o, want 0600", st.Mode().Perm())
	}
	os.Chtimes(file, time.Now(), time.Now().Add(time.Second)) // a change within the mtime's grain
	m, err := ReadTOTPFile(file)
	if err != nil || len(m) != 2 || m["alice"] != a2.Secret || m["bob"] != b.Secret || a2.Secret == a1.Secret {
		t.Fatalf("after alice enrolled again: %v %v", m, err)
	}
	if got, _, _ := ts.secret("alice"); got != a2.Secret {
		t.Fatalf("the secrets were not read again: alice's is still the old one")
	}
}
