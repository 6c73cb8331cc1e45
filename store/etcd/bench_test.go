package etcd_test

// Benchmarks of the etcd-backed site database against bolt, through the broker. Results and
// the commands that produced them: bench/results/broker-etcd.md (bench/broker-etcd.sh runs
// them). They skip under -short and run only with -bench:
//
//	go test ./store/etcd -run '^$' -bench Launch -benchtime 5000x -timeout 30m -etcdbench.nofsync
//	go test ./store/etcd -run '^$' -bench Scale  -benchtime 3000x -timeout 30m -etcdbench.large
//
// (a round each: -count above 1 is refused, since a run fills its sites).
//
// BenchmarkLaunch: broker.Launch of new sessions on bolt (a temp file, fsync), on etcd with one
// broker, and on etcd with three brokers (three etcd.Stores, as three nodes would have) over
// the same 3-member cluster, launches spread over the three; 64 goroutines flat out
// (-etcdbench.workers), then 1,000 launches a second open loop (-etcdbench.rate), then filling
// the site. Site: 1,000 machines (max_sessions 16), 500 users × 100 resources, so that every
// launch is a new (user, resource) pair: a new pending session. After each part, every slot
// key is counted: a machine over max_sessions fails the benchmark.
//
// BenchmarkScale: 10,000 machines / 25,000 sessions, and with -etcdbench.large (or a -bench
// pattern naming machines=100000) 100,000 machines / 250,000 sessions, written straight into
// etcd; then a fresh etcd.Open + broker.New (the view load of a restarted node), the heap and
// RSS it adds, and launches at that size.
//
// etcd runs in a child process (this test binary, TestEtcdBenchHelper): a 3-member
// etcdembed cluster with real fsync (-etcdbench.nofsync adds variants without), so that the
// heap and RSS measured here are the node's alone; its own CPU, RSS and Prometheus counters
// (read from /metrics) are reported apart.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/frontdoor-vdi/frontdoor/broker"
	"github.com/frontdoor-vdi/frontdoor/configs"
	"github.com/frontdoor-vdi/frontdoor/store/bolt"
	"github.com/frontdoor-vdi/frontdoor/store/etcd"
	"github.com/frontdoor-vdi/frontdoor/store/etcdembed"
	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

var (
	benchWorkers = flag.Int("etcdbench.workers", 64, "concurrent launching goroutines of the etcd benchmarks")
	benchLarge   = flag.Bool("etcdbench.large", false, "BenchmarkScale: also 100,000 machines / 250,000 sessions (minutes)")
	benchNoFsync = flag.Bool("etcdbench.nofsync", false, "BenchmarkLaunch: add no-fsync variants (etcd UnsafeNoFsync, bolt NoSync), labelled nofsync")
	benchRate    = flag.Float64("etcdbench.rate", 1000, "BenchmarkLaunch load=rate: launches started a second")
	benchDial    = flag.Duration("etcdbench.dialtimeout", 0, "etcd.Options.DialTimeout of the measured stores (0: the store's default, 5s)")
)

const (
	benchPrefix   = "/frontdoor/bench/"
	helperEnv     = "FRONTDOOR_ETCDBENCH_HELPER" // the data dir of the child's cluster
	launchTimeout = 5 * time.Minute              // bounds the launches of one benchmark run
)

// ---- the etcd process ----

// TestEtcdBenchHelper is the etcd of the benchmarks: started by them as a child process, it
// runs a 3-member cluster, prints its endpoints and serves until its stdin closes. In a plain
// `go test` it skips.
func TestEtcdBenchHelper(t *testing.T) {
	dir := os.Getenv(helperEnv)
	if dir == "" {
		t.Skip("the etcd process of the benchmarks in bench_test.go; they start it")
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := etcdembed.Start(ctx, etcdembed.Options{Dir: dir, Members: 3, Logger: log,
		UnsafeNoFsync: os.Getenv(helperEnv+"_NOFSYNC") == "1", StartTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("ENDPOINTS %s\n", strings.Join(c.Endpoints(), ","))
	io.Copy(io.Discard, os.Stdin)
	if err := c.Close(); err != nil {
		t.Log(err)
	}
}

type etcdProc struct {
	cmd       *exec.Cmd
	stdin     io.WriteCloser
	endpoints []string
	once      sync.Once
}

// startEtcd starts the child etcd process with its data in dir.
func startEtcd(tb testing.TB, dir string, nofsync bool) *etcdProc {
	tb.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestEtcdBenchHelper$", "-test.bench=^$", "-test.timeout=0")
	cmd.Env = append(os.Environ(), helperEnv+"="+filepath.Join(dir, "etcd"))
	if nofsync {
		cmd.Env = append(cmd.Env, helperEnv+"_NOFSYNC=1")
	}
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	p := &etcdProc{cmd: cmd, stdin: stdin} // the caller stops it, after closing its stores
	got := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if eps, ok := strings.CutPrefix(sc.Text(), "ENDPOINTS "); ok {
				got <- eps
				break
			}
		}
		io.Copy(io.Discard, stdout)
	}()
	select {
	case eps := <-got:
		p.endpoints = strings.Split(eps, ",")
	case <-time.After(90 * time.Second):
		p.stop()
		tb.Fatal("the etcd process did not start within 90s")
	}
	return p
}

// stop closes the child's stdin (it closes its cluster and exits) and kills it if it has not
// exited within 30s.
func (p *etcdProc) stop() {
	p.once.Do(func() {
		p.stdin.Close()
		done := make(chan struct{})
		go func() { p.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			p.cmd.Process.Kill()
			<-done
		}
	})
}

func (p *etcdProc) client(tb testing.TB) *clientv3.Client {
	tb.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: p.endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		tb.Fatal(err)
	}
	return cli
}

// etcdCounters are counters of the etcd process: the members' metrics are process-wide, so
// one member's /metrics sums the three.
type etcdCounters struct {
	txn, put, rng, grant float64 // gRPC calls handled (any code)
	fsyncs, fsyncSec     float64 // WAL fsyncs and their time, all members
	commits, commitSec   float64 // backend (bbolt) commits and their time, all members
	cpuSec               float64 // the etcd process's CPU time
	rssBytes             float64
}

