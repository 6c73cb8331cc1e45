package main

// Benchmark 1: the latency a gateway adds. A viewer presses a key with an incremental
// request waiting and times the update that shows it, straight to the desktop server and
// through frontdoor (the client's local port → client session → TLS → gateway → TLS → agent
// → desktop server), and through frontdoor with the client's channel on a WebSocket to the
// gateway's HTTPS port (a browser's path), the three in turn in each round, on fresh
// connections.

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/frontdoor-vdi/frontdoor/internal/rfb"
	"github.com/frontdoor-vdi/frontdoor/internal/xdesk"
)

func latencyMain(args []string) error {
	fs := flag.NewFlagSet("latency", flag.ExitOnError)
	e := envFlags(fs)
	samples := fs.Int("samples", 2000, "round trips per desktop and path")
	rounds := fs.Int("rounds", 4, "rounds per desktop; each path's samples are split over them")
	gap := fs.Duration("gap", 5*time.Millisecond, "pause between round trips")
	desktops := fs.String("desktops", "builtin,xvnc", "desktops: builtin, xvnc")
	fs.Parse(args)
	s, err := loadSite(e.dir)
	if err != nil {
		return err
	}
	fmt.Printf("### 1. Added latency: key → framebuffer update round trip\n\n")
	fmt.Printf("%d round trips per desktop and path in %d alternating rounds (a fresh viewer connection each), %v apart; "+
		"gateway on CPU %s, everything else (viewer, client session, agent, desktop server) on CPU %s.\n\n",
		*samples, *rounds, *gap, e.relayCPU, e.loadCPU)
	fmt.Println("| desktop | path | n | p50 ms | p99 ms | max ms | added p50 ms | added p99 ms | goal (p99 added) | met? |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|")
	// (the WebSocket row's "added" is against frontdoor's TLS channel: what the browser's way costs on top)
	for _, dk := range split(*desktops) {
		r, err := latencyOf(s, e, dk, *samples, *rounds, *gap)
		if err != nil {
			fmt.Printf("| %s | – | – | – | – | – | – | – | ≤ 0.5 ms | not run: %s |\n", dk, oneLine(err))
			e.summary("1. added latency, %s | not run | | | ≤ 0.5 ms p99 | no: %s", dk, oneLine(err))
			continue
		}
		st, fd, ws := r[0], r[1], r[2]
		add50, add99 := fd.p50-st.p50, fd.p99-st.p99
		met := yes(add99 <= 500*time.Microsecond)
		fmt.Printf("| %s | straight | %d | %s | %s | %s | | | | |\n", dk, st.n, ms(st.p50), ms(st.p99), ms(st.max))
		fmt.Printf("| %s | frontdoor | %d | %s | %s | %s | %s | %s | ≤ 0.5 | %s |\n", dk, fd.n, ms(fd.p50), ms(fd.p99), ms(fd.max), ms(add50), ms(add99), met)
		fmt.Printf("| %s | frontdoor, WebSocket | %d | %s | %s | %s | %s vs TLS | %s vs TLS | – | – |\n", dk, ws.n, ms(ws.p50), ms(ws.p99), ms(ws.max), ms(ws.p50-fd.p50), ms(ws.p99-fd.p99))
		e.summary("1. WebSocket channel against the TLS channel, %s desktop | p50 %s / p99 %s ms | TLS p50 %s / p99 %s ms | %+.2f / %+.2f ms | – | –",
			dk, ms(ws.p50), ms(ws.p99), ms(fd.p50), ms(fd.p99), float64(ws.p50-fd.p50)/1e6, float64(ws.p99-fd.p99)/1e6)
		e.summary("1. added latency, %s desktop | p50 %s / p99 %s ms | straight p50 %s / p99 %s ms | +%s / +%s ms | ≤ 0.5 ms p99 added | %s",
			dk, ms(fd.p50), ms(fd.p99), ms(st.p50), ms(st.p99), ms(add50), ms(add99), met)
	}
	fmt.Println()
	return nil
}

