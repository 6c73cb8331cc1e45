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

// xrdpPIDFile is where xrdp records a daemon's pid (the path is built in); while the file
// exists, xrdp refuses to start at all, even with --nodaemon.
const xrdpPIDFile = "/var/run/xrdp/xrdp.pid"

// XrdpOptions configures StartXrdp.
type XrdpOptions struct {
	// Dir is where xrdp's configuration (xrdp.ini), TLS key and certificate, and logs
	// (xrdp.log, xrdp.out) go. Required.
	Dir string
	// Port is where RDP clients connect, on 127.0.0.1. Default 0 (or AnyPort): a free port.
	Port int
	// VNC is the host:port of the VNC server to front, as Xvnc.Address returns it: it must be
	// TCP (an Xvnc started with a TCPPort), for xrdp's VNC backend dials only TCP. Required.
	VNC string
	// Logger is told when xrdp starts and stops. Default: no logging.
	Logger *slog.Logger
}

// Xrdp is a running xrdp that serves one fixed VNC desktop to RDP clients, with no login
// screen and no session manager.
type Xrdp struct {
	address string
	log     *slog.Logger
	server  *proc

	closeOnce sync.Once
	closeErr  error
}

// StartXrdp writes a private configuration to o.Dir — TLS with a fresh self-signed
// certificate, the VNC backend (libvnc.so) pointed at o.VNC for every connection, every
// virtual channel disabled (no chansrv runs) — and runs xrdp on it in the foreground. It
// returns once xrdp answers an RDP connection request, waiting at most about ten seconds; on failure the error carries the
// tail of xrdp's log. xrdp runs until Close or until ctx ends. Nothing needs root, but xrdp
// will not start while a system xrdp daemon runs (it leaves /var/run/xrdp/xrdp.pid).
func StartXrdp(ctx context.Context, o XrdpOptions) (*Xrdp, error) {
	if o.Dir == "" {
		return nil, errors.New("starting xrdp: no directory")
	}
	if _, _, err := splitTCP(o.VNC); err != nil {
		return nil, fmt.Errorf("starting xrdp: VNC server %q: %w (xrdp's VNC backend dials only TCP)", o.VNC, err)
	}
	if o.Port < AnyPort || o.Port > 65535 {
		return nil, fmt.Errorf("starting xrdp: bad port %d", o.Port)
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	path, err := lookPath([]string{"xrdp"}, "/usr/sbin", "/usr/local/sbin")
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(xrdpPIDFile); err == nil {
		return nil, fmt.Errorf("starting xrdp: %s exists, and xrdp will not start beside the daemon it names (stop that xrdp, or delete the file if it is stale)", xrdpPIDFile)
	}
	certPath, keyPath := filepath.Join(o.Dir, "cert.pem"), filepath.Join(o.Dir, "key.pem")
	if err := writeCert(certPath, keyPath); err != nil {
		return nil, fmt.Errorf("starting xrdp: %w", err)
	}
	x := &Xrdp{log: log}
	for attempt := 1; ; attempt++ {
		err = x.start(ctx, path, o, certPath, keyPath)
		if err == nil || o.Port > 0 || attempt == portAttempts || !strings.Contains(err.Error(), "trans_listen_address failed") {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	log.Info("desktop started", "server", "xrdp", "address", x.address, "vnc", o.VNC, "pid", x.server.cmd.Process.Pid)
	return x, nil
}

// start starts xrdp once, as o asks, and waits until it accepts a connection.
func (x *Xrdp) start(ctx context.Context, path string, o XrdpOptions, certPath, keyPath string) error {
	port := o.Port
	if port <= 0 {
		var err error
		if port, err = freePort(); err != nil {
			return fmt.Errorf("starting xrdp: %w", err)
		}
	}
	x.address = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	vncHost, vncPort, _ := splitTCP(o.VNC)
	ini := filepath.Join(o.Dir, "xrdp.ini")
	logPath, outPath := filepath.Join(o.Dir, "xrdp.log"), filepath.Join(o.Dir, "xrdp.out")
	conf := xrdpINI(port, vncHost, vncPort, certPath, keyPath, logPath)
	if err := os.WriteFile(ini, []byte(conf), 0o644); err != nil {
		return fmt.Errorf("starting xrdp: writing its configuration: %w", err)
	}
	// xrdp appends to its log: start each run on an empty one.
	if err := os.Remove(logPath); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("starting xrdp: %w", err)
	}
	outf, err := openLog(outPath)
	if err != nil {
		return fmt.Errorf("starting xrdp: %w", err)
	}
	defer outf.Close()
	cmd := command(ctx, path, "--nodaemon", "--config", ini)
	cmd.Stdout, cmd.Stderr = outf, outf
	cmd.Dir = o.Dir
	p, err := start(ctx, "xrdp", cmd)
	if err != nil {
		return err
	}
	// The probe hangs up before TLS: xrdp logs an SSL_accept error for each probe.
	if err := p.waitFor(ctx, "answering RDP connection requests", speaksRDP(x.address)); err != nil {
		_ = p.stop()
		return withTail(err, strings.TrimSpace(logTail(outPath)+"\n"+logTail(logPath)))
	}
	x.server = p
	return nil
}

// xrdpINI is the configuration of a private xrdp listening on 127.0.0.1:port that connects
// every client to the VNC server at vncHost:vncPort.
//
// fork=false keeps every connection in the one process that Close stops. autorun skips the
// login screen. allow_channels=false would break FreeRDP 2 clients; with the [Channels]
// section empty, no channel has a server end (there is no chansrv) and xrdp disables them
// all. security_layer=negotiate lets a client pick TLS, which needs only the key and
// certificate given here; plain RDP security would read /etc/xrdp/rsakeys.ini, readable only
// by root and the xrdp user. disabled_encodings_mask=1 keeps xrdp from asking the VNC server
// to resize its desktop to the client's.
func xrdpINI(port int, vncHost string, vncPort int, certPath, keyPath, logPath string) string {
	return fmt.Sprintf(`[Globals]
ini_version=1
fork=false
port=tcp://127.0.0.1:%d
tcp_nodelay=true
security_layer=negotiate
crypt_level=high
certificate=%s
key_file=%s
ssl_protocols=TLSv1.2, TLSv1.3
autorun=vnc-fixed
allow_channels=true
max_bpp=32
new_cursors=true
use_fastpath=both

[Logging]
LogFile=%s
LogLevel=INFO
EnableSyslog=false

[Channels]

[vnc-fixed]
name=vnc-fixed
lib=libvnc.so
ip=%s
port=%d
username=na
password=na
disabled_encodings_mask=1
`, port, certPath, keyPath, logPath, vncHost, vncPort)
}

// Address is where RDP clients connect: "127.0.0.1:PORT".
func (x *Xrdp) Address() string { return x.address }

// Close stops xrdp and waits for it. It reports an error when xrdp had failed before. Calls
// after the first return the first's result.
func (x *Xrdp) Close() error {
	x.closeOnce.Do(func() {
		x.closeErr = x.server.stop()
		x.log.Info("desktop stopped", "server", "xrdp", "address", x.address)
	})
	return x.closeErr
}

// splitTCP splits a TCP host:port, the port a number.
func splitTCP(addr string) (host string, port int, err error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err = strconv.Atoi(p)
	if err != nil || port <= 0 || port > 65535 || host == "" {
		return "", 0, fmt.Errorf("not a TCP host:port")
	}
	return host, port, nil
}