func (p *etcdProc) counters(tb testing.TB) etcdCounters {
	tb.Helper()
	var c etcdCounters
	resp, err := http.Get(p.endpoints[0] + "/metrics")
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		sp := strings.LastIndexByte(line, ' ')
		if sp < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[sp+1:], 64)
		if err != nil {
			continue
		}
		name := line[:sp]
		switch {
		case strings.HasPrefix(name, "grpc_server_handled_total{"):
			switch {
			case strings.Contains(name, `grpc_method="Txn"`):
				c.txn += v
			case strings.Contains(name, `grpc_method="Put"`):
				c.put += v
			case strings.Contains(name, `grpc_method="Range"`):
				c.rng += v
			case strings.Contains(name, `grpc_method="LeaseGrant"`):
				c.grant += v
			}
		case name == "etcd_disk_wal_fsync_duration_seconds_count":
			c.fsyncs = v
		case name == "etcd_disk_wal_fsync_duration_seconds_sum":
			c.fsyncSec = v
		case name == "etcd_disk_backend_commit_duration_seconds_count":
			c.commits = v
		case name == "etcd_disk_backend_commit_duration_seconds_sum":
			c.commitSec = v
		}
	}
	c.cpuSec = procCPU(p.cmd.Process.Pid)
	c.rssBytes = procStatus(p.cmd.Process.Pid, "VmRSS")
	return c
}

// procCPU returns the user + system CPU seconds of process pid (0: this process).
func procCPU(pid int) float64 {
	path := "/proc/self/stat"
	if pid != 0 {
		path = fmt.Sprintf("/proc/%d/stat", pid)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:]) // f[0] is field 3, state
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100 // USER_HZ
}

// procStatus returns a kB field of /proc/pid/status (0: this process) in bytes.
func procStatus(pid int, field string) float64 {
	path := "/proc/self/status"
	if pid != 0 {
		path = fmt.Sprintf("/proc/%d/status", pid)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return n * 1024
		}
	}
	return 0
}

// oneCount fails a benchmark run with -count above 1: -count repeats each leaf benchmark on
// the fixture of its parent, which a launch run fills; rounds are separate go test runs
// (bench/broker-etcd.sh ROUNDS).
func oneCount(b *testing.B) {
	if f := flag.Lookup("test.count"); f != nil && f.Value.String() != "1" {
		b.Fatal("run rounds as separate go test runs (bench/broker-etcd.sh ROUNDS=n), not -count: the sites are built once per run")
	}
}

// ---- the site ----

type siteShape struct {
	machines, maxSessions, users, launchResources, deskResources int
}

func siteConfig(tb testing.TB, sh siteShape) *configs.Config {
	tb.Helper()
	zero := 0
	off := []string{}
	cfg := &configs.Config{}
	for z := 1; z <= 3; z++ {
		cfg.Zones = append(cfg.Zones, configs.Zone{Name: fmt.Sprintf("z%d", z), Primary: z == 1})
	}
	cfg.Groups = []configs.Group{{Name: "g", ZonePreferences: &off, Load: configs.LoadPolicy{MaxLogons: &zero}}}
	res := func(name string) configs.Resource {
		return configs.Resource{Name: name, Groups: []configs.ResourceGroup{{Group: "g"}}, Entitled: configs.Entitlement{Everyone: true}}
	}
	for r := 0; r < sh.launchResources; r++ {
		cfg.Resources = append(cfg.Resources, res(fmt.Sprintf("r%03d", r)))
	}
	for r := 0; r < sh.deskResources; r++ {
		cfg.Resources = append(cfg.Resources, res(fmt.Sprintf("desk%d", r)))
	}
	for i := 0; i < sh.machines; i++ {
		cfg.Machines = append(cfg.Machines, configs.Machine{Name: machineName(i), Address: netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}),
			Zone: fmt.Sprintf("z%d", i%3+1), Group: "g", MaxSessions: sh.maxSessions})
	}
	for u := 0; u < sh.users; u++ {
		cfg.Users = append(cfg.Users, configs.User{Name: userName(u)})
	}
	cfg.SetDefaults()
	// Every benchmark session stays pending (nobody connects): keep them past the run.
	cfg.Site.Sessions.PendingTimeout = configs.Duration(30 * time.Minute)
	if err := cfg.Validate(); err != nil {
		tb.Fatal(err)
	}
	return cfg
}

func machineName(i int) string { return fmt.Sprintf("m%06d", i) }
func userName(u int) string    { return fmt.Sprintf("u%06d", u) }

// timedStore is a broker.Store (and, with an etcd.Store inside, a broker.Shared) that times
// CreateSession: the store's part of a launch.
type timedStore struct {
	*etcd.Store
	reg *prometheus.Registry // the store's own metrics (Options.Registry)
	mu  sync.Mutex
	lat []time.Duration
}

// creates returns the store's CreateSession transactions so far by result (ok, conflict,
// full, exists, error), from its frontdoor_store_txn_duration_seconds histogram.
func (t *timedStore) creates() map[string]float64 {
	out := map[string]float64{}
	mfs, err := t.reg.Gather()
	if err != nil {
		return out
	}
	for _, mf := range mfs {
		if mf.GetName() != "frontdoor_store_txn_duration_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			var op, result string
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "op":
					op = l.GetValue()
				case "result":
					result = l.GetValue()
				}
			}
			if op == "create" {
				out[result] += float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return out
}

func (t *timedStore) CreateSession(ctx context.Context, s broker.Session, max int) error {
	t0 := time.Now()
	err := t.Store.CreateSession(ctx, s, max)
	d := time.Since(t0)
	t.mu.Lock()
	t.lat = append(t.lat, d)
	t.mu.Unlock()
	return err
}

type timedBolt struct {
	*bolt.Store
	mu  sync.Mutex
	lat []time.Duration
}

