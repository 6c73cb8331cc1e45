//go:build linux

package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/frontdoor-vdi/frontdoor/bench/internal/kernel"
)

type orch struct {
	gwCPU, clientCPU    int
	dur, warm, interval time.Duration
	loss                time.Duration
	size, sockets       int
	self, taskset, dir  string
	profileDir          string
	quicFloodTo         string
}

// proc is a child process and the lines it prints.
type proc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
	pid   int
}

// start runs bin (this program when "") with args, on cpu (-1: not pinned).
func (o *orch) start(cpu int, bin string, args ...string) (*proc, error) {
	if bin == "" {
		bin = o.self
	}
	args = append(args, "-dir", o.dir)
	var cmd *exec.Cmd
	if o.taskset != "" && cpu >= 0 {
		cmd = exec.Command(o.taskset, append([]string{"-c", strconv.Itoa(cpu), bin}, args...)...)
	} else {
		cmd = exec.Command(bin, args...)
	}
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(o.dir, "stderr.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, err
	}
	cmd.Stderr = f
	err = cmd.Start()
	f.Close()
	if err != nil {
		return nil, err
	}
	p := &proc{cmd: cmd, stdin: in, lines: make(chan string, 64), pid: cmd.Process.Pid}
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<16), 1<<20)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
	}()
	return p, nil
}

// expect waits (bounded) for a line starting with prefix and returns the rest.
func (p *proc) expect(prefix string, timeout time.Duration) (string, error) {
	t := time.After(timeout)
	for {
		select {
		case l, ok := <-p.lines:
			if !ok {
				return "", fmt.Errorf("process %d ended before %q", p.pid, prefix)
			}
			if strings.HasPrefix(l, prefix) {
				return strings.TrimSpace(strings.TrimPrefix(l, prefix)), nil
			}
			if strings.HasPrefix(l, "RESULT ") {
				return "", fmt.Errorf("before %q: %s", prefix, l)
			}
		case <-t:
			return "", fmt.Errorf("no %q within %v", prefix, timeout)
		}
	}
}

// stats asks the process for its STATS line and decodes it into v.
func (p *proc) stats(v any) error {
	if _, err := io.WriteString(p.stdin, "STATS\n"); err != nil {
		return err
	}
	s, err := p.expect("STATS ", 5*time.Second)
	if err != nil {
		return err
	}
	return json.Unmarshal([]byte(s), v)
}

func (p *proc) stop() {
	p.stdin.Close()
	done := make(chan struct{})
	go func() { p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		p.cmd.Process.Kill()
		<-done
	}
}

// cpu is a process's CPU seconds so far: its threads' run time from /proc/PID/task/*/schedstat.
func cpu(pid int) float64 {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return math.NaN()
	}
	var ns float64
	for _, t := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/schedstat", pid, t.Name()))
		if err != nil {
			continue // a thread that just ended
		}
		v, _ := strconv.ParseFloat(strings.Fields(string(b))[0], 64)
		ns += v
	}
	return ns / 1e9
}

// cpuUse is a CPU's time in seconds: busy (neither idle nor waiting for I/O), and of it
// softirq (where the kernel receives loopback datagrams, mostly on the sender's CPU).
type cpuUse struct{ busy, softirq float64 }

// cpuTimes is the host's CPU time so far by CPU, from /proc/stat (in USER_HZ, 100 a second).
func cpuTimes() map[int]cpuUse {
	lines, err := kernel.ReadLines("/proc/stat")
	if err != nil {
		return nil
	}
	out := map[int]cpuUse{}
	for _, l := range lines {
		f := strings.Fields(l)
		if len(f) < 8 || !strings.HasPrefix(f[0], "cpu") || f[0] == "cpu" {
			continue
		}
		n, err := strconv.Atoi(f[0][3:])
		if err != nil {
			continue
		}
		var total float64
		v := make([]float64, len(f))
		for i := 1; i < len(f) && i <= 8; i++ { // user nice system idle iowait irq softirq steal
			v[i], _ = strconv.ParseFloat(f[i], 64)
			total += v[i]
		}
		out[n] = cpuUse{busy: (total - v[4] - v[5]) / 100, softirq: v[7] / 100}
	}
	return out
}
