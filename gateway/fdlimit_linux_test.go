package gateway

import (
	"bytes"
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
// release closes them and restores the limit (also at the test's end).
func holdDescriptors(t *testing.T) (release func()) {
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
	var held []int
	var once sync.Once
	release = func() {
		once.Do(func() {
			for _, fd := range held {
				syscall.Close(fd)
			}
			if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &orig); err != nil {
				t.Errorf("restoring RLIMIT_NOFILE: %v", err)
			}
		})
	}
	t.Cleanup(release)
	for range limit.Cur + 1 {
		fd, err := syscall.Open("/dev/null", syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
		if err == syscall.EMFILE {
			return release
		}
		if err != nil {
			t.Fatalf("holding descriptors: %v", err)
		}
		held = append(held, fd)
	}
	t.Fatalf("%d descriptors held and still no EMFILE", len(held))
	return release
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
	// Made now, connected once no descriptor is left.
	waiting, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(waiting)

	release := holdDescriptors(t)
	if err := syscall.Connect(waiting, &syscall.SockaddrInet4{Port: int(r.port), Addr: [4]byte{127, 0, 50, 1}}); err != nil {
		release()
		t.Fatalf("connecting to the channel port at the limit: %v, want the kernel to complete it", err)
	}
	testkit.WaitFor(t, "the gateway at the open-files limit still says it accepts", r.gw.cannotAccept)
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
