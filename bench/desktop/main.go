// Command desktop benchmarks frontdoor's desktop path on loopback (bench/desktop.sh builds and
// runs it): a viewer speaking RFB to the builtin desktop or to TigerVNC's Xvnc, through a
// client session, a secure gateway and the machine's agent, side by side with the same viewer
// straight to the desktop server or through HAProxy.
//
//   - latency: the key → framebuffer update round trip, straight and through a gateway (p50,
//     p99 and what the gateway adds);
//   - throughput: full-screen raw updates in a loop, MB/s and the relay process's CPU seconds
//     per GB, through a gateway and through HAProxy terminating TLS;
//   - stall: a viewer typing through one of two gateways whose process is killed (SIGKILL)
//     again and again: the time from each kill to the next update, and whether the viewer's
//     connection stayed open;
//   - capacity: N idle desktop streams through one gateway process: its resident memory and
//     CPU.
//
// Usage: desktop ROLE [flags]. The benchmark roles start the other roles (site, gateway,
// agent, desktop, clients) as processes of their own, pinned with taskset, and stop them by
// PID; HAProxy is started by the script. Each benchmark prints a markdown section and adds
// its summary rows to -summary.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: desktop site|gateway|agent|desktop|clients|latency|throughput|stall|capacity [flags]")
		os.Exit(2)
	}
	role, args := os.Args[1], os.Args[2:]
	var err error
	switch role {
	case "site":
		fs := flag.NewFlagSet("site", flag.ExitOnError)
		dir := fs.String("dir", "", "site directory to write")
		fs.Parse(args)
		err = writeSite(*dir)
	case "gateway":
		err = gatewayMain(args)
	case "agent":
		err = agentMain(args)
	case "desktop":
		err = desktopMain(args)
	case "clients":
		err = clientsMain(args)
	case "latency", "throughput", "stall", "capacity":
		// Every benchmark is bounded in time as a whole.
		time.AfterFunc(20*time.Minute, func() { fmt.Fprintln(os.Stderr, "desktop: 20 minutes, giving up"); os.Exit(2) })
		err = map[string]func([]string) error{"latency": latencyMain, "throughput": throughputMain,
			"stall": stallMain, "capacity": capacityMain}[role](args)
	default:
		err = fmt.Errorf("unknown role %q", role)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "desktop %s: %v\n", role, err)
		os.Exit(1)
	}
}

// env is what every benchmark role is told by the script.
type env struct {
	dir, work         string // the site directory; where children's logs go
	relayCPU, loadCPU string // taskset CPU lists of the relays and of the rest
	summaryPath       string // where the summary rows go (appended)
}

func envFlags(fs *flag.FlagSet) *env {
	e := &env{}
	fs.StringVar(&e.dir, "dir", "", "site directory")
	fs.StringVar(&e.work, "work", os.TempDir(), "directory of the children's logs")
	fs.StringVar(&e.relayCPU, "relay-cpu", "0", "CPU of the gateways (taskset -c)")
	fs.StringVar(&e.loadCPU, "load-cpu", "1", "CPU of everything else (taskset -c)")
	fs.StringVar(&e.summaryPath, "summary", "", "file the summary rows are appended to")
	return e
}

// summary appends a row of the summary table: measurement | frontdoor | peer | ratio | goal | met?
func (e *env) summary(format string, a ...any) {
	if e.summaryPath == "" {
		return
	}
	f, err := os.OpenFile(e.summaryPath, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "| "+format+" |\n", a...)
}

func split(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
