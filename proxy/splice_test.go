//go:build linux && (amd64 || arm64)

package proxy

import (
	"bufio"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// procIO reads the read/write byte counters of a process from /proc/<pid>/io. rchar and
// wchar count every byte that read(2)/write(2)-family calls moved through user space;
// splice(2) does not add to them.
func procIO(t *testing.T, pid int) map[string]int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/io")
	if err != nil {
		t.Skipf("no /proc io accounting: %v", err)
	}
	m := make(map[string]int64)
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ": ")
		if ok {
			m[k], _ = strconv.ParseInt(v, 10, 64)
		}
	}
	return m
}

// TestTCPPayloadIsSplicedNotCopied shows that TCP payload goes through splice(2), with the
// raw engine and with the standard one (io.Copy between *net.TCPConn): a proxy process
// forwards 64 MiB while its read/write byte counters (/proc/<pid>/io rchar, wchar) grow by
// far less than that.
func TestTCPPayloadIsSplicedNotCopied(t *testing.T) {
	for _, engine := range []string{"raw", "std"} {
		t.Run(engine, func(t *testing.T) { testSpliced(t, engine == "std") })
	}
}

func testSpliced(t *testing.T, std bool) {
	const size = 64 << 20
	got := make(chan int64, 1)
	be := startTCP(t, func(c *net.TCPConn) {
		n, _ := io.Copy(io.Discard, c)
		got <- n
	})
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), spliceHelperEnv+"="+be.addr().String())
	if std {
		cmd.Env = append(cmd.Env, spliceHelperStdEnv+"=1")
	}
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stdin.Close()
		cmd.Wait()
	}()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	addr := netip.MustParseAddrPort(strings.TrimSpace(line))
	before := procIO(t, cmd.Process.Pid)
	self := procIO(t, os.Getpid())
	c := dial(t, addr)
	buf := make([]byte, 1<<20)
	for range size / len(buf) {
		if _, err := c.Write(buf); err != nil {
			t.Fatal(err)
		}
	}
	c.CloseWrite()
	if n := <-got; n != size {
		t.Fatalf("backend got %d bytes, want %d", n, size)
	}
	after := procIO(t, cmd.Process.Pid)
	// Control: the backend in this process reads with read(2), so its counter must move,
	// or the kernel does not account and the check below would prove nothing.
	if d := procIO(t, os.Getpid())["rchar"] - self["rchar"]; d < size {
		t.Skipf("rchar of a process reading %d bytes grew by %d: no io accounting", size, d)
	}
	rchar, wchar := after["rchar"]-before["rchar"], after["wchar"]-before["wchar"]
	t.Logf("proxy moved %d MiB with rchar +%d, wchar +%d bytes", size>>20, rchar, wchar)
	if rchar > size/16 || wchar > size/16 {
		t.Fatalf("proxy read %d and wrote %d bytes through user space for %d bytes of payload; want splice", rchar, wchar, size)
	}
}
