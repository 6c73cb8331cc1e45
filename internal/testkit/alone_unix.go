//go:build unix

package testkit

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
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

// holding are the tests of this process that hold a lock, by the lock's path and the test's
// name: a test (or a subtest of one) that asks again already has its turn. A second flock of
// the same file by the same process would wait for itself.
var holding struct {
	sync.Mutex
	tests map[[2]string]bool
}

// aloneAt is Alone with the lock's file at path.
func aloneAt(t testing.TB, path string) {
	t.Helper()
	holding.Lock()
	for k := range holding.tests {
		if k[0] == path && (t.Name() == k[1] || strings.HasPrefix(t.Name(), k[1]+"/")) {
			holding.Unlock()
			return
		}
	}
	holding.Unlock()
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
	key := [2]string{path, t.Name()}
	holding.Lock()
	if holding.tests == nil {
		holding.tests = map[[2]string]bool{}
	}
	holding.tests[key] = true
	holding.Unlock()
	t.Cleanup(func() {
		holding.Lock()
		delete(holding.tests, key)
		holding.Unlock()
		f.Close() // closing the file lets the lock go
	})
}
