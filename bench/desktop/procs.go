package main

// Child processes: the benchmarks start frontdoor's pieces as processes of their own (this
// program re-executed with a role), pinned with taskset, and stop them by PID; /proc gives
// each one's CPU time and resident memory.

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/frontdoor-vdi/frontdoor/bench/internal/kernel"
)

// child is a process of this program in another role.
type child struct {
	name string
	cmd  *exec.Cmd
	log  string // its output, in the run directory
	done chan struct{}
}

// spawn starts this program as role with args, pinned to cpu ("" for no pinning), and waits
// up to 20s for its READY line. Its output goes to dir/name.log.
func spawn(dir, name, cpu, role string, args ...string) (*child, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	argv := append([]string{self, role}, args...)
	if cpu != "" {
		argv = append([]string{"taskset", "-c", cpu}, argv...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	logPath := filepath.Join(dir, name+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	pr, pw := io.Pipe()
	cmd.Stdout = io.MultiWriter(logf, pw)
	cmd.Stderr = logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	c := &child{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		cmd.Wait()
		pw.Close()
		logf.Close()
		close(c.done)
	}()
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		ok := false
		for sc.Scan() {
			if !ok && strings.HasPrefix(sc.Text(), "READY") {
				ok = true
				ready <- true
			}
		}
		if !ok {
			ready <- false
		}
		io.Copy(io.Discard, pr)
	}()
	select {
	case ok := <-ready:
		if ok {
			return c, nil
		}
	case <-time.After(20 * time.Second):
	}
	c.kill()
	b, _ := os.ReadFile(logPath)
	return nil, fmt.Errorf("%s never got ready: %s", name, tailOf(string(b)))
}

func tailOf(s string) string {
	if len(s) > 2000 {
		s = s[len(s)-2000:]
	}
	return strings.TrimSpace(s)
}

// pid is the child's process id (taskset execs it, so it is the role's own).
func (c *child) pid() int { return c.cmd.Process.Pid }

// kill ends the child with SIGKILL and waits for it.
func (c *child) kill() {
	c.cmd.Process.Signal(syscall.SIGKILL)
	<-c.done
}

// stop asks the child to end (SIGTERM), then kills it after 5s.
func (c *child) stop() {
	c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(5 * time.Second):
		c.kill()
	}
}

// exited reports whether the child has ended.
func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// ticks is CLK_TCK, the unit of /proc/PID/stat's utime and stime.
var ticks = clockTicks()

func clockTicks() float64 {
	if out, err := exec.Command("getconf", "CLK_TCK").Output(); err == nil {
		if v, err := strconv.ParseFloat(strings.TrimSpace(string(out)), 64); err == nil && v > 0 {
			return v
		}
	}
	return 100
}

// cpuSeconds is a process's user+system CPU time so far.
func cpuSeconds(pid int) (float64, error) {
	_, ut, st, err := kernel.ProcCPU(strconv.Itoa(pid))
	if err != nil {
		return 0, err
	}
	return float64(ut+st) / ticks, nil
}

// status returns a field of /proc/PID/status in kB (VmRSS, VmHWM) or as a count (Threads).
func status(pid int, field string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			f := strings.Fields(v)
			if len(f) == 0 {
				break
			}
			return strconv.ParseInt(f[0], 10, 64)
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}

// openFiles counts a process's open descriptors.
func openFiles(pid int) int {
	es, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	return len(es)
}
