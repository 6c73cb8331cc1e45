package logins

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The console client's secret file is read as the RADIUS secret is: its owner's alone, not
// empty, its trailing newline dropped.
func TestOIDCClientSecretFile(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, body string
		mode       os.FileMode
		want, err  string
	}{
		{"a line", "s3cret\n", 0o600, "s3cret", ""},
		{"readable by others", "s3cret\n", 0o644, "", "may be read by others"},
		{"empty", "\n", 0o600, "", "is empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-"))
			if err := os.WriteFile(p, []byte(tc.body), tc.mode); err != nil {
				t.Fatal(err)
			}
			os.Chmod(p, tc.mode) // past the umask
			b, err := readSecret(p, errOIDCSecretMode)
			got := string(b)
			if got != tc.want || (tc.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("got %q, %v; want %q, an error with %q", got, err, tc.want, tc.err)
			}
		})
	}
}