func (t *timedBolt) CreateSession(ctx context.Context, s broker.Session, max int) error {
	t0 := time.Now()
	err := t.Store.CreateSession(ctx, s, max)
	d := time.Since(t0)
	t.mu.Lock()
	t.lat = append(t.lat, d)
	t.mu.Unlock()
	return err
}

type createTimer interface{ takeLat() []time.Duration }

func (t *timedStore) takeLat() []time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	l := t.lat
	t.lat = nil
	return l
}

func (t *timedBolt) takeLat() []time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	l := t.lat
	t.lat = nil
	return l
}

// openStore opens a measured store: an etcd.Store with its own metrics registry, timing its
// CreateSession calls.
func openStore(ctx context.Context, tb testing.TB, eps []string, node string, dial time.Duration) *timedStore {
	tb.Helper()
	reg := prometheus.NewRegistry()
	st, err := tryOpen(ctx, eps, node, dial, reg)
	if err != nil {
		tb.Fatal(err)
	}
	return &timedStore{Store: st, reg: reg}
}

func tryOpen(ctx context.Context, eps []string, node string, dial time.Duration, reg prometheus.Registerer) (*etcd.Store, error) {
	return etcd.Open(ctx, etcd.Options{Endpoints: eps, Prefix: benchPrefix, Node: node, DialTimeout: dial, Registry: reg,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
}

// launcher runs launches of new (user, resource) pairs over brokers.
type launcher struct {
	brokers []*broker.Broker
	timers  []createTimer
	users   int
	res     int
	next    atomic.Int64 // the next (user, resource) pair
	created atomic.Int64 // new sessions made
}

func (l *launcher) request(k int64) broker.LaunchRequest {
	u, r := int(k%int64(l.users)), int(k/int64(l.users))
	if r >= l.res {
		panic("the benchmark ran out of (user, resource) pairs")
	}
	return broker.LaunchRequest{User: userName(u), Resource: fmt.Sprintf("r%03d", r), Endpoint: "ep"}
}

// run makes n launches from workers goroutines, goroutine w on broker w % len(brokers), and
// returns each launch's latency and the wall time of all.
func (l *launcher) run(tb testing.TB, n, workers int) ([]time.Duration, time.Duration) {
	lat := make([]time.Duration, n)
	var idx atomic.Int64
	ctx, cancel := context.WithTimeout(context.Background(), launchTimeout)
	defer cancel()
	var first atomic.Pointer[error]
	fail := func(err error) {
		first.CompareAndSwap(nil, &err)
		cancel()
	}
	var wg sync.WaitGroup
	t0 := time.Now()
	for w := 0; w < workers; w++ {
		br := l.brokers[w%len(l.brokers)]
		wg.Go(func() {
			for {
				i := idx.Add(1) - 1
				if i >= int64(n) || ctx.Err() != nil {
					return
				}
				req := l.request(l.next.Add(1) - 1)
				t := time.Now()
				d, err := br.Launch(ctx, req)
				lat[i] = time.Since(t)
				switch {
				case err != nil:
					fail(fmt.Errorf("launch %d (%s %s): %w", i, req.User, req.Resource, err))
					return
				case d.Outcome != broker.OutcomeNew:
					fail(fmt.Errorf("launch %d (%s %s): outcome %s (%s), want a new session", i, req.User, req.Resource, d.Outcome, d.Reason))
					return
				}
				l.created.Add(1)
			}
		})
	}
	wg.Wait()
	wall := time.Since(t0)
	if e := first.Load(); e != nil {
		tb.Fatal(*e)
	}
	if ctx.Err() != nil {
		tb.Fatalf("launches did not finish within %s (%d of %d done)", launchTimeout, l.created.Load(), n)
	}
	return lat, wall
}

// runRate starts n launches at rate a second, each in its own goroutine (at most 4096 in
// flight), goroutine i on broker i % len(brokers), and returns each launch's latency from its
// scheduled start and the wall time of all.
func (l *launcher) runRate(tb testing.TB, n int, rate float64) ([]time.Duration, time.Duration) {
	lat := make([]time.Duration, n)
	ctx, cancel := context.WithTimeout(context.Background(), launchTimeout)
	defer cancel()
	var first atomic.Pointer[error]
	sem := make(chan struct{}, 4096)
	var wg sync.WaitGroup
	t0 := time.Now()
	for i := 0; i < n && ctx.Err() == nil; i++ {
		at := t0.Add(time.Duration(float64(i) / rate * float64(time.Second)))
		if d := time.Until(at); d > 0 {
			time.Sleep(d)
		}
		sem <- struct{}{}
		br := l.brokers[i%len(l.brokers)]
		wg.Go(func() {
			defer func() { <-sem }()
			req := l.request(l.next.Add(1) - 1)
			d, err := br.Launch(ctx, req)
			lat[i] = time.Since(at)
			if err == nil && d.Outcome != broker.OutcomeNew {
				err = fmt.Errorf("outcome %s (%s), want a new session", d.Outcome, d.Reason)
			}
			if err != nil {
				err = fmt.Errorf("launch %d (%s %s): %w", i, req.User, req.Resource, err)
				first.CompareAndSwap(nil, &err)
				cancel()
				return
			}
			l.created.Add(1)
		})
	}
	wg.Wait()
	wall := time.Since(t0)
	if e := first.Load(); e != nil {
		tb.Fatal(*e)
	}
	if ctx.Err() != nil {
		tb.Fatalf("launches did not finish within %s", launchTimeout)
	}
	return lat, wall
}

// creates sums the CreateSession results of the launcher's etcd stores.
func (l *launcher) creates() map[string]float64 {
	out := map[string]float64{}
	for _, t := range l.timers {
		if ts, ok := t.(*timedStore); ok {
			for k, v := range ts.creates() {
				out[k] += v
			}
		}
	}
	return out
}

// reportCreates reports the stores' CreateSession transactions that failed their compare (a
// slot taken meanwhile) or found the machine full, per launch.
func reportCreates(b *testing.B, before, after map[string]float64, n int) {
	b.ReportMetric((after["conflict"]-before["conflict"])/float64(n), "conflicts/launch")
	b.ReportMetric((after["full"]-before["full"])/float64(n), "refused-full/launch")
}

func (l *launcher) createLat() []time.Duration {
	var all []time.Duration
	for _, t := range l.timers {
		all = append(all, t.takeLat()...)
	}
	return all
}

func pct(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(int(float64(len(sorted))*p), len(sorted)-1)]
}

func ms(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }

func reportLaunches(b *testing.B, lat, create []time.Duration, wall time.Duration) {
	slices.Sort(lat)
	slices.Sort(create)
	b.ReportMetric(float64(len(lat))/wall.Seconds(), "launches/s")
	b.ReportMetric(ms(pct(lat, 0.50)), "p50-ms")
	b.ReportMetric(ms(pct(lat, 0.99)), "p99-ms")
	b.ReportMetric(ms(lat[len(lat)-1]), "max-ms")
	b.ReportMetric(ms(pct(create, 0.50)), "store-p50-ms")
	b.ReportMetric(ms(pct(create, 0.99)), "store-p99-ms")
}

// reportEtcd reports what the launches cost etcd, per launch.
func reportEtcd(b *testing.B, before, after etcdCounters, n int) {
	per := func(x float64) float64 { return x / float64(n) }
	b.ReportMetric(per(after.txn-before.txn), "txn/launch")
	b.ReportMetric(per(after.grant-before.grant), "grants/launch")
	b.ReportMetric(per(after.rng-before.rng), "ranges/launch")
	b.ReportMetric(per(after.fsyncs-before.fsyncs), "walfsyncs/launch")
	if f := after.fsyncs - before.fsyncs; f > 0 {
		b.ReportMetric((after.fsyncSec-before.fsyncSec)/f*1e3, "walfsync-ms")
	}
	b.ReportMetric(per(after.cpuSec-before.cpuSec)*1e6, "etcd-cpu-us/launch")
}

// ---- the double-booking check ----

// scan calls fn for every key under prefix, a page at a time, at revision rev (0: the
// current one), and returns the revision read.
func scan(ctx context.Context, cli *clientv3.Client, prefix string, rev int64, keysOnly bool, fn func(k, v []byte)) (int64, error) {
	key, end := prefix, clientv3.GetPrefixRangeEnd(prefix)
	for {
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(10000)}
		if keysOnly {
			opts = append(opts, clientv3.WithKeysOnly())
		}
		if rev != 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		r, err := cli.Get(ctx, key, opts...)
		if err != nil {
			return rev, err
		}
		if rev == 0 {
			rev = r.Header.Revision
		}
		for _, x := range r.Kvs {
			fn(x.Key, x.Value)
		}
		if !r.More || len(r.Kvs) == 0 {
			return rev, nil
		}
		key = string(r.Kvs[len(r.Kvs)-1].Key) + "\x00"
	}
}

