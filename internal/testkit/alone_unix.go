//go:build unix

package testkit

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// Alone makes t run while no other test that called Alone runs on this machine, in any test
// process, and returns once that holds: a whole site (its etcd, its node processes, its
// desktops and clients) measures when a client sees a failure, and two sites on two busy
// cores would measure each other. `go test ./...` runs two packages at once; their site
// tests take turns, the rest go on beside them. The turn ends with t (or with its process).
func Alone(t testing.TB) {
	t.Helper()
	aloneAt(t, filepath.Join(os.TempDir(), "frontdoor-site-tests.lock"))
}

// aloneAt is Alone with the lock's file at path.
func aloneAt(t testing.TB, path string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		t.Fatalf("the site tests' lock: %v", err)
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		f.Close()
		t.Fatalf("the site tests' lock: %v", err)
	}
	t.Cleanup(func() { f.Close() }) // closing the file lets the lock go
}
