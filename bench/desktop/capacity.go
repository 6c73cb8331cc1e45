package main

// Benchmark 4: capacity. N sessions, each with one open desktop stream whose viewer asks for
// incremental updates (the builtin desktop then sends the clock row once a second), through
// one gateway process; its resident memory and CPU. The gateway holds two sockets a stream,
// so everything else lives in other processes: the clients (-procs processes of the clients
// role), two machines' agents, and the desktop server, which runs the builtin desktop's code
// at 256×160 on a Unix socket (the agent's own builtin desktop draws 1024×768 for every viewer,
// 3 MiB each, which 10,000 viewers do not fit in this host's memory; the gateway carries the
// same bytes either way after each stream's first screen).

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/frontdoor-vdi/frontdoor/bench/internal/rig"
)

func capacityMain(args []string) error {
	fs := flag.NewFlagSet("capacity", flag.ExitOnError)
	e := envFlags(fs)
	n := fs.Int("n", 9900, "sessions (a gateway holds 2 descriptors a stream: 10,000 streams need more than a limit of 20,000)")
	procs := fs.Int("procs", 2, "client processes")
	rate := fs.Int("rate", 100, "sessions opened per second, at most (all processes)")
	hold := fs.Duration("hold", 15*time.Second, "measured window once every session is open")
	rampMax := fs.Duration("ramp-max", 5*time.Minute, "give up opening after this long")
	ws := fs.Bool("websocket", false, "carry the streams over WebSockets to the gateway's HTTPS port, as browsers do")
	fs.Parse(args)
	machines := max((*n+4999)/5000, 1) // an agent holds 2 descriptors a stream too
	sock := filepath.Join(e.work, "desktop.sock")
	dk, err := spawn(e.work, "desktop-cap", e.loadCPU, "desktop", "-listen", "unix:"+sock)
	if err != nil {
		return err
	}
	defer dk.kill()
	var ags []*child
	defer func() {
		for _, a := range ags {
			a.kill()
		}
	}()
	for m := 1; m <= machines; m++ {
		a, err := spawn(e.work, fmt.Sprintf("agent-cap-%d", m), e.loadCPU, "agent", "-dir", e.dir, "-n", fmt.Sprint(m), "-desktop", "unix:"+sock)
		if err != nil {
			return err
		}
		ags = append(ags, a)
	}
	gw, err := spawn(e.work, "gateway-cap", e.relayCPU, "gateway", "-dir", e.dir, "-n", "0")
	if err != nil {
		return err
	}
	defer gw.kill()
	rss0, _ := status(gw.pid(), "VmRSS")
	var cls []*child
	defer func() {
		for _, c := range cls {
			c.kill()
		}
	}()
	per := (*n + *procs - 1) / *procs
	for p := range *procs {
		count := min(per, *n-p*per)
		if count <= 0 {
			break
		}
		c, err := spawn(e.work, fmt.Sprintf("clients-%d", p), e.loadCPU, "clients", "-dir", e.dir, "-n", fmt.Sprint(count),
			"-first", fmt.Sprint(p*per), "-machines", fmt.Sprint(machines), "-rate", fmt.Sprint(max(*rate / *procs, 1)), "-websocket="+fmt.Sprint(*ws))
		if err != nil {
			return err
		}
		cls = append(cls, c)
	}
	// The ramp: until every session is open or failed, bounded.
	start := time.Now()
	var peakRSS int64
	var st clientsState
	for time.Since(start) < *rampMax {
		time.Sleep(time.Second)
		st = readClients(cls)
		rss, _ := status(gw.pid(), "VmRSS")
		peakRSS = max(peakRSS, rss)
		fmt.Fprintf(os.Stderr, "capacity %4.0fs: %d open, %d failed, gateway RSS %d MB, %d fds\n", time.Since(start).Seconds(),
			st.open, st.failed, rss>>10, openFiles(gw.pid()))
		if st.open+st.failed >= int64(*n) || gw.exited() {
			break
		}
	}
	ramp := time.Since(start)
	if gw.exited() {
		return fmt.Errorf("the gateway exited during the ramp: see %s", gw.log)
	}
	time.Sleep(3 * time.Second) // the first screens settle
	// The measured window.
	u0 := readClients(cls)
	c0, _ := cpuSeconds(gw.pid())
	t0 := time.Now()
	var rssMax int64
	for time.Since(t0) < *hold {
		time.Sleep(time.Second)
		rss, _ := status(gw.pid(), "VmRSS")
		rssMax = max(rssMax, rss)
	}
	c1, _ := cpuSeconds(gw.pid())
	u1 := readClients(cls)
	el := time.Since(t0).Seconds()
	hwm, _ := status(gw.pid(), "VmHWM")
	threads, _ := status(gw.pid(), "Threads")
	fds := openFiles(gw.pid())
	cpuPct := 100 * (c1 - c0) / el
	upd := float64(u1.updates-u0.updates) / el
	peakRSS = max(peakRSS, rssMax, hwm)
	open := u1.open
	how := "TLS channels"
	if *ws {
		how = "WebSocket channels on the gateway's HTTPS port (a browser's way)"
	}
	fmt.Printf("### 4. Capacity: idle desktop streams through one gateway process, %s\n\n", how)
	fmt.Printf("%d sessions asked for (%d client processes, at most %d opened a second), each with one desktop stream whose viewer keeps "+
		"an incremental request waiting: the desktop sends its clock row (224×13 pixels, 11.6 kB raw) once a second. "+
		"%d agent process(es) in front of one desktop server process (the builtin desktop's code at 256×160 on a Unix socket). "+
		"Gateway on CPU %s, everything else on CPU %s. Measured over %v once the ramp was over.\n\n",
		*n, len(cls), *rate, machines, e.relayCPU, e.loadCPU, *hold)
	fmt.Println("| streams open | failed | ramp s | gateway RSS MB (window max) | peak RSS MB (VmHWM) | RSS per stream kB | gateway CPU % | updates/s seen by the viewers | gateway fds | threads | goal | met? |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|---|---|")
	perStream := 0.0
	if open > 0 {
		perStream = float64(rssMax-rss0) / float64(open)
	}
	met := yes(peakRSS <= 1<<20 && open >= int64(*n))
	fmt.Printf("| %d | %d | %.0f | %d | %d | %.1f | %.1f | %.0f | %d | %d | ≤ 1 GB | %s |\n\n", open, u1.failed, ramp.Seconds(),
		rssMax>>10, peakRSS>>10, perStream, cpuPct, upd, fds, threads, met)
	if len(u1.errs) > 0 {
		fmt.Printf("First errors of the clients: %s\n\n", strings.Join(u1.errs, "; "))
	}
	e.summary("4. capacity, %d streams through one gateway, %s | RSS %d MB (peak %d MB), CPU %.1f%% | – | – | ≤ 1 GB | %s",
		open, how, rssMax>>10, peakRSS>>10, cpuPct, met)
	return nil
}

