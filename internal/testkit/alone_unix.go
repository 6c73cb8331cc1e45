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

// turnsLock is the file whose flock the second tier's tests take.
var turnsLock = filepath.Join(os.TempDir(), "frontdoor-site-tests.lock")

// Alone makes t run while no other test that called Alone or Beside runs on this machine, in
// any test process, and returns once that holds: a whole site (its etcd, its node
// processes, its desktops and clients) measures when a client sees a failure, and two sites
// on two busy cores, or a site beside etcd clusters, would measure each other. `go test
// ./...` runs two packages at once; their site tests take turns, the fast tests go on beside
// them. The turn ends with t (or with its process).
func Alone(t testing.TB) {
	t.Helper()
	turnAt(t, turnsLock, true)
}

// Beside makes t run while no test that called Alone runs, beside other tests that called
// Beside (an etcd cluster, Pebble: heavy, but measuring no failover).
func Beside(t testing.TB) {
	t.Helper()
	turnAt(t, turnsLock, false)
}

// holding are the tests of this process that hold a turn, by the lock's path and the test's
// name, and whether alone: a test (or a subtest of one) that asks again already has its
// turn. A second flock of the same file by the same process would wait for itself.
var holding struct {
	sync.Mutex
	tests map[[2]string]bool
}

// turnAt takes t's turn at the lock of path: alone (flock's exclusive lock) or beside the
// others that are not (a shared one).
func turnAt(t testing.TB, path string, alone bool) {
	t.Helper()
	holding.Lock()
	for k, held := range holding.tests {
		if k[0] == path && (t.Name() == k[1] || strings.HasPrefix(t.Name(), k[1]+"/")) {
			holding.Unlock()
			if alone && !held {
				t.Fatal("a test that runs beside others asks to run alone: ask for that first")
			}
			return
		}
	}
	holding.Unlock()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		t.Fatalf("the second tier's lock: %v", err)
	}
	how := syscall.LOCK_SH
	if alone {
		how = syscall.LOCK_EX
	}
	for {
		err = syscall.Flock(int(f.Fd()), how)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		f.Close()
		t.Fatalf("the second tier's lock: %v", err)
	}
	key := [2]string{path, t.Name()}
	holding.Lock()
	if holding.tests == nil {
		holding.tests = map[[2]string]bool{}
	}
	holding.tests[key] = alone
	holding.Unlock()
	t.Cleanup(func() {
		holding.Lock()
		delete(holding.tests, key)
		holding.Unlock()
		f.Close() // closing the file lets the lock go
	})
}