// checkSlots fails tb unless etcd holds exactly want sessions, each in one slot, every slot
// naming a session, no machine holding more than maxSessions slots. It returns the most slots
// one machine holds.
func checkSlots(tb testing.TB, cli *clientv3.Client, maxSessions int, want int64) int {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	perMachine := map[string]int{}
	holder := map[string]string{}
	var bad []string
	sp := benchPrefix + "slots/"
	rev, err := scan(ctx, cli, sp, 0, false, func(k, v []byte) {
		m, i, _ := strings.Cut(strings.TrimPrefix(string(k), sp), "/")
		perMachine[m]++
		if n, err := strconv.Atoi(i); err != nil || n < 0 || n >= maxSessions {
			bad = append(bad, fmt.Sprintf("slot key %s out of 0..%d", k, maxSessions-1))
		}
		if prev, dup := holder[string(v)]; dup {
			bad = append(bad, fmt.Sprintf("session %s holds %s and %s", v, prev, k))
		}
		holder[string(v)] = string(k)
	})
	if err != nil {
		tb.Fatal(err)
	}
	sessions, orphans := int64(0), 0
	ssp := benchPrefix + "sessions/"
	if _, err := scan(ctx, cli, ssp, rev, true, func(k, _ []byte) {
		sessions++
		id, _ := url.PathUnescape(strings.TrimPrefix(string(k), ssp))
		if _, ok := holder[id]; !ok {
			orphans++
		}
	}); err != nil {
		tb.Fatal(err)
	}
	most := 0
	for m, n := range perMachine {
		most = max(most, n)
		if n > maxSessions {
			bad = append(bad, fmt.Sprintf("DOUBLE-BOOKED: %s holds %d slots, max_sessions is %d", m, n, maxSessions))
		}
	}
	if orphans > 0 || int64(len(holder)) != sessions {
		bad = append(bad, fmt.Sprintf("%d sessions, %d slots, %d sessions without a slot", sessions, len(holder), orphans))
	}
	if sessions != want {
		bad = append(bad, fmt.Sprintf("%d sessions in etcd, want %d", sessions, want))
	}
	if len(bad) > 0 {
		if len(bad) > 10 {
			bad = append(bad[:10], fmt.Sprintf("and %d more", len(bad)-10))
		}
		tb.Fatal(strings.Join(bad, "\n"))
	}
	return most
}