// latencyOf measures one desktop: the straight path's, frontdoor's and frontdoor's over a
// WebSocket distributions.
func latencyOf(s *site, e *env, dk string, samples, rounds int, gap time.Duration) ([3]dist, error) {
	var out [3]dist
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	straight, agentDesktop, protocol := straightAddr, "builtin", "builtin"
	if dk == "xvnc" {
		xdir := filepath.Join(e.work, "xvnc")
		os.MkdirAll(xdir, 0o755)
		x, err := xdesk.StartXvnc(ctx, xdesk.XvncOptions{Dir: xdir, TCPPort: xdesk.AnyPort, Xterm: true})
		if err != nil {
			return out, err
		}
		defer x.Close()
		straight, agentDesktop, protocol = x.Address(), "tcp:"+x.Address(), "vnc"
	} else if dk != "builtin" {
		return out, fmt.Errorf("unknown desktop %q", dk)
	}
	ag, err := spawn(e.work, "agent-"+dk, e.loadCPU, "agent", "-dir", e.dir, "-n", "1", "-desktop", agentDesktop, "-straight="+fmt.Sprint(dk == "builtin"))
	if err != nil {
		return out, err
	}
	defer ag.stop()
	gw, err := spawn(e.work, "gateway-"+dk, e.relayCPU, "gateway", "-dir", e.dir, "-n", "0")
	if err != nil {
		return out, err
	}
	defer gw.stop()
	addrs := [3]string{straight}
	for i, ws := range []bool{false, true} {
		d, err := s.descriptor(fmt.Sprintf("lat-%s-%d", dk, i), 1, protocol, 0)
		if err != nil {
			return out, err
		}
		sess, err := s.open(ctx, d, 0, ws, netip.Addr{})
		if err != nil {
			return out, err
		}
		defer sess.Close()
		local, err := sess.Expose("127.0.0.1:0", displayPort)
		if err != nil {
			return out, err
		}
		addrs[1+i] = local.String()
	}
	names := []string{"straight", "frontdoor", "frontdoor over a WebSocket"}
	var all [3][]time.Duration
	per := max(samples/rounds, 1)
	for r := range rounds {
		for i := range 3 {
			p := (i + r) % 3 // turn which path goes first
			xs, err := roundTrips(addrs[p], dk == "builtin", per, gap)
			if err != nil {
				return out, fmt.Errorf("%s path, round %d: %w", names[p], r+1, err)
			}
			all[p] = append(all[p], xs...)
		}
	}
	return [3]dist{distOf(all[0]), distOf(all[1]), distOf(all[2])}, nil
}

// roundTrips connects a viewer to addr and times n key round trips, alternating an 'x' and
// BackSpace so that each one changes the screen (the builtin desktop's keys row, an xterm's
// prompt). The first 10 warm the path up and are not counted.
func roundTrips(addr string, builtin bool, n int, gap time.Duration) ([]time.Duration, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	v, err := newViewer(c)
	if err != nil {
		return nil, err
	}
	defer v.Close()
	if !builtin {
		// The xterm sits at +20+20: the pointer over it gives it the keyboard.
		if err := v.rfb.Pointer(0, 200, 150); err != nil {
			return nil, err
		}
	}
	if err := v.rfb.RequestAll(true); err != nil {
		return nil, err
	}
	const warm = 10
	deadline := time.Now().Add(3 * time.Minute)
	var xs []time.Duration
	for i := range n + warm {
		if time.Now().After(deadline) {
			return xs, fmt.Errorf("%d round trips took over 3 minutes", i)
		}
		key, want := uint32('x'), "keys: x"
		if i%2 == 1 {
			key, want = rfb.KeyBackSpace, "keys:"
		}
		d, err := v.roundTrip(key, builtin, want)
		if err != nil {
			return xs, fmt.Errorf("round trip %d: %w", i+1, err)
		}
		if i >= warm {
			xs = append(xs, d)
		}
		time.Sleep(gap)
	}
	return xs, nil
}

func yes(ok bool) string {
	if ok {
		return "yes"
	}
	return "**no**"
}

func oneLine(err error) string { return strings.Join(strings.Fields(err.Error()), " ") }
