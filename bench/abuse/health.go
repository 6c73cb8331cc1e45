//go:build linux

package main

// What the node's health checker did: its /metrics (the admin listener, as the bench's
// admin) read at each phase's start and end, and its log's verdict changes.

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/frontdoor-vdi/frontdoor/bench/internal/rig"
)

// healthScrape is the node's health counters at one moment: metric{labels} → value.
type healthScrape map[string]float64

// scrapeHealth reads the node's frontdoor_health_* samples; nil when it cannot.
func scrapeHealth(pool *x509.CertPool) healthScrape {
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	defer hc.CloseIdleConnections()
	for try := 0; try < 3; try++ {
		req, _ := http.NewRequest(http.MethodGet, "https://"+adminAddr+"/metrics", nil)
		req.SetBasicAuth(adminUser, password)
		resp, err := hc.Do(req)
		if err != nil {
			progress("node metrics: %v", err)
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			progress("node metrics: %s", resp.Status)
			continue
		}
		out := healthScrape{}
		rig.ParseMetrics(string(b), "", out) // sum and the phases read frontdoor_health_* only
		return out
	}
	return nil
}

// sum adds the samples of metric whose labels hold every one of want (`target="gw-1"`).
func (h healthScrape) sum(metric string, want ...string) float64 {
	var n float64
next:
	for k, v := range h {
		if !strings.HasPrefix(k, metric+"{") {
			continue
		}
		for _, w := range want {
			if !strings.Contains(k, w) {
				continue next
			}
		}
		n += v
	}
	return n
}

// healthPhase is what the checker did in one phase: the scrapes at its start and end.
type healthPhase struct {
	phase      string
	start, end healthScrape
}

var targetLabel = regexp.MustCompile(`target="([^"]*)"`)

// printHealth prints, per phase, the probes held and timed out and each target's verdict
// changes, then the node log's verdict changes.
func printHealth(phases []healthPhase, logPath string) {
	fmt.Println()
	fmt.Println("### The node's health checker (its /metrics at each phase's start and end)")
	fmt.Println()
	fmt.Println("| phase | probes | probes held | probe timeouts | gw-1 verdicts to down / all changes | machines to down / all changes | targets down at the end |")
	fmt.Println("|---|---:|---:|---:|---|---|---|")
	for _, p := range phases {
		if p.start == nil || p.end == nil {
			fmt.Printf("| %s | – | – | – | – | – | metrics not read |\n", p.phase)
			continue
		}
		d := func(metric string, want ...string) float64 {
			return p.end.sum(metric, want...) - p.start.sum(metric, want...)
		}
		probes := d("frontdoor_health_probe_duration_seconds_count")
		held := d("frontdoor_health_probes_held_total")
		gwHeld := d("frontdoor_health_probes_held_total", `target="gw-1"`)
		gwTimeouts := d("frontdoor_health_probe_duration_seconds_count", `result="timeout"`, `kind="tls"`) +
			d("frontdoor_health_probe_duration_seconds_count", `result="timeout"`, `kind="https"`)
		timeouts := d("frontdoor_health_probe_duration_seconds_count", `result="timeout"`)
		gwDown, gwAll := d("frontdoor_health_transitions_total", `target="gw-1"`, `to="down"`), d("frontdoor_health_transitions_total", `target="gw-1"`)
		mDown, mAll := d("frontdoor_health_transitions_total", `target="bm-`, `to="down"`), d("frontdoor_health_transitions_total", `target="bm-`)
		var down []string
		for k, v := range p.end {
			if strings.HasPrefix(k, "frontdoor_health_target_state{") && v == 0 {
				if m := targetLabel.FindStringSubmatch(k); m != nil {
					down = append(down, m[1])
				}
			}
		}
		sort.Strings(down)
		fmt.Printf("| %s | %.0f | %.0f | %.0f | %.0f / %.0f | %.0f / %.0f | %s |\n", p.phase, probes, held, timeouts, gwDown, gwAll, mDown, mAll, strings.Join(down, " "))
		fmt.Printf("HEALTH phase=%s probes=%.0f held=%.0f timeouts=%.0f gw_down=%.0f gw_changes=%.0f machines_down=%.0f machines_changes=%.0f gw_timeouts=%.0f gw_held=%.0f\n\n", p.phase, probes, held, timeouts, gwDown, gwAll, mDown, mAll, gwTimeouts, gwHeld)
	}
	changes, heldLines := logHealth(logPath)
	fmt.Printf("the node's log over the run: %d \"health probe timed out while this process was starved\" lines (one per run of held probes); verdict changes: %s\n",
		heldLines, strings.Join(changes, "; "))
}

var (
	logTarget = regexp.MustCompile(`target=(\S+)`)
	logTo     = regexp.MustCompile(` to=(\S+)`)
)

// logHealth counts the node log's verdict changes by target and new verdict, and its lines
// of held probes.
func logHealth(path string) ([]string, int) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0
	}
	defer f.Close()
	count, held := map[string]int{}, 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.Contains(line, "health probe timed out while this process was starved"):
			held++
		case strings.Contains(line, "health verdict changed"):
			t, to := logTarget.FindStringSubmatch(line), logTo.FindStringSubmatch(line)
			if t != nil && to != nil {
				count[t[1]+"→"+to[1]]++
			}
		}
	}
	var out []string
	for k, v := range count {
		out = append(out, fmt.Sprintf("%s ×%d", k, v))
	}
	sort.Strings(out)
	if len(out) == 0 {
		out = []string{"none"}
	}
	return out, held
}
