package xdesk

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// startX starts the X server at path with args, its output in logPath, and waits (bounded by
// ctx and readyWithin) until it has picked a free display (-displayfd 3), which it returns as
// ":N". The server runs under ctx; on an error nothing is left running.
func startX(ctx context.Context, name, path string, args []string, logPath string) (*proc, string, error) {
	logf, err := openLog(logPath)
	if err != nil {
		return nil, "", fmt.Errorf("starting %s: %w", name, err)
	}
	defer logf.Close()
	r, w, err := os.Pipe()
	if err != nil {
		return nil, "", fmt.Errorf("starting %s: %w", name, err)
	}
	defer r.Close()
	cmd := command(ctx, path, append([]string{"-displayfd", "3"}, args...)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.ExtraFiles = []*os.File{w}
	p, err := start(ctx, name, cmd)
	w.Close()
	if err != nil {
		return nil, "", err
	}
	display, err := readDisplay(ctx, p, r)
	if err != nil {
		_ = p.stop()
		return nil, "", withTail(err, logTail(logPath))
	}
	return p, display, nil
}

// readDisplay reads the display number an X server writes to its -displayfd.
func readDisplay(ctx context.Context, p *proc, r *os.File) (string, error) {
	got := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(r).ReadString('\n') // what came before an error says as much
		got <- s
	}()
	ctx, cancel := context.WithTimeout(ctx, readyWithin)
	defer cancel()
	select {
	case s := <-got:
		if n, err := strconv.Atoi(strings.TrimSpace(s)); err == nil && n >= 0 {
			return ":" + strconv.Itoa(n), nil
		}
		// The server closed its -displayfd without a display: it is exiting.
		select {
		case <-p.done:
		case <-ctx.Done():
		}
		return "", fmt.Errorf("%s exited before picking a display: %s", p.name, p.status())
	case <-ctx.Done():
		return "", fmt.Errorf("%s picked no display within %v: %w", p.name, readyWithin, ctx.Err())
	}
}
