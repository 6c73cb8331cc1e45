//go:build linux

package main

import "fmt"

// us formats a round trip in µs; -1 is a lost datagram's.
func us(v float64) string {
	if v < 0 {
		return "lost"
	}
	return fmt.Sprintf("%.0f", v)
}

func report(rows []row, rates []int) {
	fmt.Println("| config | round | gateway code | GOMAXPROCS | flood target/s | flood achieved/s | flow echoed | flow lost | p50 µs | p99 µs | p99.9 µs | max µs | gateway CPU (cores) | flood CPU (cores) | forged checked/s | dropped at gateway socket | host RcvbufErrors | note |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range rows {
		sec := max(r.seconds, 1e-9)
		note := r.err
		if r.flows != 1 && r.err == "" {
			note = fmt.Sprintf("%d flows at the end", r.flows)
		}
		fmt.Printf("| %s | %d | %s | %s | %d | %.0f | %d | %d | %s | %s | %s | %s | %.2f | %.2f | %.0f | %d | %d | %s |\n",
			r.config, r.round, r.build, r.gomaxprocs, r.rate, float64(r.forged)/sec, r.flow.Echoed, r.flow.Lost,
			us(r.flow.P50us), us(r.flow.P99us), us(r.flow.P999us), us(r.flow.MaxUs), r.gwCPU/sec, r.floodCPU/sec,
			float64(r.denied)/sec, r.sockDrops, r.rcvbufErrors, note)
	}
	ratios(rows, rates)
}

// reportQUIC prints the QUIC target's rows: its answers to the spoofed sources instead of
// forged tickets checked.
func reportQUIC(rows []row, rates []int) {
	fmt.Println("## The gateway's QUIC port (gateway.QUIC) under forged QUIC Initials")
	fmt.Println()
	seen := map[string]bool{}
	for _, r := range rows {
		if r.flood != "" && !seen[r.flood] {
			seen[r.flood] = true
			fmt.Printf("flood: %s\n", r.flood)
		}
	}
	if len(seen) > 0 {
		fmt.Println()
	}
	fmt.Println("| config | round | gateway code | GOMAXPROCS | flood target/s | flood achieved/s | flow echoed | flow lost | p50 µs | p99 µs | p99.9 µs | max µs | gateway CPU (cores) | flood CPU (cores) | Retries to spoofed sources/s | other datagrams to them/s | dropped at gateway socket | host RcvbufErrors | gw-cpu busy (softirq) | client-cpu busy (softirq) | other host CPU (cores) | note |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range rows {
		sec := max(r.seconds, 1e-9)
		note := r.err
		if r.flows != 1 && r.err == "" {
			note = fmt.Sprintf("%d connected clients at the end", r.flows)
		}
		if r.denied != 0 {
			note += fmt.Sprintf(" %d channels denied", r.denied)
		}
		fmt.Printf("| %s | %d | %s | %s | %d | %.0f | %d | %d | %s | %s | %s | %s | %.2f | %.2f | %.0f | %.0f | %d | %d | %.0f%% (%.0f%%) | %.0f%% (%.0f%%) | %.2f | %s |\n",
			r.config, r.round, r.build, r.gomaxprocs, r.rate, float64(r.forged)/sec, r.flow.Echoed, r.flow.Lost,
			us(r.flow.P50us), us(r.flow.P99us), us(r.flow.P999us), us(r.flow.MaxUs), r.gwCPU/sec, r.floodCPU/sec,
			float64(r.retries)/sec, float64(r.handshake)/sec, r.sockDrops, r.rcvbufErrors,
			100*r.cpus[0].busy/sec, 100*r.cpus[0].softirq/sec, 100*r.cpus[1].busy/sec, 100*r.cpus[1].softirq/sec,
			max(0, r.cpus[0].busy+r.cpus[1].busy-r.benchCPU)/sec, note)
	}
	ratios(rows, rates)
}
