package proxy

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"
)

func testPool(balance string, weights ...int) *pool {
	cfg := Pool{Name: "p", Balance: balance}
	for i, w := range weights {
		cfg.Backends = append(cfg.Backends, Backend{Name: fmt.Sprintf("b%d", i),
			Address: netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(1000+i)), Weight: w})
	}
	m, _ := newMetrics(nil)
	return newPool(cfg, nil, m)
}

func all(*backend) bool { return true }

func TestBalancePolicies(t *testing.T) {
	client := netip.MustParseAddr("10.0.0.1")
	for _, tc := range []struct {
		name    string
		balance string
		weights []int
		picks   int
		want    []int
	}{
		{"round robin spreads evenly", RoundRobin, []int{1, 1, 1}, 9, []int{3, 3, 3}},
		{"weighted follows the weights", Weighted, []int{3, 1}, 8, []int{6, 2}},
		{"least_conn with no connections alternates", LeastConn, []int{1, 1}, 4, []int{2, 2}},
		{"source hash keeps one client on one backend", SourceHash, []int{1, 1, 1}, 5, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := testPool(tc.balance, tc.weights...)
			got := make([]int, len(tc.weights))
			for range tc.picks {
				b := p.pick(client, all)
				fmt.Sscanf(b.name, "b%d", new(int))
				for i, pb := range p.backends {
					if pb == b {
						got[i]++
					}
				}
			}
			if tc.want == nil {
				hits := 0
				for _, g := range got {
					if g > 0 {
						hits++
					}
				}
				if hits != 1 {
					t.Fatalf("picks %v, want all on one backend", got)
				}
				return
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("picks %v, want %v", got, tc.want)
			}
		})
	}
}

func TestLeastConnPrefersTheLeastLoadedPerWeight(t *testing.T) {
	p := testPool(LeastConn, 1, 2)
	p.backends[0].active.Store(2)
	p.backends[1].active.Store(3) // 1.5 per weight unit, below 2
	if b := p.pick(netip.Addr{}, all); b != p.backends[1] {
		t.Fatalf("picked %s, want b1", b.name)
	}
}

func TestPickSkipsIneligibleBackends(t *testing.T) {
	for _, bal := range []string{RoundRobin, Weighted, LeastConn, SourceHash} {
		p := testPool(bal, 1, 1, 1)
		for range 10 {
			if b := p.pick(netip.MustParseAddr("10.0.0.9"), func(b *backend) bool { return b.name == "b2" }); b.name != "b2" {
				t.Fatalf("%s picked %s, only b2 is eligible", bal, b.name)
			}
		}
		if b := p.pick(netip.Addr{}, func(*backend) bool { return false }); b != nil {
			t.Fatalf("%s picked %s with nothing eligible", bal, b.name)
		}
	}
}

// TestSourceHashMovesOnlyTheRemovedBackendsClients compares rendezvous hashing against the
// property a naive modulo hash lacks: removing a backend moves only its own clients.
func TestSourceHashMovesOnlyTheRemovedBackendsClients(t *testing.T) {
	p := testPool(SourceHash, 1, 1, 1, 1)
	r := rand.New(rand.NewPCG(1, 2))
	counts := map[string]int{}
	for range 2000 {
		c := netip.AddrFrom4([4]byte{byte(r.IntN(256)), byte(r.IntN(256)), byte(r.IntN(256)), byte(r.IntN(256))})
		before := p.pick(c, all)
		counts[before.name]++
		after := p.pick(c, func(b *backend) bool { return b.name != "b3" })
		if before.name != "b3" && after != before {
			t.Fatalf("client %v moved from %s to %s though only b3 left", c, before.name, after.name)
		}
	}
	for name, n := range counts {
		if n < 350 || n > 650 {
			t.Errorf("backend %s got %d of 2000 clients; want about 500", name, n)
		}
	}
}
