package main

import (
	"fmt"
	"slices"
	"strings"
)

// usPerDatagram is the relay's CPU µs per datagram it relayed: each echo crosses it twice.
func (r udpRow) usPerDatagram() float64 {
	if r.r.Echoed <= 0 || r.w.cpu < 0 {
		return 0
	}
	return r.w.cpu / float64(2*r.r.Echoed) * 1e6
}

func (r udpRow) rate() float64 { return float64(r.r.Echoed) / max(r.r.Seconds, 1e-9) }

// secPerGB is the relay's CPU seconds per GB (10^9 bytes) it relayed.
func (r tcpRow) secPerGB() float64 {
	if r.r.Bytes <= 0 || r.w.cpu < 0 {
		return 0
	}
	return r.w.cpu / (float64(r.r.Bytes) / 1e9)
}

func (r tcpRow) mbps() float64 { return float64(r.r.Bytes) / max(r.r.Seconds, 1e-9) / 1e6 }

func (o *config) busyAt(w *window, cpu int) string {
	if cpu < 0 || cpu >= len(w.busy) {
		return "–"
	}
	return fmt.Sprintf("%.0f%%", w.busy[cpu]*100)
}

func share(cpu, wall float64) string {
	if cpu < 0 || wall <= 0 {
		return "–"
	}
	return fmt.Sprintf("%.0f%%", cpu/wall*100)
}

// ratio formats a/b, or "–" when either is missing.
func ratio(a, b float64) string {
	if a <= 0 || b <= 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f×", a/b)
}

func note(s string) string { return strings.ReplaceAll(s, "|", "/") }

