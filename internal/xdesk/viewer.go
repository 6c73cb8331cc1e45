package xdesk

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
)

// Viewer returns the command line of a native viewer on the PATH, pointed at addr (a TCP
// host:port) for protocol "vnc" or "rdp", for the caller to start. For VNC it is
// xtigervncviewer, vncviewer or xtightvncviewer (tvnviewer on Windows) given "host::port",
// their form for a port rather than a display number; for RDP, xfreerdp with /v:host:port
// and /cert:ignore, or on Windows mstsc with a .rdp file that Viewer writes to dir. When no
// viewer is found the error wraps ErrNotInstalled and names what to install.
func Viewer(protocol, addr, dir string) (*exec.Cmd, error) {
	return viewer(runtime.GOOS, protocol, addr, dir, func(names []string) (string, error) { return lookPath(names) })
}

// viewer is Viewer for the operating system goos, finding binaries with look.
func viewer(goos, protocol, addr, dir string, look func([]string) (string, error)) (*exec.Cmd, error) {
	host, port, err := splitTCP(addr)
	if err != nil {
		return nil, fmt.Errorf("viewer for %q: %w", addr, err)
	}
	switch protocol {
	case "vnc":
		names := []string{"xtigervncviewer", "vncviewer", "xtightvncviewer"}
		if goos == "windows" {
			names = []string{"vncviewer", "tvnviewer"}
		}
		path, err := look(names)
		if err != nil {
			return nil, fmt.Errorf("a VNC viewer %w (%s)", ErrNotInstalled, installHint(goos, protocol))
		}
		if strings.Contains(host, ":") {
			host = "[" + host + "]"
		}
		return exec.Command(path, host+"::"+strconv.Itoa(port)), nil
	case "rdp":
		if goos == "windows" {
			path, err := look([]string{"mstsc"})
			if err != nil {
				return nil, fmt.Errorf("an RDP viewer %w (%s)", ErrNotInstalled, installHint(goos, protocol))
			}
			file := filepath.Join(dir, "desktop.rdp")
			if err := os.WriteFile(file, []byte(rdpFile(addr)), 0o644); err != nil {
				return nil, fmt.Errorf("writing %s: %w", file, err)
			}
			return exec.Command(path, file), nil
		}
		path, err := look([]string{"xfreerdp", "xfreerdp3"})
		if err != nil {
			return nil, fmt.Errorf("an RDP viewer %w (%s)", ErrNotInstalled, installHint(goos, protocol))
		}
		return exec.Command(path, "/v:"+addr, "/cert:ignore"), nil
	}
	return nil, fmt.Errorf("viewer for protocol %q: want vnc or rdp", protocol)
}

// rdpFile is a .rdp file for mstsc that connects to addr without asking for credentials (the
// desktops behind the front door need none) and without a warning for the front door's
// certificate.
func rdpFile(addr string) string {
	return "full address:s:" + addr + "\r\n" +
		"prompt for credentials:i:0\r\n" +
		"authentication level:i:0\r\n"
}

// installHint says how to install a viewer for protocol on goos.
func installHint(goos, protocol string) string {
	switch {
	case goos == "windows" && protocol == "vnc":
		return "install TigerVNC's vncviewer"
	case goos == "windows":
		return "mstsc comes with Windows"
	case goos == "darwin" && protocol == "vnc":
		return "brew install --cask tigervnc-viewer"
	case goos == "darwin":
		return "brew install freerdp"
	case protocol == "vnc":
		return "apt-get install tigervnc-viewer or xtightvncviewer"
	}
	return "apt-get install " + packageOf("xfreerdp")
}
