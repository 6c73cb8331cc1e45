package rfb

import (
	"bufio"
	"context"
	"image"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/frontdoor-vdi/frontdoor/internal/testbuf"
)

// TestClientAgainstXvnc reads a real TigerVNC server: ServerInit and one whole-screen update.
// Outside CI it is skipped when Xvnc is missing; in CI (CI=true), which installs it, it fails.
func TestClientAgainstXvnc(t *testing.T) {
	path, err := exec.LookPath("Xvnc")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("Xvnc is not on PATH but CI=true: %v", err)
		}
		t.Skip("Xvnc is not on PATH; install tigervnc-standalone-server to run this test")
	}
	sock := filepath.Join(t.TempDir(), "vnc.sock")
	displayR, displayW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer displayR.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, "-displayfd", "3", "-geometry", "640x480", "-depth", "24",
		"-rfbport", "-1", "-rfbunixpath", sock, "-SecurityTypes", "None")
	cmd.ExtraFiles = []*os.File{displayW}
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 5 * time.Second
	var log testbuf.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting Xvnc: %v", err)
	}
	displayW.Close()
	t.Cleanup(func() {
		cancel()
		cmd.Wait()
	})

	display := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(displayR).ReadString('\n')
		display <- strings.TrimSpace(line)
	}()
	select {
	case d := <-display:
		if d == "" {
			t.Fatalf("Xvnc exited before announcing its display; its output:\n%s", log.String())
		}
		t.Logf("Xvnc is display :%s", d)
	case <-ctx.Done():
		t.Fatalf("Xvnc did not announce its display in time; its output:\n%s", log.String())
	}

	conn, err := net.DialTimeout("unix", sock, 5*time.Second)
	if err != nil {
		t.Fatalf("dialing Xvnc: %v; its output:\n%s", err, log.String())
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(15 * time.Second))
	c, err := NewClient(conn)
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	if c.Width() != 640 || c.Height() != 480 {
		t.Errorf("ServerInit size %dx%d, want 640x480", c.Width(), c.Height())
	}
	if bpp := c.ServerFormat().BitsPerPixel; bpp != 32 {
		t.Errorf("ServerInit format %v, want 32 bits per pixel", c.ServerFormat())
	}
	t.Logf("desktop %q, server format %v", c.Name(), c.ServerFormat())
	if err := c.RequestAll(false); err != nil {
		t.Fatal(err)
	}
	for {
		m, err := c.ReadMessage()
		if err != nil {
			t.Fatalf("ReadMessage: %v", err)
		}
		if m.Type != MsgFramebufferUpdate {
			continue
		}
		var painted image.Rectangle
		for _, r := range m.Rects {
			painted = painted.Union(r.Bounds)
		}
		if want := image.Rect(0, 0, 640, 480); painted != want || c.Framebuffer().Bounds() != want {
			t.Errorf("update painted %v of a %v framebuffer, want %v", painted, c.Framebuffer().Bounds(), want)
		}
		t.Logf("first update: %d rectangles, %d bytes", len(m.Rects), m.Bytes)
		return
	}
}
