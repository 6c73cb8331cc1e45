package store_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/frontdoor-vdi/frontdoor/broker"
	"github.com/frontdoor-vdi/frontdoor/configs"
	"github.com/frontdoor-vdi/frontdoor/store/bolt"
	"github.com/frontdoor-vdi/frontdoor/store/memory"
)

// Benchmark site: 50 zones, 10 shared groups spread over every zone, one desktop per group,
// 20,000 users with home zones, 100,000 existing sessions. Run on one core:
//
//	go test ./store -run '^$' -bench . -benchtime 200000x -cpu 1
const (
	benchZones    = 50
	benchGroups   = 10
	benchUsers    = 20000
	benchSessions = 100000
)

func benchConfig(tb testing.TB, machines int) *configs.Config {
	tb.Helper()
	cfg := &configs.Config{}
	for z := 0; z < benchZones; z++ {
		cfg.Zones = append(cfg.Zones, configs.Zone{Name: fmt.Sprintf("z%02d", z), Primary: z == 0})
	}
	for g := 0; g < benchGroups; g++ {
		cfg.Groups = append(cfg.Groups, configs.Group{Name: fmt.Sprintf("g%d", g)})
		cfg.Resources = append(cfg.Resources, configs.Resource{Name: fmt.Sprintf("desk%d", g),
			Groups: []configs.ResourceGroup{{Group: fmt.Sprintf("g%d", g)}}, Entitled: configs.Entitlement{Everyone: true}})
	}
	// Enough room for the existing sessions plus the benchmark's own.
	perMachine := max(2*benchSessions/machines, 4)
	for i := 0; i < machines; i++ {
		cfg.Machines = append(cfg.Machines, configs.Machine{Name: fmt.Sprintf("m%06d", i),
			Address: netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), Zone: fmt.Sprintf("z%02d", (i/benchGroups)%benchZones),
			Group: fmt.Sprintf("g%d", i%benchGroups), MaxSessions: perMachine})
	}
	for u := 0; u < benchUsers; u++ {
		uc := configs.User{Name: fmt.Sprintf("u%05d", u)}
		if u%2 == 0 {
			uc.HomeZone = fmt.Sprintf("z%02d", u%benchZones)
		}
		cfg.Users = append(cfg.Users, uc)
	}
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		tb.Fatal(err)
	}
	return cfg
}

func benchSessionsFor(cfg *configs.Config, now time.Time) []broker.Session {
	r := rand.New(rand.NewPCG(1, 2))
	out := make([]broker.Session, 0, benchSessions)
	for i := 0; i < benchSessions; i++ {
		m := cfg.Machines[r.IntN(len(cfg.Machines))]
		st := broker.StateConnected
		if i%4 == 0 {
			st = broker.StateDisconnected
		}
		out = append(out, broker.Session{ID: fmt.Sprintf("old%06d", i), User: cfg.Users[r.IntN(benchUsers)].Name,
			Resource: "desk" + m.Group[1:], Group: m.Group, Machine: m.Name, Zone: m.Zone, State: st,
			Endpoint: "ep", Mode: "gateway", Created: now.Add(-time.Hour), Changed: now.Add(-time.Hour),
			Expires: now.Add(time.Hour), Rev: 1})
	}
	return out
}

type benchStore interface {
	broker.Store
}

func openBench(b *testing.B, kind string, cfg *configs.Config, now time.Time) broker.Store {
	b.Helper()
	sessions := benchSessionsFor(cfg, now)
	ctx := context.Background()
	switch kind {
	case "memory":
		st := memory.New()
		for _, s := range sessions {
			if err := st.CreateSession(ctx, s, 1<<30); err != nil {
				b.Fatal(err)
			}
		}
		return st
	case "bolt":
		st, err := bolt.Open(filepath.Join(b.TempDir(), "bench.db"), bolt.Options{})
		if err != nil {
			b.Fatal(err)
		}
		if err := st.Import(ctx, sessions); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { st.Close() })
		return st
	}
	b.Fatalf("unknown store %s", kind)
	return nil
}

func requests(n int) []broker.LaunchRequest {
	r := rand.New(rand.NewPCG(3, 4))
	out := make([]broker.LaunchRequest, n)
	for i := range out {
		out[i] = broker.LaunchRequest{User: fmt.Sprintf("u%05d", r.IntN(benchUsers)), Resource: fmt.Sprintf("desk%d", r.IntN(benchGroups)),
			LocationZone: fmt.Sprintf("z%02d", r.IntN(benchZones)), Endpoint: fmt.Sprintf("ep%d", r.IntN(3))}
	}
	return out
}

func report(b *testing.B, lat []time.Duration) {
	slices.Sort(lat)
	if len(lat) == 0 {
		return
	}
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
	var sum time.Duration
	for _, d := range lat {
		sum += d
	}
	b.ReportMetric(float64(len(lat))/sum.Seconds(), "decisions/s")
}

var sizes = []int{1000, 10000, 100000}

// BenchmarkDecide measures the decision alone (Decide: no store write) with its trace.
func BenchmarkDecide(b *testing.B) {
	now := time.Date(2025, 1, 2, 9, 0, 0, 0, time.UTC)
	for _, n := range sizes {
		b.Run(fmt.Sprintf("machines=%d", n), func(b *testing.B) {
			cfg := benchConfig(b, n)
			br, err := broker.New(context.Background(), cfg, openBench(b, "memory", cfg, now), func() time.Time { return now })
			if err != nil {
				b.Fatal(err)
			}
			reqs := requests(1 << 16)
			lat := make([]time.Duration, 0, b.N)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				d := br.Decide(reqs[i&(len(reqs)-1)])
				lat = append(lat, time.Since(t0))
				if d.Outcome == broker.OutcomeDenied {
					b.Fatalf("denied: %s", d.Reason)
				}
			}
			b.StopTimer()
			report(b, lat)
		})
	}
}

// BenchmarkLaunch measures committed launches (decision + atomic store write); every new
// session is logged off again outside the timed section so the site stays at 100k sessions.
func BenchmarkLaunch(b *testing.B) {
	now := time.Date(2025, 1, 2, 9, 0, 0, 0, time.UTC)
	for _, kind := range []string{"memory", "bolt"} {
		for _, n := range sizes {
			b.Run(fmt.Sprintf("store=%s/machines=%d", kind, n), func(b *testing.B) {
				cfg := benchConfig(b, n)
				br, err := broker.New(context.Background(), cfg, openBench(b, kind, cfg, now), func() time.Time { return now })
				if err != nil {
					b.Fatal(err)
				}
				reqs := requests(1 << 16)
				ctx := context.Background()
				lat := make([]time.Duration, 0, b.N)
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					t0 := time.Now()
					d, err := br.Launch(ctx, reqs[i&(len(reqs)-1)])
					lat = append(lat, time.Since(t0))
					if err != nil || d.Outcome == broker.OutcomeDenied {
						b.Fatalf("launch: %v %s", err, d.Reason)
					}
					if d.Outcome == broker.OutcomeNew {
						b.StopTimer()
						if _, err := br.Logoff(ctx, d.Session); err != nil {
							b.Fatal(err)
						}
						b.StartTimer()
					}
				}
				b.StopTimer()
				report(b, lat)
			})
		}
	}
}
