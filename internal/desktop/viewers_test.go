package desktop

import (
	"bytes"
	"context"
	"image/jpeg"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestVncsnapshotReadsTheDesktop has a real, RFB 3.3 viewer take a picture of the desktop.
// It is skipped when vncsnapshot is not installed.
func TestVncsnapshotReadsTheDesktop(t *testing.T) {
	path, err := exec.LookPath("vncsnapshot")
	if err != nil {
		t.Skip("vncsnapshot is not on PATH; install the vncsnapshot package to run this test")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	served := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			served <- err
			return
		}
		served <- New(Options{}).Serve(ctx, c, func() Info { return Info{Machine: "vda-1", Session: "s1"} })
	}()

	out := filepath.Join(t.TempDir(), "shot.jpg")
	port := ln.Addr().(*net.TCPAddr).Port
	cmd := exec.CommandContext(ctx, path, "-allowblank", "127.0.0.1::"+strconv.Itoa(port), out)
	log, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("vncsnapshot: %v\n%s", err, log)
	}
	// The viewer may leave while a clock update is on its way, so only a write may fail.
	if err := <-served; err != nil && !strings.Contains(err.Error(), "writing to viewer") {
		t.Errorf("Serve = %v, want nil when vncsnapshot leaves", err)
	}
	shot, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	img, err := jpeg.Decode(bytes.NewReader(shot))
	if err != nil {
		t.Fatalf("decoding the snapshot: %v", err)
	}
	if b := img.Bounds(); b.Dx() != 1024 || b.Dy() != 768 {
		t.Errorf("snapshot of %v, want 1024x768", b)
	}
}
