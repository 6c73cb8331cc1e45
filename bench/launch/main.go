//go:build linux

// Command launch measures launches through the HTTPS launch API of a lab site, in one run:
// the site in one process (every node a node of its own, over a one-member embedded etcd
// without fsync), and the site as one process per node over a 3-member embedded etcd.
// Clients keep their connections, spread over every front door's launch listener, sign in
// as each of their users once, then launch a new session and log it off again (so every
// launch is a new session, committed in the store), for a fixed time. It prints the
// launches per second, the p50 and p99 of a launch, how many sessions the store still holds
// after every launch was logged off (none, unless one was lost track of) and the CPU time a
// launch took in this process (the etcd members, the agents, the clients) and in the node
// processes. -stats adds etcd's counters per launch, -cpuprofile CPU profiles of the window.
// It is run by bench/launch.sh.
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
	"github.com/frontdoor-vdi/frontdoor/wire"
	"golang.org/x/crypto/bcrypt"
)

func main() {
	var (
		bin      = flag.String("frontdoor", "", "the frontdoor binary the node processes run (required for etcd)")
		modes    = flag.String("modes", "bolt,etcd", "which sites to measure, in order: bolt (one node process over bolt), inproc (every node in this process, 1-member etcd without fsync), etcd (a process per node, 3-member etcd)")
		clients  = flag.Int("clients", 64, "concurrent clients")
		duration = flag.Duration("duration", 10*time.Second, "measuring window per site")
		warm     = flag.Duration("warm", 3*time.Second, "warm-up before the window (logins, connections)")
		perZone  = flag.Int("machines", 20, "bench machines per zone (max_sessions 50 each)")
		users    = flag.Int("users", 1000, "bench users")
		stats    = flag.Bool("stats", false, "print what the site's etcd did per launch in the window (etcd's counters in this process, one node's store metrics)")
		prof     = flag.String("cpuprofile", "", "write CPU profiles of the measuring window: PREFIX-MODE-bench.pprof for this process (etcd members, clients, agents) and PREFIX-etcd-NODE.pprof for each node process")
		stormN   = flag.Int("storm", 500, "the one-node site's logon storm before its launches: this many users' first logins from one address, by the clients at once (0: none)")
		cost     = flag.Int("storm-cost", bcrypt.DefaultCost, "the bcrypt cost of the storm's users' password hashes")
	)
	flag.Parse()
	src, err := source(*perZone, *users)
	if err != nil {
		fail(err)
	}
	st := storm{users: *stormN, cost: *cost}
	fmt.Printf("| site | launches/s | p50 | p99 | errors | sessions left after the logoffs | CPU per launch: this process + node processes |\n|---|---|---|---|---|---|---|\n")
	var storms []string
	for _, m := range strings.Split(*modes, ",") {
		r, err := measure(m, *bin, src, *clients, *users, st, *warm, *duration, *prof, *stats)
		if err != nil {
			fail(fmt.Errorf("%s: %w", m, err))
		}
		if r.storm != "" {
			storms = append(storms, r.storm)
		}
		left := fmt.Sprint(r.left)
		if r.left < 0 {
			left = "–" // a site of one node has no site database to count them in
		}
		fmt.Printf("| %s | %.0f | %s | %s | %d | %s | %s |\n", r.site, r.rate, r.p50, r.p99, r.errors, left, cpuPerLaunch(r))
	}
	if len(storms) > 0 {
		fmt.Printf("\nLogon storm: first logins of distinct users, passwords right, all from 127.0.0.1, %d at once:\n\n", *clients)
		fmt.Printf("| site | logins | bcrypt cost | logins/s | p50 | p99 | errors |\n|---|---|---|---|---|---|---|\n")
		for _, row := range storms {
			fmt.Println(row)
		}
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "launch:", err)
	os.Exit(1)
}

// source is the lab site moved to 127.71-73, with a group of bench machines in every zone,
// a resource on them and bench users (password "lab", bcrypt cost 4 — which the site allows
// with site.auth.min_password_cost — so that the first login of each user does not dominate
// the warm-up).
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
		s = strings.Replace(s, "\nsite:\n", "\nsite:\n  auth: {min_password_cost: 4}\n", 1)
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
	window   time.Duration
	p50, p99 time.Duration
	errors   int64
	left     int
	// cpuBench and cpuNodes are the CPU time this process (the site's etcd members, the
	// agents and the clients) and the node processes took in the window.
	cpuBench, cpuNodes time.Duration
	// storm is the row of the logon storm's table, if the site had one.
	storm string
}

