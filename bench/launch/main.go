// Command launch measures launches through the HTTPS launch API of a lab site, in one run:
// the site as one process over bolt (every node in one process), and the site as one
// process per node over a 3-member embedded etcd. Clients keep their connections, spread
// over every front door's launch listener, launch a new session and log it off again (so
// every launch is a new session, committed in the store), for a fixed time. It prints the
// launches per second and the p50 and p99 of a launch, and how many sessions the store still
// holds after every launch was logged off (none, unless one was lost track of). It is run by bench/launch.sh.
package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/frontdoor-vdi/frontdoor/configs"
	"github.com/frontdoor-vdi/frontdoor/lab"
	"golang.org/x/crypto/bcrypt"
)

func main() {
	var (
		bin      = flag.String("frontdoor", "", "the frontdoor binary the node processes run (required for etcd)")
		modes    = flag.String("modes", "bolt,etcd", "which sites to measure, in order")
		clients  = flag.Int("clients", 64, "concurrent clients")
		duration = flag.Duration("duration", 10*time.Second, "measuring window per site")
		warm     = flag.Duration("warm", 3*time.Second, "warm-up before the window (logins, connections)")
		perZone  = flag.Int("machines", 20, "bench machines per zone (max_sessions 50 each)")
		users    = flag.Int("users", 1000, "bench users")
	)
	flag.Parse()
	src, err := source(*perZone, *users)
	if err != nil {
		fail(err)
	}
	fmt.Printf("| site | launches/s | p50 | p99 | errors | sessions left after the logoffs |\n|---|---|---|---|---|---|\n")
	for _, m := range strings.Split(*modes, ",") {
		r, err := measure(m, *bin, src, *clients, *users, *warm, *duration)
		if err != nil {
			fail(fmt.Errorf("%s: %w", m, err))
		}
		fmt.Printf("| %s | %.0f | %s | %s | %d | %d |\n", r.site, r.rate, r.p50, r.p99, r.errors, r.left)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "launch:", err)
	os.Exit(1)
}

// source is the lab site moved to 127.71-73, with a group of bench machines in every zone,
// a resource on them and bench users (password "lab", bcrypt cost 4 so that the first login
// of each user does not dominate the warm-up).
func source(perZone, users int) ([]byte, error) {
	hash, err := bcrypt.GenerateFromPassword([]byte("lab"), 4)
	if err != nil {
		return nil, err
	}
	return lab.MovedSource(71, func(s string) string {
		var m, u strings.Builder
		for z, zone := range []string{"hq", "east", "west"} {
			for i := 0; i < perZone; i++ {
				fmt.Fprintf(&m, "  - {name: bm-%s-%d, address: 127.%d.4.%d, zone: %s, group: bench, max_sessions: 50}\n", zone, i, 71+z, i+1, zone)
			}
		}
		for i := 0; i < users; i++ {
			fmt.Fprintf(&u, "  - {name: bu%d, password_hash: %q}\n", i, hash)
		}
		s = strings.Replace(s, "\ngroups:\n", "\ngroups:\n  - {name: bench, kind: shared, load: {max_logons: 0}}\n", 1)
		s = strings.Replace(s, "\nmachines:\n", "\nmachines:\n"+m.String(), 1)
		s = strings.Replace(s, "\nresources:\n", "\nresources:\n  - {name: benchdesk, kind: desktop, groups: [{group: bench}], entitled: {everyone: true}}\n", 1)
		s = strings.Replace(s, "\nusers:\n", "\nusers:\n"+u.String(), 1)
		return s
	})
}

type result struct {
	site     string
	rate     float64
	p50, p99 time.Duration
	errors   int64
	left     int
}

