// Command zones measures zone leader handovers and the Local Host Cache (store/etcd's
// election.go and outage.go) on a real 3-member embedded etcd on loopback (store/etcdembed,
// without fsync), over many bounded trials, each on a key prefix of its own:
//
//   - graceful: the zone leader's Elector ctx is canceled; the time until the next candidate
//     leads and its own view shows it (and until every remaining view does);
//   - crash: the leader's etcd client is closed (its lease is left to expire);
//   - runoff: a candidate of a newer version starts standing; the time until it leads;
//   - outage: the two etcd members that do not lead are stopped at once (the quorum is lost)
//     under two nodes with an outage plan; the time until each is in outage mode (Outage().On),
//     from the StopMember call, from the moment etcd stopped answering (a probe loop of this
//     program's own, every 10 ms) and from the node's first probe that failed (estimated
//     from its 250 ms schedule); then N sessions are created in the outage, one member is
//     restarted, and the time from RestartMember's return until each node has written the
//     outage back and left outage mode, and whether every session reached etcd.
//
// The nodes of the outage trials know all three members, as a site's nodes do; those of the
// -survivor-trials know only the member that stays up (a quorum loss seen through a member
// that cannot serve, with no connection refused).
//
// It prints Markdown: the summary against the goals, then every trial. bench/zones.sh runs
// it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/frontdoor-vdi/frontdoor/store/etcdembed"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// bench is what every trial shares: one etcd cluster, an admin client, the prober.
type bench struct {
	cluster *etcdembed.Cluster
	eps     []string
	admin   *clientv3.Client
	probe   *prober
	log     *slog.Logger
	dir     string // the nodes' cache files
}

func main() {
	var (
		trials    = flag.Int("trials", 30, "trials of each handover (graceful, crash, runoff)")
		outages   = flag.Int("outage-trials", 30, "outage trials, the nodes knowing all three members; they cycle through -sessions")
		survivors = flag.Int("survivor-trials", 5, "outage trials with the nodes knowing only the member that stays up (0 sessions)")
		sessFlag  = flag.String("sessions", "0,100,1000", "sessions created in each outage trial, over both nodes, cycled through (at most 2000)")
		only      = flag.String("only", "graceful,crash,runoff,outage,survivor", "which measurements to run")
		budget    = flag.Duration("budget", 280*time.Second, "no trial starts after this much time; the ones left are reported as not run")
		logFile   = flag.String("log", "", "write the stores' and etcd's logs (warnings and errors) to this file")
		dataDir   = flag.String("data", "", "etcd's and the cache files' directory (default: a temporary one, removed at the end)")
		trialWait = flag.Duration("settle", 0, "a pause between trials (on a busy host)")
	)
	flag.Parse()
	counts, err := parseCounts(*sessFlag)
	if err != nil {
		fail(err)
	}
	run := map[string]bool{}
	for _, k := range strings.Split(*only, ",") {
		run[strings.TrimSpace(k)] = true
	}
	logw := io.Discard
	if *logFile != "" {
		f, err := os.Create(*logFile)
		if err != nil {
			fail(err)
		}
		defer f.Close()
		logw = f
	}
	log := slog.New(slog.NewTextHandler(logw, &slog.HandlerOptions{Level: slog.LevelWarn}))
	dir := *dataDir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "zones-"); err != nil {
			fail(err)
		}
		defer os.RemoveAll(dir)
	}
	began := time.Now()
	deadline := began.Add(*budget)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	c, err := etcdembed.Start(ctx, etcdembed.Options{Dir: dir + "/etcd", Members: 3, UnsafeNoFsync: true, Logger: log})
	cancel()
	if err != nil {
		fail(err)
	}
	defer c.Close()
	admin, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		fail(err)
	}
	defer admin.Close()
	probeCli, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		fail(err)
	}
	defer probeCli.Close()
	b := &bench{cluster: c, eps: c.Endpoints(), admin: admin, probe: &prober{}, log: log, dir: dir}
	pctx, pcancel := context.WithCancel(context.Background())
	defer pcancel()
	go b.probe.run(pctx, probeCli, "/zones/probe")

	rep := &report{elections: map[string][]electionTrial{}, skipped: map[string]int{}}
	pause := func() {
		if *trialWait > 0 {
			time.Sleep(*trialWait)
		}
	}
	for _, kind := range []string{graceful, crash, runoff} {
		if !run[kind] {
			continue
		}
		for k := range *trials {
			if time.Now().After(deadline) {
				rep.skipped[kind] = *trials - k
				break
			}
			tr := b.election(kind, k)
			rep.elections[kind] = append(rep.elections[kind], tr)
			fmt.Fprintf(os.Stderr, "%-8s %2d: leads %v, every view %v, old key gone %v, old stopped %v, joiner sees itself %v, two leaders %d, err %v\n",
				kind, k, ms(tr.took), ms(tr.all), ms(tr.gone), ms(tr.old), ms(tr.self), tr.twice, tr.err)
			pause()
		}
	}
	outageRuns := []struct {
		kind   string
		n      int
		allEPs bool
	}{{"outage", *outages, true}, {"survivor", *survivors, false}}
	k := 0
	for _, o := range outageRuns {
		if !run[o.kind] {
			continue
		}
		for i := range o.n {
			if time.Now().After(deadline) {
				rep.skipped[o.kind] = o.n - i
				break
			}
			n := counts[i%len(counts)]
			if !o.allEPs {
				n = 0
			}
			tr := b.outage(k, n, o.allEPs)
			k++
			rep.outages = append(rep.outages, tr)
			fmt.Fprintf(os.Stderr, "%-10s %2d: N=%d stop returned %v, lost %v, in %v (from loss %v, from probe %v), create %v, restart %v, back %v, out %v, launches %d (longest %v), written %d, err %v\n",
				o.kind, i, n, ms(tr.stopRet), msOK(tr.lost, tr.lostOK), msList(tr.in), msList(tr.inLost), msList(tr.inProbe), ms(tr.create), ms(tr.restart), msOK(tr.back, tr.backOK), msList(tr.out), tr.launches, ms(tr.late), tr.written, tr.err)
			if tr.err != nil && errors.Is(tr.err, errBroken) {
				break
			}
			pause()
		}
	}
	rep.took = time.Since(began)
	rep.print(os.Stdout, *trials, counts)
}

// errBroken marks a failure that leaves the cluster unusable for further trials.
var errBroken = errors.New("the etcd cluster is broken")

func parseCounts(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 0 || n > planMachines*planMax {
			return nil, fmt.Errorf("-sessions: %q is not a count from 0 to %d", f, planMachines*planMax)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, errors.New("-sessions: no count")
	}
	return out, nil
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "zones:", err)
	os.Exit(1)
}
