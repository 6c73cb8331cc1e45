package xdesk

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestViewerWithoutViewersNamesWhatToInstall(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	for _, protocol := range []string{"vnc", "rdp"} {
		_, err := Viewer(protocol, "127.0.0.1:5900", t.TempDir())
		if !errors.Is(err, ErrNotInstalled) || !strings.Contains(err.Error(), "install") {
			t.Errorf("%s: got %v, want ErrNotInstalled with what to install", protocol, err)
		}
	}
}

func TestViewerOnThePath(t *testing.T) {
	for _, tt := range []struct {
		protocol, bin string
		names         []string
		addr, arg     string
	}{
		{"vnc", "xtightvncviewer", []string{"xtigervncviewer", "vncviewer", "xtightvncviewer"}, "127.0.0.1:5942", "127.0.0.1::5942"},
		{"rdp", "xfreerdp", []string{"xfreerdp", "xfreerdp3"}, "127.0.0.1:3390", "/v:127.0.0.1:3390"},
	} {
		t.Run(tt.protocol, func(t *testing.T) {
			need(t, tt.bin)
			cmd, err := Viewer(tt.protocol, tt.addr, t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Contains(tt.names, filepath.Base(cmd.Path)) || !slices.Contains(cmd.Args, tt.arg) {
				t.Errorf("got %q, want one of %v with %q", cmd.Args, tt.names, tt.arg)
			}
		})
	}
}

func TestViewerOnWindowsOpensAnRDPFileWithMstsc(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	look := func(names []string) (string, error) {
		if names[0] == "mstsc" {
			return `C:\Windows\System32\mstsc.exe`, nil
		}
		return "", notInstalled(names[0])
	}
	cmd, err := viewer("windows", "rdp", "127.0.0.1:3390", dir, look)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "desktop.rdp")
	if want := []string{`C:\Windows\System32\mstsc.exe`, file}; !slices.Equal(cmd.Args, want) {
		t.Errorf("got %q, want %q", cmd.Args, want)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "full address:s:127.0.0.1:3390\r\n") {
		t.Errorf("got .rdp file %q, want it to name the address", b)
	}
}

func TestViewerRefusesWhatItCannotShow(t *testing.T) {
	t.Parallel()
	look := func([]string) (string, error) { return "/usr/bin/viewer", nil }
	for _, tt := range []struct{ protocol, addr string }{
		{"spice", "127.0.0.1:5900"},
		{"vnc", "/tmp/vnc.sock"},
		{"rdp", "127.0.0.1"},
	} {
		if _, err := viewer("linux", tt.protocol, tt.addr, t.TempDir(), look); err == nil {
			t.Errorf("%s %s: got no error, want one", tt.protocol, tt.addr)
		}
	}
}
