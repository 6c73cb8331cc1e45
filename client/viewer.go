package client

import (
	"os/exec"

	"github.com/frontdoor-vdi/frontdoor/internal/xdesk"
)

// ViewerCommand returns the command line of a native viewer found on PATH for the desktop's
// protocol, pointed at addr (the local tunnel, host:port): a VNC viewer (xtigervncviewer,
// vncviewer, xtightvncviewer) or xfreerdp, and on Windows mstsc with an .rdp file written in
// dir. The error names what to install when none is found.
func ViewerCommand(d DesktopInfo, addr, dir string) (*exec.Cmd, error) {
	return xdesk.Viewer(d.Speaks(), addr, dir)
}
