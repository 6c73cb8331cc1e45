package xdesk

import (
	"fmt"
	"os/exec"
)

// packageOf names the Debian package that provides the binary name, or "".
func packageOf(name string) string {
	switch name {
	case "Xvnc":
		return "tigervnc-standalone-server"
	case "Xvfb":
		return "xvfb"
	case "xterm":
		return "xterm"
	case "xclock":
		return "x11-apps"
	case "xrdp":
		return "xrdp"
	case "xfreerdp":
		return "freerdp2-x11"
	case "vncsnapshot":
		return "vncsnapshot"
	case "xtigervncviewer", "vncviewer":
		return "tigervnc-viewer"
	case "xtightvncviewer":
		return "xtightvncviewer"
	}
	return ""
}

// lookPath finds the first of names on the PATH, or else in the directories of also, and
// returns its path; if none is found, ErrNotInstalled naming the first of names.
func lookPath(names []string, also ...string) (string, error) {
	for _, name := range names {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
		for _, dir := range also {
			if p, err := exec.LookPath(dir + "/" + name); err == nil {
				return p, nil
			}
		}
	}
	return "", notInstalled(names[0])
}

// notInstalled is ErrNotInstalled wrapped with name and the package that provides it.
func notInstalled(name string) error {
	if pkg := packageOf(name); pkg != "" {
		return fmt.Errorf("%s %w (apt-get install %s)", name, ErrNotInstalled, pkg)
	}
	return fmt.Errorf("%s %w", name, ErrNotInstalled)
}