func (o *config) report(us []udpRow, ts []tcpRow) {
	rc, lc := o.relayCPU, o.loadCPU
	if len(us) > 0 {
		fmt.Printf("### UDP: one flow, echoed, %d datagrams in flight, %v per row\n\n", o.window, o.dur)
		fmt.Println("datagrams/s counts echoes (round trips); each echo crosses the relay twice, so \"relay µs per")
		fmt.Println("datagram\" is the relay process's CPU (utime+stime) ÷ (2 × echoes). CPU busy: the whole core,")
		fmt.Printf("from /proc/stat (relay on CPU %d, load, machine and backends on CPU %d). UDP packets per echo:\n", rc, lc)
		fmt.Println("the host's InDatagrams (/proc/net/snmp) ÷ echoes (4 for a plain relay; QUIC packs small")
		fmt.Println("datagrams and adds ACKs). Switches: the relay's context switches (all threads) per datagram.")
		fmt.Println()
		fmt.Printf("| round | bytes | target | datagrams/s | loss | p50 µs | p99 µs | relay CPU | relay µs per datagram | UDP packets per echo | relay switches per datagram | CPU %d busy | CPU %d busy | via / note |\n", rc, lc)
		fmt.Println("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
		for _, r := range us {
			loss := 0.0
			if r.r.Sent > 0 {
				loss = float64(r.r.Lost) / float64(r.r.Sent) * 100
			}
			pk, sw := 0.0, 0.0
			if r.r.Echoed > 0 {
				pk, sw = float64(r.w.udpIn)/float64(r.r.Echoed), float64(r.w.switches)/float64(2*r.r.Echoed)
			}
			fmt.Printf("| %d | %d | %s | %.0f | %.2f%% | %.0f | %.0f | %s | %.2f | %.2f | %.2f | %s | %s | %s |\n", r.round, r.size, r.target,
				r.rate(), loss, r.r.P50us, r.r.P99us, share(r.w.cpu, r.w.wall), r.usPerDatagram(), pk, sw,
				o.busyAt(r.w, rc), o.busyAt(r.w, lc), note(strings.TrimSpace(r.via+" "+r.r.Err)))
		}
		fds := slices.DeleteFunc(slices.Clone(o.udpTargets), func(t string) bool { return relayOf(t) != "fd" })
		if slices.Contains(o.udpTargets, "nginx") && len(fds) > 0 {
			ratioTable("UDP ratios per round: frontdoor ÷ nginx (per CPU: datagrams per relay CPU-second; rate: datagrams/s)",
				"bytes", fds, func(t string) string { return fmt.Sprintf(" %s per CPU | %s rate |", t, t) }, o.rounds, o.sizes,
				func(r, size int) (func(string) string, bool) {
					ng, ok := findUDP(us, r, size, "nginx")
					return func(t string) string {
						fd, _ := findUDP(us, r, size, t)
						return fmt.Sprintf(" %s | %s |", ratio(ng.usPerDatagram(), fd.usPerDatagram()), ratio(fd.rate(), ng.rate()))
					}, ok
				})
		}
	}
	if len(ts) > 0 {
		fmt.Printf("\n### TCP: bulk TLS streams into a sink, %v per row\n\n", o.dur)
		fmt.Println("MB/s counts the bytes the client wrote in the window (10^6 B/s); relay CPU s per GB is the relay")
		fmt.Println("process's CPU (utime+stime) ÷ GB (10^9 B) relayed.")
		fmt.Println()
		fmt.Printf("| round | streams | target | MB/s | relay CPU | relay CPU s per GB | client's TLS | CPU %d busy | CPU %d busy | note |\n", rc, lc)
		fmt.Println("|---|---|---|---|---|---|---|---|---|---|")
		for _, r := range ts {
			fmt.Printf("| %d | %d | %s | %.0f | %s | %.3f | %s | %s | %s | %s |\n", r.round, r.streams, r.target, r.mbps(),
				share(r.w.cpu, r.w.wall), r.secPerGB(), r.r.Cipher, o.busyAt(r.w, rc), o.busyAt(r.w, lc), note(r.r.Err))
		}
		peers := slices.DeleteFunc(slices.Clone(o.tcpTargets), func(t string) bool { return relayOf(t) == "fd" })
		if slices.Contains(o.tcpTargets, "fd-tls") && len(peers) > 0 {
			ratioTable("TCP ratios per round: fd-tls ÷ peer (per CPU: GB per relay CPU-second; rate: MB/s)",
				"streams", peers, func(p string) string { return fmt.Sprintf(" ÷ %s per CPU | ÷ %s rate |", p, p) }, o.rounds, o.streams,
				func(r, n int) (func(string) string, bool) {
					fd, ok := findTCP(ts, r, n, "fd-tls")
					return func(p string) string {
						pr, _ := findTCP(ts, r, n, p)
						return fmt.Sprintf(" %s | %s |", ratio(pr.secPerGB(), fd.secPerGB()), ratio(fd.mbps(), pr.mbps()))
					}, ok
				})
		}
	}
	o.goals(us, ts)
}

// goals prints the two goals against the per-round ratios.
func (o *config) goals(us []udpRow, ts []tcpRow) {
	var lines []string
	if slices.Contains(o.udpTargets, "nginx") {
		for _, t := range []string{"fd-quic", "fd-quic-raw"} {
			if !slices.Contains(o.udpTargets, t) {
				continue
			}
			lines = append(lines, o.goalRatios("encrypted UDP ("+t+") ≥ 1.0× nginx's plain forward per CPU", o.sizes, "%d B",
				func(r, size int) (float64, bool) {
					ng, ok1 := findUDP(us, r, size, "nginx")
					fd, ok2 := findUDP(us, r, size, t)
					return ng.usPerDatagram() / fd.usPerDatagram(), ok1 && ok2 && fd.usPerDatagram() > 0 && ng.usPerDatagram() > 0
				}))
		}
	}
	for _, p := range []string{"haproxy"} {
		if !slices.Contains(o.tcpTargets, "fd-tls") || !slices.Contains(o.tcpTargets, p) {
			continue
		}
		lines = append(lines, o.goalRatios("TLS channels (fd-tls) ≥ 1.0× HAProxy's TLS termination per CPU", o.streams, "%d stream(s)",
			func(r, n int) (float64, bool) {
				fd, ok1 := findTCP(ts, r, n, "fd-tls")
				pr, ok2 := findTCP(ts, r, n, p)
				return pr.secPerGB() / fd.secPerGB(), ok1 && ok2 && fd.secPerGB() > 0 && pr.secPerGB() > 0
			}))
	}
	if len(lines) == 0 {
		return
	}
	fmt.Println("\n### Goals (per-round ratios, frontdoor ÷ peer, per relay CPU)")
	fmt.Println()
	for _, l := range lines {
		fmt.Println(l)
	}
}

// goalRatios is the goal line of one comparison: for each of xs (a row's size or streams,
// named by format), the ratio of each round that has both sides (ok).
func (o *config) goalRatios(goal string, xs []int, format string, ratio func(round, x int) (v float64, ok bool)) string {
	var rs []float64
	var cells []string
	for _, x := range xs {
		var per []string
		for r := 1; r <= o.rounds; r++ {
			if v, ok := ratio(r, x); ok {
				rs = append(rs, v)
				per = append(per, fmt.Sprintf("%.2f×", v))
			}
		}
		cells = append(cells, fmt.Sprintf(format, x)+" "+strings.Join(per, ", "))
	}
	return goalLine(goal, rs, cells)
}

func goalLine(goal string, rs []float64, cells []string) string {
	met := 0
	for _, x := range rs {
		if x >= 1 {
			met++
		}
	}
	verdict := "**no**"
	switch {
	case len(rs) == 0:
		verdict = "not measured"
	case met == len(rs):
		verdict = "yes"
	case met > 0:
		verdict = "**mixed**"
	}
	return fmt.Sprintf("- %s: %s (%d of %d rows at or above 1.0×): %s", goal, verdict, met, len(rs), strings.Join(cells, "; "))
}

func findUDP(us []udpRow, round, size int, target string) (udpRow, bool) {
	for _, r := range us {
		if r.round == round && r.size == size && r.target == target {
			return r, true
		}
	}
	return udpRow{w: &window{}}, false
}

func findTCP(ts []tcpRow, round, streams int, target string) (tcpRow, bool) {
	for _, r := range ts {
		if r.round == round && r.streams == streams && r.target == target {
			return r, true
		}
	}
	return tcpRow{w: &window{}}, false
}

// ratioTable prints a table of ratios per round: a row for each round and key (a datagram
// size, a stream count) whose reference run was found (row's ok), with two columns for
// each of cols, headed by head and filled by the row's cells.
func ratioTable(title, key string, cols []string, head func(string) string, rounds int, keys []int, row func(round, key int) (func(string) string, bool)) {
	fmt.Println("\n#### " + title)
	fmt.Println()
	hdr, sep := "| round | "+key+" |", "|---|---|"
	for _, c := range cols {
		hdr += head(c)
		sep += "---|---|"
	}
	fmt.Println(hdr)
	fmt.Println(sep)
	for r := 1; r <= rounds; r++ {
		for _, k := range keys {
			cells, ok := row(r, k)
			if !ok {
				continue
			}
			line := fmt.Sprintf("| %d | %d |", r, k)
			for _, c := range cols {
				line += cells(c)
			}
			fmt.Println(line)
		}
	}
}
