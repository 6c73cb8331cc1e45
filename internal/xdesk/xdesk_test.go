package xdesk

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/frontdoor-vdi/frontdoor/internal/testkit"
)

func TestMain(m *testing.M) { testkit.Main(m) }

// testWithin bounds each test's waits.
const testWithin = time.Minute

// need skips the test when a binary it runs is missing, unless the environment variable CI
// is "true": CI installs them all, so there a missing one is a failure.
func need(t *testing.T, names ...string) {
	t.Helper()
	for _, name := range names {
		if _, err := lookPath([]string{name}, "/usr/sbin", "/usr/local/sbin"); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%v (.ci/run installs it)", err)
			}
			t.Skipf("%v; skipping (with CI=true this fails)", err)
		}
	}
}

// testContext is a context that ends with the test or testWithin from now.
func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testWithin)
	t.Cleanup(cancel)
	return ctx
}

// startXvnc starts an Xvnc as o asks (in a fresh directory), closed when the test ends.
func startXvnc(t *testing.T, ctx context.Context, o XvncOptions) *Xvnc {
	t.Helper()
	o.Dir = t.TempDir()
	x, err := StartXvnc(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := x.Close(); err != nil {
			t.Errorf("closing Xvnc: %v", err)
		}
	})
	return x
}

func TestErrNotInstalledNamesBinaryAndPackage(t *testing.T) {
	t.Parallel()
	err := notInstalled("Xvnc")
	if want := "Xvnc is not installed (apt-get install tigervnc-standalone-server)"; err.Error() != want {
		t.Errorf("got %q, want %q", err, want)
	}
	if !errors.Is(err, ErrNotInstalled) {
		t.Errorf("%v is not ErrNotInstalled", err)
	}
}
