package xdesk

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// AnyPort, as XvncOptions.TCPPort or XrdpOptions.Port, asks for a free loopback port.
const AnyPort = -1

// portAttempts is how many free ports a server is started on before giving up, when the one
// picked is taken by someone else before the server binds it.
const portAttempts = 3

// maxUnixPath is the longest Unix socket path the kernel takes (sun_path less its NUL).
const maxUnixPath = 107

// XvncOptions configures StartXvnc.
type XvncOptions struct {
	// Dir is where the Unix socket (vnc.sock) and the logs (xvnc.log, xterm.log) go, made
	// when missing. Required.
	Dir string
	// Width and Height are the desktop's size in pixels. Default: 1024 by 768.
	Width, Height int
	// TCPPort is where VNC viewers connect. Default 0: only on the Unix socket Dir/vnc.sock;
	// AnyPort: on a free port of 127.0.0.1; else on 127.0.0.1:TCPPort.
	TCPPort int
	// Xterm starts an xterm (an xclock where xterm is missing) on the desktop, so that there
	// is something to see. Default: false, a bare desktop.
	Xterm bool
	// Logger is told when the desktop starts and stops. Default: no logging.
	Logger *slog.Logger
}

// Xvnc is a running TigerVNC Xvnc: an X desktop and its VNC server in one process.
type Xvnc struct {
	network, address string
	display          string
	log              *slog.Logger
	server, term     *proc // term is nil without XvncOptions.Xterm

	closeOnce sync.Once
	closeErr  error
}

// StartXvnc starts Xvnc on a free display (-displayfd: parallel desktops never collide), with
// no VNC authentication (-SecurityTypes None), every viewer sharing the desktop
// (-AlwaysShared), no X11 over TCP, and its VNC server on the Unix socket or loopback port o
// asks for. It returns once the VNC server greets a connection,
// waiting at most about ten seconds; on failure the error carries the tail of Xvnc's log.
// The desktop runs until Close or until ctx ends.
func StartXvnc(ctx context.Context, o XvncOptions) (*Xvnc, error) {
	if o.Dir == "" {
		return nil, errors.New("starting Xvnc: no directory")
	}
	if o.Width <= 0 || o.Height <= 0 {
		o.Width, o.Height = 1024, 768
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	path, err := lookPath([]string{"Xvnc"})
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(o.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("starting Xvnc: %w", err)
	}
	termPath := ""
	if o.Xterm {
		if termPath, err = lookPath([]string{"xterm", "xclock"}); err != nil {
			return nil, err
		}
	}
	x := &Xvnc{log: log}
	for attempt := 1; ; attempt++ {
		err = x.start(ctx, path, o)
		if err == nil || o.TCPPort != AnyPort || attempt == portAttempts || !strings.Contains(err.Error(), "already in use") {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	if termPath != "" {
		if x.term, err = startTerm(ctx, termPath, x.display, filepath.Join(o.Dir, "xterm.log")); err != nil {
			_ = x.server.stop()
			return nil, err
		}
	}
	log.Info("desktop started", "server", "Xvnc", "display", x.display, "network", x.network, "address", x.address, "pid", x.server.cmd.Process.Pid)
	return x, nil
}

// start starts Xvnc once, as o asks, and waits until it greets a VNC connection.
func (x *Xvnc) start(ctx context.Context, path string, o XvncOptions) error {
	args := []string{
		"-geometry", fmt.Sprintf("%dx%d", o.Width, o.Height), "-depth", "24",
		"-SecurityTypes", "None", "-AlwaysShared", "-nolisten", "tcp",
		// The agent checks its desktop server by connecting and closing, which TigerVNC
		// counts as unauthenticated attempts: after 5 from one peer (every connection on the
		// Unix socket is one peer) it refuses every viewer, "Too many security failures",
		// for 10 s and longer. Only the agent reaches the server: no blacklist is needed.
		"-BlacklistThreshold", "1000000",
	}
	switch port := o.TCPPort; {
	case port == 0:
		sock := filepath.Join(o.Dir, "vnc.sock")
		if len(sock) > maxUnixPath {
			return fmt.Errorf("starting Xvnc: socket path %s is longer than %d bytes", sock, maxUnixPath)
		}
		if err := os.Remove(sock); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("starting Xvnc: %w", err)
		}
		x.network, x.address = "unix", sock
		args = append(args, "-rfbport", "-1", "-rfbunixpath", sock)
	case port == AnyPort || port > 0:
		if port == AnyPort {
			var err error
			if port, err = freePort(); err != nil {
				return fmt.Errorf("starting Xvnc: %w", err)
			}
		}
		x.network, x.address = "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		args = append(args, "-rfbport", strconv.Itoa(port), "-localhost", "-interface", "127.0.0.1")
	default:
		return fmt.Errorf("starting Xvnc: bad TCP port %d", port)
	}
	logPath := filepath.Join(o.Dir, "xvnc.log")
	p, display, err := startX(ctx, "Xvnc", path, args, logPath)
	if err != nil {
		return err
	}
	if err := p.waitFor(ctx, "greeting VNC connections", speaksVNC(x.network, x.address)); err != nil {
		_ = p.stop()
		return withTail(err, logTail(logPath))
	}
	x.server, x.display = p, display
	return nil
}

// startTerm starts the xterm (or xclock) at path on display, its output in logPath.
func startTerm(ctx context.Context, path, display, logPath string) (*proc, error) {
	logf, err := openLog(logPath)
	if err != nil {
		return nil, fmt.Errorf("starting %s: %w", filepath.Base(path), err)
	}
	defer logf.Close()
	geometry := "80x24+20+20" // characters, for xterm
	if filepath.Base(path) == "xclock" {
		geometry = "300x300+20+20"
	}
	cmd := command(ctx, path, "-display", display, "-geometry", geometry)
	cmd.Env = append(os.Environ(), "DISPLAY="+display)
	cmd.Stdout, cmd.Stderr = logf, logf
	return start(ctx, filepath.Base(path), cmd)
}

// Network is the network of the VNC server's address: "unix" or "tcp".
func (x *Xvnc) Network() string { return x.network }

// Address is the VNC server's address: a socket path ("/dir/vnc.sock") or a loopback
// host:port ("127.0.0.1:5942").
func (x *Xvnc) Address() string { return x.address }

// Display is the X display of the desktop, as ":42".
func (x *Xvnc) Display() string { return x.display }

// Close stops Xvnc and the xterm and waits for them. It reports an error when one of them
// had failed before. Calls after the first return the first's result.
func (x *Xvnc) Close() error {
	x.closeOnce.Do(func() {
		var errs []error
		if x.term != nil {
			// An xterm whose desktop went away exits on its own: that is no failure.
			if err := x.term.stop(); err != nil && !x.server.exited() {
				errs = append(errs, err)
			}
		}
		errs = append(errs, x.server.stop())
		x.closeErr = errors.Join(errs...)
		x.log.Info("desktop stopped", "server", "Xvnc", "display", x.display)
	})
	return x.closeErr
}

// freePort is a TCP port of 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("picking a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
