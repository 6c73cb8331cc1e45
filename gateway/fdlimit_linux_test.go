package gateway

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"syscall"
	"testing"

	"github.com/frontdoor-vdi/frontdoor/internal/testkit"
)

// holdDescriptors opens /dev/null until the process is out of descriptors (EMFILE), having
// lowered the soft limit to at most 4096 so that this stays quick whatever the host's limit;
// release closes them and restores the limit (also at the test's end); topUp takes again
// those that something else closed since (a goroutine of an earlier test, still closing).
func holdDescriptors(t *testing.T) (release, topUp func()) {
	t.Helper()
	var orig syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &orig); err != nil {
		t.Fatal(err)
	}
	limit := orig
	if limit.Cur > 4096 {
		limit.Cur = 4096
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &limit); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex // guards held and released
	var held []int
	released := false
	release = func() {
		mu.Lock()
		defer mu.Unlock()
		if released {
			return
		}
		released = true
		for _, fd := range held {
			syscall.Close(fd)
		}
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &orig); err != nil {
			t.Errorf("restoring RLIMIT_NOFILE: %v", err)
		}
	}
	t.Cleanup(release)
	fill := func() error {
		for range limit.Cur + 1 {
			fd, err := syscall.Open("/dev/null", syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
			if err == syscall.EMFILE {
				return nil
			}
			if err != nil {
				return fmt.Errorf("holding descriptors: %w", err)
			}
			held = append(held, fd)
		}
		return fmt.Errorf("%d descriptors held and still no EMFILE", len(held))
	}
	topUp = func() {
		mu.Lock()
		defer mu.Unlock()
		if !released {
			if err := fill(); err != nil {
				t.Error(err)
			}
		}
	}
	mu.Lock()
	err := fill()
	mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	return release, topUp
}

// A gateway at its open-files limit cannot accept channels, though the kernel still completes
// their TCP handshakes (a TCP check of the port reads up); its health port reads down (500)
// for as long. Once descriptors are freed it accepts the connection that waited, reads up
// again and carries a new TLS channel.
func TestAGatewayAtTheOpenFilesLimitRecovers(t *testing.T) {
	r, s := startOne(t, true)
	if st := r.healthStatus(t); st != http.StatusOK {
		t.Fatalf("health before: %d, want 200", st)
	}
	// Made now, connected once no descriptor is left: one, and another each time a
	// descriptor that something else closed meanwhile may have let the gateway take the last.
	waiting := make([]int, 20)
	for i := range waiting {
		fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer syscall.Close(fd)
		waiting[i] = fd
	}
	release, topUp := holdDescriptors(t)
	connected := 0
	connect := func() {
		t.Helper()
		if connected == len(waiting) {
			return
		}
		if err := syscall.Connect(waiting[connected], &syscall.SockaddrInet4{Port: int(r.port), Addr: [4]byte{127, 0, 50, 1}}); err != nil {
			release()
			t.Fatalf("connecting to the channel port at the limit: %v, want the kernel to complete it", err)
		}
		connected++
	}
	connect()
	polls := 0
	testkit.WaitFor(t, "the gateway at the open-files limit still says it accepts", func() bool {
		if r.gw.cannotAccept() {
			return true
		}
		if polls++; polls%100 == 0 { // about half a second
			topUp()
			connect()
		}
		return false
	})
	// No socket can be opened to ask the health port now: its handler answers, as it would
	// to a probe that got in.
	rec := httptest.NewRecorder()
	r.gw.serveHealth(rec, httptest.NewRequest(http.MethodHead, "/favicon.ico", nil))
	release()
	if rec.Code != http.StatusInternalServerError {
		t.Fatalf("health at the open-files limit: %d, want 500 (down)", rec.Code)
	}

	// The loop's next try, within acceptloop.Max, takes the connection that waited.
	testkit.WaitFor(t, "the gateway does not accept again once descriptors are freed", func() bool { return !r.gw.cannotAccept() })
	if st := r.healthStatus(t); st != http.StatusOK {
		t.Fatalf("health after the descriptors were freed: %d, want 200", st)
	}
	c := r.launchTCP(t)
	msg := []byte("a channel after the open-files limit")
	go func() { c.Write(msg); c.CloseWrite() }()
	got, err := io.ReadAll(c)
	if err != nil || !bytes.Equal(got, msg) {
		t.Fatalf("echo through the gateway: %q, %v; want %q", got, err, msg)
	}
	c.Close()
	s.want(t, "disconnected s-1 gw-1")
}