// storm is the one-node site's logon storm: users su0… with hashes of cost cost.
type storm struct{ users, cost int }

// runStorm signs the storm's users in, each once, by clients at once from fresh
// connections of this address, and returns its table row.
func runStorm(ctx context.Context, st storm, site string, tc *tls.Config, url string, clients int) string {
	var (
		next atomic.Int64
		errs atomic.Int64
		mu   sync.Mutex
		lat  []time.Duration
		wg   sync.WaitGroup
		last atomic.Value
	)
	start := time.Now()
	for range clients {
		wg.Go(func() {
			hc := &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{TLSClientConfig: tc, MaxIdleConnsPerHost: 1}}
			defer hc.CloseIdleConnections()
			for {
				i := next.Add(1) - 1
				if i >= int64(st.users) {
					return
				}
				t0 := time.Now()
				if err := login(ctx, hc, url, fmt.Sprintf("su%d", i)); err != nil {
					errs.Add(1)
					last.Store(err.Error())
					continue
				}
				mu.Lock()
				lat = append(lat, time.Since(t0))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	if e, _ := last.Load().(string); e != "" {
		fmt.Fprintln(os.Stderr, "launch: storm: the last error:", e)
	}
	p50, p99 := "–", "–"
	if len(lat) > 0 {
		slices.Sort(lat)
		p50, p99 = lat[len(lat)/2].Round(time.Millisecond).String(), lat[len(lat)*99/100].Round(time.Millisecond).String()
	}
	return fmt.Sprintf("| %s | %d | %d | %.0f | %s | %s | %d |", site, st.users, st.cost, float64(len(lat))/took.Seconds(), p50, p99, errs.Load())
}

func measure(mode, bin string, src []byte, clients, users int, st storm, warm, window time.Duration, prof string, stats bool) (result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), warm+window+2*time.Minute)
	defer cancel()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	o := lab.Options{Logger: quiet, HeartbeatInterval: 2 * time.Second}
	res := result{site: "one process (6 nodes), 1-member etcd without fsync"}
	switch mode {
	case "inproc":
		cfg, err := configs.Load("bench site", src)
		if err != nil {
			return res, err
		}
		o.Config = cfg
	case "bolt":
		if bin == "" {
			return res, errors.New("-frontdoor is required for the bolt site")
		}
		one, err := oneNode(3*perZoneOf(src), users, st)
		if err != nil {
			return res, err
		}
		o.Processes, o.Source, o.Binary = true, one, bin
		res.site = "one node process, bolt (direct mode)"
		if prof != "" {
			o.Env = []string{"FRONTDOOR_CPUPROFILE=" + prof + "-bolt-node"}
		}
	case "etcd":
		if bin == "" {
			return res, errors.New("-frontdoor is required for the etcd site")
		}
		o.Processes, o.Source, o.Binary = true, src, bin
		res.site = "one process per node (6), 3-member etcd"
		if prof != "" {
			o.Env = []string{"FRONTDOOR_CPUPROFILE=" + prof + "-etcd-node"}
		}
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
				urls = append(urls, "https://"+li.Address.String())
			}
		}
	}
	tc := l.TLSClientConfig()
	if err := waitReady(ctx, tc, urls); err != nil {
		return res, err
	}
	if mode == "bolt" && st.users > 0 {
		res.storm = runStorm(ctx, st, res.site, tc, urls[0], clients)
	}
	var (
		measuring atomic.Bool
		errs      atomic.Int64
		mu        sync.Mutex
		lat       []time.Duration
		wg        sync.WaitGroup
	)
	// Every client signs in once as each user it will launch as, at its front door, before
	// the warm-up: a login's bcrypt is paid once per user and front door and then cached, and
	// is not what this measures.
	hcs := make([]*http.Client, clients)
	for c := range hcs {
		hcs[c] = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tc, MaxIdleConnsPerHost: 1}}
	}
	loginErrs := make([]error, clients)
	for c := 0; c < clients; c++ {
		wg.Go(func() {
			seen := map[int]bool{}
			for i := 0; !seen[(c+i*clients)%users]; i++ {
				u := (c + i*clients) % users
				seen[u] = true
				if err := login(ctx, hcs[c], urls[c%len(urls)], fmt.Sprintf("bu%d", u)); err != nil {
					loginErrs[c] = err
					return
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(loginErrs...); err != nil {
		return res, fmt.Errorf("signing the users in: %w", err)
	}
	end := time.Now().Add(warm + window)
	var profiling atomic.Pointer[profile]
	var before atomic.Pointer[map[string]float64]
	var cpu0 atomic.Pointer[[2]time.Duration]
	time.AfterFunc(warm, func() {
		measuring.Store(true)
		c := cpuTimes(l.Procs)
		cpu0.Store(&c)
		if stats {
			m := counters(tc, l)
			before.Store(&m)
		}
		if prof != "" {
			profiling.Store(startProfile(prof+"-"+mode, l.Procs))
		}
	})
	for c := 0; c < clients; c++ {
		wg.Go(func() {
			hc := hcs[c]
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
	if c0 := cpu0.Load(); c0 != nil {
		c1 := cpuTimes(l.Procs)
		res.cpuBench, res.cpuNodes = c1[0]-c0[0], c1[1]-c0[1]
	}
	if b := before.Load(); b != nil {
		printStats(*b, counters(tc, l), len(lat))
	}
	if p := profiling.Load(); p != nil {
		if err := p.stop(); err != nil {
			return res, err
		}
	}
	if len(lat) == 0 {
		return res, fmt.Errorf("no launch succeeded (%d errors)", errs.Load())
	}
	slices.Sort(lat)
	res.rate = float64(len(lat)) / window.Seconds()
	res.window = window
	res.p50, res.p99 = lat[len(lat)/2].Round(100*time.Microsecond), lat[len(lat)*99/100].Round(100*time.Microsecond)
	res.errors = errs.Load()
	res.left = left(l)
	return res, nil
}

// statsOf are the metrics printed per launch (by prefix of name and labels).
var statsOf = []string{
	"etcd_mvcc_put_total", "etcd_mvcc_delete_total", "etcd_mvcc_txn_total", "etcd_mvcc_range_total",
	"etcd_disk_wal_fsync_duration_seconds_count", "etcd_disk_wal_fsync_duration_seconds_sum",
	"etcd_disk_backend_commit_duration_seconds_count", "etcd_disk_backend_commit_duration_seconds_sum",
	"etcd_debugging_mvcc_events_total", "etcd_server_lease_grant_total",
	"etcd_network_peer_sent_bytes_total", "etcd_network_client_grpc_sent_bytes_total", "etcd_network_client_grpc_received_bytes_total",
	"grpc_server_handled_total", "node ",
}

// login signs user in at the front door url (GET /v1/sessions).
func login(ctx context.Context, hc *http.Client, url, user string) error {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+"/v1/sessions", nil)
	req.SetBasicAuth(user, "lab")
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s at %s: %s", user, url, resp.Status)
	}
	return nil
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
	var d wire.Descriptor
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
		ss, err := l.Sessions(context.Background())
		if errors.Is(err, lab.ErrNoSiteDatabase) {
			return -1
		}
		if n = len(ss); n == 0 {
			break
		}
	}
	return n
}

// perZoneOf counts the bench machines of one zone in src.
func perZoneOf(src []byte) int { return strings.Count(string(src), "name: bm-hq-") }

// oneNode is a site of one front door (launch listener 127.71.0.11:9443) with machines bench
// machines (max_sessions 50 each) in direct mode — no gateway, which would need nodes of its
// own — a resource on them, the bench users and the storm's users.
func oneNode(machines, users int, st storm) ([]byte, error) {
	hash, err := bcrypt.GenerateFromPassword([]byte("lab"), 4)
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	b.WriteString(`site: {name: bench-one, default_zone: hq, secure_gateway: false, auth: {min_password_cost: 4}}
zones: [{name: hq, primary: true, ranges: [127.0.0.0/8]}]
nodes:
  - name: fd-1
    zone: hq
    listeners: [{kind: launch, address: "127.71.0.11:9443"}]
groups: [{name: bench, kind: shared, load: {max_logons: 0}}]
resources: [{name: benchdesk, kind: desktop, groups: [{group: bench}], entitled: {everyone: true}}]
machines:
`)
	for i := 0; i < machines; i++ {
		fmt.Fprintf(&b, "  - {name: bm-%d, address: 127.71.%d.%d, zone: hq, group: bench, max_sessions: 50}\n", i, 4+i/250, 1+i%250)
	}
	b.WriteString("users:\n")
	for i := 0; i < users; i++ {
		fmt.Fprintf(&b, "  - {name: bu%d, password_hash: %q}\n", i, hash)
	}
	if st.users > 0 {
		sh, err := bcrypt.GenerateFromPassword([]byte("lab"), st.cost)
		if err != nil {
			return nil, err
		}
		for i := 0; i < st.users; i++ {
			fmt.Fprintf(&b, "  - {name: su%d, password_hash: %q}\n", i, sh)
		}
	}
	return []byte(b.String()), nil
}
