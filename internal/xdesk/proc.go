package xdesk

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

const (
	// stopGrace is how long a process has after SIGTERM before its group is killed.
	stopGrace = 5 * time.Second
	// readyWithin bounds the wait for a server to pick its display or accept connections.
	readyWithin = 10 * time.Second
	// pollEvery is the wait between two checks of whether a server is ready.
	pollEvery = 25 * time.Millisecond
	// tailLines is how many lines of a log an error carries.
	tailLines = 15
)

// proc is a started process, leader of its own process group, whose exit is watched.
type proc struct {
	name string
	ctx  context.Context // the context it runs under
	cmd  *exec.Cmd
	done chan struct{} // closed once the process has exited and its group was killed
	err  error         // what Wait returned; read only once done is closed
}

// command is exec.CommandContext in a process group of its own: when ctx ends, the group gets
// SIGTERM, and the process SIGKILL stopGrace later.
func command(ctx context.Context, path string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, path, args...)
	newGroup(cmd)
	cmd.Cancel = func() error { return terminate(cmd.Process) }
	cmd.WaitDelay = stopGrace
	return cmd
}

// start starts cmd (made by command under ctx) and watches it; once it exits, whatever is
// left of its group is killed.
func start(ctx context.Context, name string, cmd *exec.Cmd) (*proc, error) {
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &proc{name: name, ctx: ctx, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		_ = kill(cmd.Process)
		close(p.done)
	}()
	return p, nil
}

// exited tells whether the process has exited.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// status says how the process ended, or that it still runs.
func (p *proc) status() string {
	if !p.exited() {
		return "still running"
	}
	if p.err == nil {
		return "exited with status 0"
	}
	return p.err.Error()
}

// stop ends the process group (SIGTERM, then SIGKILL after stopGrace) and waits for the
// process. It reports an error only when the process had already failed on its own.
func (p *proc) stop() error {
	if !p.exited() {
		_ = terminate(p.cmd.Process)
		t := time.NewTimer(stopGrace)
		defer t.Stop()
		select {
		case <-p.done:
		case <-t.C:
			_ = kill(p.cmd.Process)
			<-p.done
		}
		return nil
	}
	if p.err != nil && p.ctx.Err() == nil {
		return fmt.Errorf("%s exited before it was stopped: %w", p.name, p.err)
	}
	return nil
}

// waitFor polls probe until it succeeds, the process exits, ctx ends or readyWithin passes.
// A probe in flight is cut short when the process exits.
func (p *proc) waitFor(ctx context.Context, what string, probe func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, readyWithin)
	defer cancel()
	go func() {
		select {
		case <-p.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for {
		last := probe(ctx)
		if p.exited() {
			return fmt.Errorf("%s exited before %s: %s", p.name, what, p.status())
		}
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			if p.exited() {
				return fmt.Errorf("%s exited before %s: %s", p.name, what, p.status())
			}
			return fmt.Errorf("%s: not %s within %v: %w", p.name, what, readyWithin, last)
		case <-tick.C:
		}
	}
}

// openLog creates (or truncates) the log file at path, for a process's output.
func openLog(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("creating log: %w", err)
	}
	return f, nil
}

// logTail is the end of the log file at path, for an error message.
func logTail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return tail(string(b))
}

// tail is the last tailLines lines of s.
func tail(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > tailLines {
		lines = lines[len(lines)-tailLines:]
	}
	return strings.Join(lines, "\n")
}

// withTail adds the last lines of a log or an output to err, when there are any.
func withTail(err error, lines string) error {
	if lines == "" {
		return err
	}
	return fmt.Errorf("%w; last lines:\n%s", err, lines)
}