// checkBolt is checkSlots for the bolt store: sessions per machine from Load, and the stored
// per-machine counts.
func checkBolt(tb testing.TB, st *bolt.Store, maxSessions int, want int64) int {
	tb.Helper()
	snap, err := st.Load(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	perMachine := map[string]int{}
	for _, s := range snap.Sessions {
		perMachine[s.Machine]++
	}
	most := 0
	for m, n := range perMachine {
		most = max(most, n)
		if n > maxSessions || st.Count(m) != n {
			tb.Fatalf("DOUBLE-BOOKED: %s holds %d sessions (count %d), max_sessions is %d", m, n, st.Count(m), maxSessions)
		}
	}
	if int64(len(snap.Sessions)) != want {
		tb.Fatalf("%d sessions in bolt, want %d", len(snap.Sessions), want)
	}
	return most
}

// ---- BenchmarkLaunch ----

var launchShape = siteShape{machines: 1000, maxSessions: 16, users: 500, launchResources: 100}

type launchSite struct {
	l     *launcher
	etcd  *etcdProc
	cli   *clientv3.Client
	bolt  *bolt.Store
	close func()
	txn1  time.Duration // one txn at a time, idle cluster: the round-trip floor

	filled                              bool
	fillDenied, fillRetries, fillErrors int64
}

func newLaunchSite(owner, tb testing.TB, kind string, brokers int, nofsync bool) *launchSite {
	tb.Helper()
	cfg := siteConfig(tb, launchShape)
	ls := &launchSite{l: &launcher{users: launchShape.users, res: launchShape.launchResources}}
	dir := owner.TempDir() // before Cleanup(ls.close): removed after the stores are closed
	var closers []func()
	ls.close = func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
		closers = nil
	}
	owner.Cleanup(ls.close)
	ctx := context.Background()
	switch kind {
	case "bolt":
		st, err := bolt.Open(filepath.Join(dir, "bench.db"), bolt.Options{NoSync: nofsync})
		if err != nil {
			tb.Fatal(err)
		}
		closers = append(closers, func() { st.Close() })
		ls.bolt = st
		ts := &timedBolt{Store: st}
		br, err := broker.New(ctx, cfg, ts, time.Now)
		if err != nil {
			tb.Fatal(err)
		}
		ls.l.brokers, ls.l.timers = []*broker.Broker{br}, []createTimer{ts}
	case "etcd":
		p := startEtcd(tb, dir, nofsync)
		ls.etcd = p
		closers = append(closers, p.stop)
		ls.cli = p.client(tb)
		closers = append(closers, func() { ls.cli.Close() })
		for i := 0; i < brokers; i++ {
			ts := openStore(ctx, tb, p.endpoints, fmt.Sprintf("node%d", i), *benchDial)
			closers = append(closers, func() { ts.Close() })
			br, err := broker.New(ctx, cfg, ts, time.Now)
			if err != nil {
				tb.Fatal(err)
			}
			ls.l.brokers, ls.l.timers = append(ls.l.brokers, br), append(ls.l.timers, ts)
		}
		ls.txn1 = txnFloor(tb, ls.cli)
	}
	return ls
}

// txnFloor is the median of 200 sequential two-put transactions on an idle cluster, outside
// the site's prefix: one write round trip (raft, WAL fsync on a quorum).
func txnFloor(tb testing.TB, cli *clientv3.Client) time.Duration {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	lat := make([]time.Duration, 200)
	for i := range lat {
		t0 := time.Now()
		_, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.Version("/probe/x"), "=", 0)).
			Then(clientv3.OpPut("/probe/a", strconv.Itoa(i)), clientv3.OpPut("/probe/b", strconv.Itoa(i))).Commit()
		if err != nil {
			tb.Fatal(err)
		}
		lat[i] = time.Since(t0)
	}
	slices.Sort(lat)
	return lat[len(lat)/2]
}

// BenchmarkLaunch: site-wide launch throughput and latency through the broker on bolt, on
// etcd with one broker and on etcd with three brokers, in one run. Each store runs, on one
// site:
//
//	load=workers  b.N launches from -etcdbench.workers goroutines as fast as they go (closed loop)
//	load=rate     b.N launches started at -etcdbench.rate a second whatever the answers take
//	              (open loop; latency from each launch's scheduled start)
//	load=fill     launches until the site is full (16,000 slots), then one at a time until
//	              every broker is denied: exactly 16,000 sessions, none over max_sessions
//
// With -benchtime Nx each of the first two is N launches after one warm-up launch.
func BenchmarkLaunch(b *testing.B) {
	if testing.Short() {
		b.Skip("-short")
	}
	oneCount(b)
	type tc struct {
		name    string
		kind    string
		brokers int
		nofsync bool
	}
	cases := []tc{
		{"store=bolt", "bolt", 1, false},
		{"store=etcd/brokers=1", "etcd", 1, false},
		{"store=etcd/brokers=3", "etcd", 3, false},
	}
	if *benchNoFsync {
		cases = append(cases, tc{"store=bolt-nosync", "bolt", 1, true},
			tc{"store=etcd-nofsync/brokers=1", "etcd", 1, true}, tc{"store=etcd-nofsync/brokers=3", "etcd", 3, true})
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			// This function runs once (it has sub-benchmarks): its cleanups, the
			// fixture's, run after all of them.
			ls := newLaunchSite(b, b, c.kind, c.brokers, c.nofsync)
			measure := func(b *testing.B, run func() ([]time.Duration, time.Duration)) {
				_ = ls.l.createLat()
				var before etcdCounters
				if ls.etcd != nil {
					before = ls.etcd.counters(b)
				}
				created0 := ls.l.creates()
				cpu0 := procCPU(0)
				b.ResetTimer()
				lat, wall := run()
				b.StopTimer()
				cpu := procCPU(0) - cpu0
				reportLaunches(b, lat, ls.l.createLat(), wall)
				b.ReportMetric(cpu/float64(b.N)*1e6, "node-cpu-us/launch")
				if ls.etcd != nil {
					reportEtcd(b, before, ls.etcd.counters(b), b.N)
					reportCreates(b, created0, ls.l.creates(), b.N)
					b.ReportMetric(ms(ls.txn1), "txn1-ms")
				}
				b.ReportMetric(float64(ls.check(b, ls.l.created.Load())), "max-slots")
			}
			b.Run("load=workers", func(b *testing.B) {
				measure(b, func() ([]time.Duration, time.Duration) { return ls.l.run(b, b.N, *benchWorkers) })
			})
			b.Run("load=rate", func(b *testing.B) {
				measure(b, func() ([]time.Duration, time.Duration) { return ls.l.runRate(b, b.N, *benchRate) })
			})
			b.Run("load=fill", func(b *testing.B) {
				if !ls.filled {
					ls.fill(b)
				}
				b.ReportMetric(float64(ls.l.created.Load()), "sessions")
				b.ReportMetric(float64(launchShape.machines*launchShape.maxSessions), "capacity")
				b.ReportMetric(float64(ls.fillDenied), "denied")
				b.ReportMetric(float64(ls.fillRetries), "store-refusals")
				b.ReportMetric(float64(ls.fillErrors), "full-errors")
				b.ReportMetric(float64(ls.check(b, ls.l.created.Load())), "max-slots")
			})
		})
	}
}