func measure(mode, bin string, src []byte, clients, users int, warm, window time.Duration) (result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), warm+window+2*time.Minute)
	defer cancel()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	o := lab.Options{Logger: quiet, HeartbeatInterval: 2 * time.Second}
	res := result{site: "one process, bolt"}
	switch mode {
	case "bolt":
		cfg, err := configs.Load("bench site", src)
		if err != nil {
			return res, err
		}
		o.Config = cfg
	case "etcd":
		if bin == "" {
			return res, errors.New("-frontdoor is required for the etcd site")
		}
		o.Processes, o.Source, o.Binary = true, src, bin
		res.site = "one process per node (6), 3-member etcd"
	default:
		return res, fmt.Errorf("unknown mode %q", mode)
	}
	l, err := lab.New(ctx, o)
	if err != nil {
		return res, err
	}
	sctx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- l.Serve(sctx) }()
	defer func() { stop(); <-served }()

	var urls []string
	for _, n := range l.Config.Nodes {
		for _, li := range n.Listeners {
			if li.Kind == "launch" {
				urls = append(urls, "https://"+li.Address)
			}
		}
	}
	tc := l.TLSClientConfig()
	if err := waitReady(ctx, tc, urls); err != nil {
		return res, err
	}
	var (
		measuring atomic.Bool
		errs      atomic.Int64
		mu        sync.Mutex
		lat       []time.Duration
		wg        sync.WaitGroup
	)
	end := time.Now().Add(warm + window)
	time.AfterFunc(warm, func() { measuring.Store(true) })
	for c := 0; c < clients; c++ {
		wg.Go(func() {
			hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tc, MaxIdleConnsPerHost: 1}}
			url := urls[c%len(urls)]
			var mine []time.Duration
			for i := 0; time.Now().Before(end); i++ {
				user := fmt.Sprintf("bu%d", (c+i*clients)%users)
				start := time.Now()
				id, err := post(ctx, hc, url+"/v1/launch", user, `{"resource":"benchdesk","endpoint":"bench"}`)
				took := time.Since(start)
				if err != nil {
					if measuring.Load() {
						errs.Add(1)
					}
					continue
				}
				if measuring.Load() {
					mine = append(mine, took)
				}
				if _, err := post(ctx, hc, url+"/v1/sessions/"+id+"/logoff", user, ""); err != nil && measuring.Load() {
					errs.Add(1)
				}
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	if len(lat) == 0 {
		return res, fmt.Errorf("no launch succeeded (%d errors)", errs.Load())
	}
	slices.Sort(lat)
	res.rate = float64(len(lat)) / window.Seconds()
	res.p50, res.p99 = lat[len(lat)/2].Round(100*time.Microsecond), lat[len(lat)*99/100].Round(100*time.Microsecond)
	res.errors = errs.Load()
	res.left = left(l)
	return res, nil
}

// post sends a request as user and returns the session id of a launch's answer.
func post(ctx context.Context, hc *http.Client, url, user, body string) (string, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	req.SetBasicAuth(user, "lab")
	resp, err := hc.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: %s", resp.Status, bytes.TrimSpace(b))
	}
	var d struct {
		SessionID string `json:"session_id"`
	}
	json.Unmarshal(b, &d)
	return d.SessionID, nil
}

// waitReady waits until a launch succeeds at every front door (their health probes have
// found the machines up).
func waitReady(ctx context.Context, tc *tls.Config, urls []string) error {
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tc}}
	deadline := time.Now().Add(30 * time.Second)
	for _, u := range urls {
		for {
			id, err := post(ctx, hc, u+"/v1/launch", "bu0", `{"resource":"benchdesk","endpoint":"ready"}`)
			if err == nil {
				if _, err := post(ctx, hc, u+"/v1/sessions/"+id+"/logoff", "bu0", ""); err != nil {
					return err
				}
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%s not ready after 30s: %w", u, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	return nil
}

// left counts the sessions the store still holds: every launch was logged off, so any is a
// session lost track of (the store's view of a distributed site catches up first).
func left(l *lab.Lab) int {
	n := 0
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		ss, _ := l.Sessions(context.Background())
		if n = len(ss); n == 0 {
			break
		}
	}
	return n
}