// clientsState is the sum of the clients processes' last progress lines.
type clientsState struct {
	open, failed, updates int64
	errs                  []string
}

// readClients reads each clients process's last "OPEN n FAILED f UPDATES u" line of its log,
// and its first ERR line.
func readClients(cls []*child) clientsState {
	var st clientsState
	for _, c := range cls {
		f, err := os.Open(c.log)
		if err != nil {
			continue
		}
		var last string
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			l := sc.Text()
			if strings.HasPrefix(l, "OPEN ") {
				last = l
			} else if strings.HasPrefix(l, "ERR ") && len(st.errs) < 3 {
				st.errs = append(st.errs, strings.TrimPrefix(l, "ERR "))
			}
		}
		f.Close()
		var o, fl, u int64
		fmt.Sscanf(last, "OPEN %d FAILED %d UPDATES %d", &o, &fl, &u)
		st.open += o
		st.failed += fl
		st.updates += u
	}
	return st
}

// clientsMain opens -n sessions (ids from -first) at -rate a second, on machines vda-1 …
// vda-M in turn, each with one desktop stream and a viewer that keeps an incremental request
// waiting, and holds them until it is stopped. Once a second it prints "OPEN n FAILED f
// UPDATES u" (u counts every update the viewers read), and "ERR ..." for the first failure.
func clientsMain(args []string) error {
	fs := flag.NewFlagSet("clients", flag.ExitOnError)
	dir := fs.String("dir", "", "site directory")
	n := fs.Int("n", 100, "sessions")
	first := fs.Int("first", 0, "number of the first session")
	machines := fs.Int("machines", 1, "machines vda-1 … vda-M")
	rate := fs.Int("rate", 50, "sessions opened a second, at most")
	ws := fs.Bool("websocket", false, "channels over WebSockets")
	fs.Parse(args)
	s, err := loadSite(*dir)
	if err != nil {
		return err
	}
	ctx, cancel := rig.UntilStopped()
	defer cancel()
	var open, failed, updates atomic.Int64
	var errOnce sync.Once
	fail := func(id int, err error) {
		failed.Add(1)
		errOnce.Do(func() { fmt.Printf("ERR session %d: %s\n", id, oneLine(err)) })
	}
	fmt.Println("READY clients")
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				fmt.Printf("OPEN %d FAILED %d UPDATES %d\n", open.Load(), failed.Load(), updates.Load())
			}
		}
	}()
	sem := make(chan struct{}, 64) // openings in flight
	tick := time.NewTicker(time.Second / time.Duration(max(*rate, 1)))
	defer tick.Stop()
	for i := range *n {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		select {
		case <-ctx.Done():
			return nil
		case sem <- struct{}{}:
		}
		id := *first + i
		go func() {
			var v *viewer
			var err error
			for try := 0; try < 3 && ctx.Err() == nil; try++ {
				if v, err = openStream(ctx, s, id, 1+id%*machines, *ws); err == nil {
					break
				}
			}
			<-sem
			if err != nil {
				fail(id, err)
				return
			}
			open.Add(1)
			defer v.Close()
			for range 1 << 30 {
				if _, err := v.update(); err != nil {
					if ctx.Err() == nil {
						open.Add(-1)
						fail(id, fmt.Errorf("the viewer's connection broke: %w", err))
					}
					return
				}
				updates.Add(1)
				if err := v.rfb.RequestAll(true); err != nil {
					return
				}
			}
		}()
	}
	<-ctx.Done() // the process ends with its sessions
	return nil
}