// check runs the double-booking check of the site's store and returns the most sessions one
// machine holds.
func (ls *launchSite) check(tb testing.TB, want int64) int {
	if ls.etcd != nil {
		return checkSlots(tb, ls.cli, launchShape.maxSessions, want)
	}
	return checkBolt(tb, ls.bolt, launchShape.maxSessions, want)
}

// fill launches from every worker until each is denied, waits until every broker's view holds
// every session, then launches one at a time on each broker until it is denied; the site
// must then hold exactly its capacity.
func (ls *launchSite) fill(tb testing.TB) {
	tb.Helper()
	ls.filled = true
	ctx, cancel := context.WithTimeout(context.Background(), launchTimeout)
	defer cancel()
	var denied, retries, fullErrors atomic.Int64
	launch := func(br *broker.Broker) (bool, error) {
		req := ls.l.request(ls.l.next.Add(1) - 1)
		d, err := br.Launch(ctx, req)
		if errors.Is(err, broker.ErrMachineFull) {
			// The broker gave up after the store refused 5 machines its view had room
			// on (the views of the other nodes' latest sessions lag): an error, not a
			// denial. Counted; the worker goes on.
			fullErrors.Add(1)
			return true, nil
		}
		if err != nil {
			return false, err
		}
		for _, line := range d.Trace {
			if strings.HasPrefix(line, "retry: the store refused") {
				retries.Add(1)
			}
		}
		switch d.Outcome {
		case broker.OutcomeNew:
			ls.l.created.Add(1)
			return true, nil
		case broker.OutcomeDenied:
			denied.Add(1)
			return false, nil
		}
		return false, fmt.Errorf("outcome %s", d.Outcome)
	}
	var first atomic.Pointer[error]
	var wg sync.WaitGroup
	for w := 0; w < *benchWorkers; w++ {
		br := ls.l.brokers[w%len(ls.l.brokers)]
		wg.Go(func() {
			for ctx.Err() == nil {
				ok, err := launch(br)
				if err != nil {
					first.CompareAndSwap(nil, &err)
					return
				}
				if !ok {
					return
				}
			}
		})
	}
	wg.Wait()
	if e := first.Load(); e != nil {
		tb.Fatal(*e)
	}
	want := ls.l.created.Load()
	deadline := time.Now().Add(30 * time.Second)
	for _, br := range ls.l.brokers {
		for int64(len(br.Sessions())) != want {
			if time.Now().After(deadline) {
				tb.Fatalf("a broker's view holds %d sessions after 30s, etcd %d", len(br.Sessions()), want)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	for _, br := range ls.l.brokers {
		for i := 0; ; i++ {
			ok, err := launch(br)
			if err != nil {
				tb.Fatal(err)
			}
			if !ok {
				break
			}
			if i > launchShape.machines*launchShape.maxSessions {
				tb.Fatal("the site never fills")
			}
		}
	}
	ls.fillDenied, ls.fillRetries, ls.fillErrors = denied.Load(), retries.Load(), fullErrors.Load()
	if n, capacity := ls.l.created.Load(), int64(launchShape.machines*launchShape.maxSessions); n != capacity {
		tb.Fatalf("the full site holds %d sessions, capacity is %d", n, capacity)
	}
}

// ---- BenchmarkScale ----

type scaleResult struct {
	openS, newS, restartMed   float64
	viewHeap, totalHeap, rss  float64
	peakHeap                  float64
	p50, p99                  time.Duration
	launchesPerS              float64
	sessions, machines, loadS float64
	etcdRSS                   float64
	defaultOK                 bool // an Open with the default DialTimeout succeeded
	defaultOpenS              float64
	defaultErr                string
	readS                     float64         // the bare paged read of the prefix that Open does
	pages                     []time.Duration // its pages, in order
	streamS                   float64         // the same read as one GetStream (etcd 3.7 RangeStream)
}

// readStreamed reads the whole prefix with one GetStream (a server-streamed range at one
// revision, which counts no remaining keys per chunk) and checks it saw want keys.
func readStreamed(tb testing.TB, cli *clientv3.Client, want int) float64 {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	t0 := time.Now()
	ch, err := cli.GetStream(ctx, benchPrefix, clientv3.WithPrefix())
	if err != nil {
		tb.Fatal(err)
	}
	n := 0
	for r := range ch {
		if err := r.Err(); err != nil {
			tb.Fatal(err)
		}
		if r.RangeResponse != nil {
			n += len(r.Kvs)
		}
	}
	if n != want {
		tb.Fatalf("GetStream read %d keys, want %d", n, want)
	}
	return time.Since(t0).Seconds()
}

// readLikeLoadAll reads the whole prefix the way etcd.Store's loadAll does (pages of 5000 at
// the first page's revision), decoding nothing, and returns the time of all and of each page.
func readLikeLoadAll(tb testing.TB, cli *clientv3.Client) (float64, []time.Duration) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	key, end := benchPrefix, clientv3.GetPrefixRangeEnd(benchPrefix)
	var rev int64
	var pages []time.Duration
	t0 := time.Now()
	for {
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(5000)}
		if rev != 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		tp := time.Now()
		r, err := cli.Get(ctx, key, opts...)
		if err != nil {
			tb.Fatal(err)
		}
		pages = append(pages, time.Since(tp))
		if rev == 0 {
			rev = r.Header.Revision
		}
		if !r.More || len(r.Kvs) == 0 {
			break
		}
		key = string(r.Kvs[len(r.Kvs)-1].Key) + "\x00"
	}
	return time.Since(t0).Seconds(), pages
}

// measuredDial is the DialTimeout of the measured restarts of BenchmarkScale: the flag's, or
// long enough for any size (Open reads the whole site within DialTimeout).
func measuredDial() time.Duration {
	if *benchDial != 0 {
		return *benchDial
	}
	return 5 * time.Minute
}

var scaleDone = map[int]scaleResult{}

type scaleSite struct {
	res   scaleResult
	opens []float64 // open + new, each repetition
	l     *launcher
	etcd  *etcdProc
	cli   *clientv3.Client
	close func()
	shape siteShape
}

// benchRecord is etcd.go's record: the value of P sessions/<id>.
type benchRecord struct {
	Session broker.Session `json:"session"`
	Slot    int            `json:"slot"`
}

// loadSite writes sessions connected sessions and their slots into etcd, session i on machine
// i % machines in slot i / machines, 64 sessions (128 ops) a transaction, 8 transactions at
// once.
func loadSite(tb testing.TB, cli *clientv3.Client, sh siteShape, sessions int) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	created := time.Now().Add(-time.Hour).UTC().Truncate(time.Second)
	const per = 64
	var next atomic.Int64
	var first atomic.Pointer[error]
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Go(func() {
			for ctx.Err() == nil && first.Load() == nil {
				from := int(next.Add(per) - per)
				if from >= sessions {
					return
				}
				var ops []clientv3.Op
				for i := from; i < min(from+per, sessions); i++ {
					m := i % sh.machines
					u := i % sh.users
					s := broker.Session{ID: fmt.Sprintf("old%07d", i), User: userName(u), Resource: fmt.Sprintf("desk%d", (i/sh.users)%sh.deskResources),
						Group: "g", Machine: machineName(m), Zone: fmt.Sprintf("z%d", m%3+1), State: broker.StateConnected,
						Endpoint: "ep", Mode: "gateway", Created: created, Changed: created, Rev: 1}
					v, err := json.Marshal(benchRecord{Session: s, Slot: i / sh.machines})
					if err != nil {
						panic(err)
					}
					ops = append(ops,
						clientv3.OpPut(benchPrefix+"sessions/"+url.PathEscape(s.ID), string(v)),
						clientv3.OpPut(benchPrefix+"slots/"+url.PathEscape(s.Machine)+"/"+strconv.Itoa(i/sh.machines), s.ID))
				}
				if _, err := cli.Txn(ctx).Then(ops...).Commit(); err != nil {
					first.CompareAndSwap(nil, &err)
					return
				}
			}
		})
	}
	wg.Wait()
	if e := first.Load(); e != nil {
		tb.Fatal(*e)
	}
	if ctx.Err() != nil {
		tb.Fatal("loading the site took over 20 minutes")
	}
}

