package xdesk

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// runWithin bounds a viewer's run when the caller's context has no deadline.
const runWithin = time.Minute

// XfreerdpAuthOnly runs `xfreerdp /v:addr +auth-only /u:na /p:na /cert:ignore` against the
// RDP server at addr (host:port): it connects, negotiates security and authenticates, then
// disconnects. xfreerdp wants an X display even so: it gets a private Xvfb, picked like
// Xvnc's, and a private configuration directory, both removed afterwards. It returns nil when
// xfreerdp exits with status 0, else an error with the tail of its output. ctx bounds the run
// (a minute when it has no deadline).
func XfreerdpAuthOnly(ctx context.Context, addr string) error {
	if _, _, err := splitTCP(addr); err != nil {
		return fmt.Errorf("xfreerdp against %q: %w", addr, err)
	}
	xfreerdp, err := lookPath([]string{"xfreerdp"})
	if err != nil {
		return err
	}
	xvfb, err := lookPath([]string{"Xvfb"})
	if err != nil {
		return err
	}
	ctx, cancel := bounded(ctx)
	defer cancel()
	dir, err := os.MkdirTemp("", "xfreerdp-")
	if err != nil {
		return fmt.Errorf("xfreerdp against %s: %w", addr, err)
	}
	defer os.RemoveAll(dir)
	x, display, err := startX(ctx, "Xvfb", xvfb, []string{"-nolisten", "tcp", "-screen", "0", "640x480x24"}, filepath.Join(dir, "xvfb.log"))
	if err != nil {
		return fmt.Errorf("xfreerdp against %s: %w", addr, err)
	}
	defer func() { _ = x.stop() }()
	cmd := command(ctx, xfreerdp, "/v:"+addr, "+auth-only", "/u:na", "/p:na", "/cert:ignore")
	cmd.Env = append(os.Environ(), "DISPLAY="+display, "XDG_CONFIG_HOME="+dir)
	if out, err := run(ctx, cmd); err != nil {
		return withTail(fmt.Errorf("xfreerdp against %s: %w", addr, err), tail(out))
	}
	return nil
}

// VNCSnapshot saves the desktop of the VNC server at addr (a TCP host:port: vncsnapshot
// speaks no Unix sockets) as a JPEG file at outJPEG, with `vncsnapshot -encodings raw`
// (Xvnc's other encodings leave it hanging). ctx bounds the run (a minute when it has no
// deadline).
func VNCSnapshot(ctx context.Context, addr, outJPEG string) error {
	host, port, err := splitTCP(addr)
	if err != nil {
		return fmt.Errorf("vncsnapshot of %q: %w", addr, err)
	}
	path, err := lookPath([]string{"vncsnapshot"})
	if err != nil {
		return err
	}
	ctx, cancel := bounded(ctx)
	defer cancel()
	cmd := command(ctx, path, "-allowblank", "-encodings", "raw", fmt.Sprintf("%s::%d", host, port), outJPEG)
	if out, err := run(ctx, cmd); err != nil {
		return withTail(fmt.Errorf("vncsnapshot of %s: %w", addr, err), tail(out))
	}
	if fi, err := os.Stat(outJPEG); err != nil || fi.Size() == 0 {
		return fmt.Errorf("vncsnapshot of %s wrote no image to %s", addr, outJPEG)
	}
	return nil
}

// bounded is ctx, with a deadline runWithin away when it has none.
func bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, runWithin)
}

// run runs cmd (made by command under ctx) to its end, kills whatever it left in its process
// group, and returns its output; the error says why a run failed, ctx's error first.
func run(ctx context.Context, cmd *exec.Cmd) (string, error) {
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if cmd.Process != nil {
		_ = kill(cmd.Process)
	}
	if err != nil && ctx.Err() != nil {
		err = ctx.Err()
	}
	return out.String(), err
}