// perSource is how many streams come from one source address: under the gateway's
// per-source bound of a quarter of a port's 10,000 places, as clients behind few NATs.
const perSource = 2000

// sourceOf is the source address of stream id's channels: 127.0.84.1 for the first
// perSource, then the next.
func sourceOf(id int) netip.Addr {
	return netip.AddrFrom4([4]byte{127, 0, 84, byte(1 + id/perSource)})
}

// openStream opens session id on machine m and attaches a viewer to its desktop, with an
// incremental request waiting, within 30s. The session lives until the process ends.
func openStream(ctx context.Context, s *site, id, m int, ws bool) (*viewer, error) {
	octx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	d, err := s.descriptor(fmt.Sprintf("cap-%d-%d", id, time.Now().UnixNano()), m, "vnc", 0)
	if err != nil {
		return nil, err
	}
	// A generous dial timeout: thousands of handshakes queue on the load CPU during the ramp,
	// which no real client sees.
	sess, err := s.open(octx, d, 10*time.Second, ws, sourceOf(id))
	if err != nil {
		return nil, err
	}
	c, err := sess.Attach(octx, displayPort)
	if err != nil {
		sess.Close()
		return nil, err
	}
	v, err := newViewer(c)
	if err != nil {
		sess.Close()
		return nil, err
	}
	if err := v.rfb.RequestAll(true); err != nil {
		v.Close()
		sess.Close()
		return nil, err
	}
	return v, nil
}
