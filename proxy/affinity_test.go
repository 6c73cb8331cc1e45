package proxy

import (
	"net/netip"
	"sync"
	"testing"
	"time"
)

// gateway starts one backend per port of a gateway, each answering with the gateway's name.
func gateway(t *testing.T, name string) (p443, p4172 netip.AddrPort) {
	return startTCP(t, named(name)).addr(), startTCP(t, named(name)).addr()
}

func TestAffinityFollowsTheClientAcrossListenersWhileUp(t *testing.T) {
	x443, x4172 := gateway(t, "gw-x")
	y443, y4172 := gateway(t, "gw-y")
	var mu sync.Mutex
	down := map[string]bool{}
	health := HealthFunc(func(n string) bool {
		mu.Lock()
		defer mu.Unlock()
		return !down[n]
	})
	s := startServer(t, Config{
		Listeners: []Listener{tcpListener("443", "p443"), tcpListener("4172", "p4172")},
		Pools: []Pool{
			{Name: "p443", Balance: RoundRobin, Affinity: true, Backends: []Backend{{Name: "gw-x", Address: x443}, {Name: "gw-y", Address: y443}}},
			// The other port balances the opposite way round, so only affinity can agree.
			{Name: "p4172", Balance: RoundRobin, Affinity: true, Backends: []Backend{{Name: "gw-y", Address: y4172}, {Name: "gw-x", Address: x4172}}},
		},
	}, Options{Health: health})
	first := readLine(t, dial(t, s.Addr("443")))
	for range 5 {
		if got := readLine(t, dial(t, s.Addr("4172"))); got != first {
			t.Fatalf("4172 went to %s, 443 went to %s", got, first)
		}
		if got := readLine(t, dial(t, s.Addr("443"))); got != first {
			t.Fatalf("443 went to %s, then %s", first, got)
		}
	}
	// The gateway's composite monitor goes down: the client must move, on every port.
	mu.Lock()
	down[first] = true
	mu.Unlock()
	s.Verdict(first, false)
	moved := readLine(t, dial(t, s.Addr("4172")))
	if moved == first {
		t.Fatalf("4172 still went to %s, which is down", first)
	}
	if got := readLine(t, dial(t, s.Addr("443"))); got != moved {
		t.Fatalf("443 went to %s after 4172 moved to %s", got, moved)
	}
	// The old gateway comes back: the client stays where it is now.
	mu.Lock()
	down[first] = false
	mu.Unlock()
	s.Verdict(first, true)
	if got := readLine(t, dial(t, s.Addr("443"))); got != moved {
		t.Fatalf("443 went back to %s; want to stay on %s", got, moved)
	}
}

func TestAffinityTableExpiresAndStaysBounded(t *testing.T) {
	now := time.Unix(1000, 0)
	a := newAffinity(time.Minute, 3, func() time.Time { return now })
	ip := func(i int) netip.Addr { return netip.AddrFrom4([4]byte{10, 0, 0, byte(i)}) }
	a.set(ip(1), "x")
	if got, ok := a.get(netip.MustParseAddr("::ffff:10.0.0.1")); !ok || got != "x" {
		t.Fatalf("IPv4-mapped lookup got %q, %v; want x", got, ok)
	}
	now = now.Add(time.Minute)
	if _, ok := a.get(ip(1)); ok {
		t.Fatal("binding outlived its TTL")
	}
	for i := range 10 {
		a.set(ip(i), "y")
	}
	if n := a.len(); n > 3 {
		t.Fatalf("table holds %d entries, bound is 3", n)
	}
	a.forget("y")
	if n := a.len(); n != 0 {
		t.Fatalf("forget left %d entries", n)
	}
}