var heapObjects = []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}

func heapNow() float64 {
	metrics.Read(heapObjects)
	return float64(heapObjects[0].Value.Uint64())
}

// liveHeap is the heap in use after a full collection.
func liveHeap() float64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return float64(m.HeapAlloc)
}

// openMeasured opens a store and a broker over it, and measures the time of each and (first)
// the heap and RSS they add.
func (ss *scaleSite) openMeasured(tb testing.TB, cfg *configs.Config, rep int, measureMem bool) (*etcd.Store, *broker.Broker, *timedStore) {
	tb.Helper()
	var heap0, rss0 float64
	if measureMem {
		debug.FreeOSMemory()
		heap0, rss0 = liveHeap(), procStatus(0, "VmRSS")
	}
	peak := heap0
	stop := make(chan struct{})
	var sampled sync.WaitGroup
	sampled.Go(func() {
		t := time.NewTicker(2 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				peak = max(peak, heapNow())
			}
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	t0 := time.Now()
	ts := openStore(ctx, tb, ss.etcd.endpoints, fmt.Sprintf("restart%d", rep), measuredDial())
	st := ts.Store
	openS := time.Since(t0).Seconds()
	var viewHeap float64
	if measureMem {
		viewHeap = liveHeap() - heap0 // not timed: between Open and New
	}
	t1 := time.Now()
	br, err := broker.New(ctx, cfg, ts, time.Now)
	if err != nil {
		tb.Fatal(err)
	}
	newS := time.Since(t1).Seconds()
	close(stop)
	sampled.Wait()
	if got := len(br.Sessions()); got != int(ss.res.sessions) {
		tb.Fatalf("the broker loaded %d sessions, want %.0f", got, ss.res.sessions)
	}
	ss.opens = append(ss.opens, openS+newS)
	if measureMem {
		ss.res.openS, ss.res.newS = openS, newS
		ss.res.viewHeap = viewHeap
		ss.res.totalHeap = liveHeap() - heap0
		ss.res.rss = procStatus(0, "VmRSS") - rss0
		ss.res.peakHeap = peak - heap0
	}
	return st, br, ts
}

func newScaleSite(owner, tb testing.TB, machines int) *scaleSite {
	tb.Helper()
	sh := siteShape{machines: machines, maxSessions: 8, users: machines / 2, launchResources: 100, deskResources: 5}
	sessions := machines * 5 / 2
	ss := &scaleSite{shape: sh, res: scaleResult{sessions: float64(sessions), machines: float64(machines)}}
	dir := owner.TempDir() // before Cleanup(ss.close): removed after etcd has stopped
	var closers []func()
	ss.close = func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
		closers = nil
	}
	owner.Cleanup(ss.close)
	cfg := siteConfig(tb, sh)
	ss.etcd = startEtcd(tb, dir, false)
	closers = append(closers, ss.etcd.stop)
	ss.cli = ss.etcd.client(tb)
	closers = append(closers, func() { ss.cli.Close() })
	t0 := time.Now()
	loadSite(tb, ss.cli, sh, sessions)
	ss.res.loadS = time.Since(t0).Seconds()
	tb.Logf("loaded %d machines / %d sessions into etcd in %.1fs", machines, sessions, ss.res.loadS)
	ss.res.readS, ss.res.pages = readLikeLoadAll(tb, ss.cli)
	ss.res.streamS = readStreamed(tb, ss.cli, 2*sessions)
	// Three restarts: the first measures memory too; the last stays open for the launches.
	var st *etcd.Store
	var br *broker.Broker
	var ts *timedStore
	for rep := 0; rep < 3; rep++ {
		if st != nil {
			st.Close()
		}
		st, br, ts = ss.openMeasured(tb, cfg, rep, rep == 0)
	}
	closers = append(closers, func() { st.Close() })
	// And one open as a node opens it, with the store's default DialTimeout (or the flag's).
	t1 := time.Now()
	probe, err := tryOpen(context.Background(), ss.etcd.endpoints, "default-dial", *benchDial, nil)
	ss.res.defaultOpenS = time.Since(t1).Seconds()
	if err == nil {
		probe.Close()
		ss.res.defaultOK = true
	} else {
		ss.res.defaultErr = err.Error()
	}
	ss.res.etcdRSS = procStatus(ss.etcd.cmd.Process.Pid, "VmRSS")
	ss.l = &launcher{brokers: []*broker.Broker{br}, timers: []createTimer{ts}, users: sh.users, res: sh.launchResources}
	return ss
}

func largeAsked() bool {
	if *benchLarge {
		return true
	}
	f := flag.Lookup("test.bench")
	return f != nil && strings.Contains(f.Value.String(), "100000")
}

// BenchmarkScale: the view load of a restarted node and launches at 10,000 machines / 25,000
// sessions and (-etcdbench.large) 100,000 machines / 250,000 sessions. b.N is the number of
// launches at that size; the site is loaded and reopened once per size.
func BenchmarkScale(b *testing.B) {
	if testing.Short() {
		b.Skip("-short")
	}
	oneCount(b)
	parent := b
	for _, machines := range []int{10000, 100000} {
		var ss *scaleSite
		b.Run(fmt.Sprintf("machines=%d", machines), func(b *testing.B) {
			if machines > 10000 && !largeAsked() {
				b.Skip("100,000 machines only with -etcdbench.large or -bench naming machines=100000")
			}
			if ss == nil {
				ss = newScaleSite(parent, b, machines)
			}
			_ = ss.l.createLat()
			before := ss.etcd.counters(b)
			created0 := ss.l.creates()
			b.ResetTimer()
			lat, wall := ss.l.run(b, b.N, *benchWorkers)
			b.StopTimer()
			after := ss.etcd.counters(b)
			create := ss.l.createLat()
			reportLaunches(b, lat, create, wall)
			reportEtcd(b, before, after, b.N)
			reportCreates(b, created0, ss.l.creates(), b.N)
			ss.res.p50, ss.res.p99 = pct(lat, 0.5), pct(lat, 0.99)
			ss.res.launchesPerS = float64(len(lat)) / wall.Seconds()
			most := checkSlots(b, ss.cli, ss.shape.maxSessions, int64(ss.res.sessions)+ss.l.created.Load())
			b.ReportMetric(float64(most), "max-slots")
			r := ss.res
			opens := slices.Clone(ss.opens)
			slices.Sort(opens)
			b.ReportMetric(r.loadS, "load-s")
			b.ReportMetric(r.openS, "open-s")
			b.ReportMetric(r.newS, "new-s")
			r.restartMed = opens[len(opens)/2]
			b.ReportMetric(r.restartMed, "restart-median-s")
			b.ReportMetric(r.viewHeap/1e6, "view-heap-MB")
			b.ReportMetric(r.totalHeap/1e6, "heap-MB")
			b.ReportMetric(r.peakHeap/1e6, "peak-heap-MB")
			b.ReportMetric(r.rss/1e6, "rss-MB")
			b.ReportMetric(r.totalHeap/r.sessions, "heap-B/session")
			b.ReportMetric(r.etcdRSS/1e6, "etcd-rss-MB")
			b.ReportMetric(r.readS, "read-s")
			b.ReportMetric(r.streamS, "stream-read-s")
			b.ReportMetric(ms(r.pages[0]), "page1-ms")
			b.ReportMetric(ms(r.pages[len(r.pages)/2]), "pagemid-ms")
			b.ReportMetric(float64(len(r.pages)), "pages")
			ok := 0.0
			if r.defaultOK {
				ok = 1
			} else {
				dial := "5s, the store's default"
				if *benchDial != 0 {
					dial = benchDial.String()
				}
				b.Logf("etcd.Open with DialTimeout %s FAILED after %.1fs: %s", dial, r.defaultOpenS, r.defaultErr)
			}
			b.ReportMetric(ok, "default-dial-open-ok")
			scaleDone[machines] = r
			if small, ok := scaleDone[10000]; ok && machines == 100000 {
				b.ReportMetric(r.restartMed/small.restartMed, "x-restart")
				b.ReportMetric(r.totalHeap/small.totalHeap, "x-heap")
				b.ReportMetric(r.rss/small.rss, "x-rss")
				b.ReportMetric(float64(r.p99)/float64(small.p99), "x-p99")
			}
			b.Logf("%d machines / %.0f sessions: load %.1fs; restart open %.2fs + broker.New %.2fs (median of 3 restarts %.2fs: %v); heap +%.1f MB (view %.1f MB, peak +%.1f MB), RSS +%.1f MB; etcd process RSS %.0f MB; launches %.0f/s p50 %.2f ms p99 %.2f ms",
				machines, r.sessions, r.loadS, r.openS, r.newS, opens[len(opens)/2], ss.opens, r.totalHeap/1e6, r.viewHeap/1e6, r.peakHeap/1e6, r.rss/1e6, r.etcdRSS/1e6, r.launchesPerS, ms(r.p50), ms(r.p99))
		})
		if ss != nil {
			ss.close()
		}
	}
}
