package xdesk

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// orphanEnv, set in a copy of the test binary, makes TestXvncDiesWithItsStarter start an
// Xvnc in that directory, print its pid and exit without stopping it.
const orphanEnv = "XDESK_ORPHAN_DIR"

func TestXvncDiesWithItsStarter(t *testing.T) {
	if dir := os.Getenv(orphanEnv); dir != "" {
		x, err := StartXvnc(context.Background(), XvncOptions{Dir: dir})
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		fmt.Println(x.server.cmd.Process.Pid)
		os.Exit(0) // no Close, no cleanup: as if killed
	}
	need(t, "Xvnc")
	t.Parallel()
	ctx := testContext(t)
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestXvncDiesWithItsStarter$")
	cmd.Env = append(os.Environ(), orphanEnv+"="+t.TempDir())
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("starter: %v: %s", err, out)
	}
	line, _, _ := strings.Cut(string(out), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatalf("starter printed %q, want a pid", out)
	}
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for alive(pid) {
		select {
		case <-ctx.Done():
			t.Fatalf("Xvnc (pid %d) still runs after the process that started it exited", pid)
		case <-tick.C:
		}
	}
}

// alive tells whether the process pid exists and is no zombie.
func alive(pid int) bool {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return false
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if state, ok := strings.CutPrefix(s.Text(), "State:"); ok {
			return !strings.HasPrefix(strings.TrimSpace(state), "Z")
		}
	}
	return false
}
