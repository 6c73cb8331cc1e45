package proxy

import (
	"hash/fnv"
	"net/netip"
	"sync"
	"sync/atomic"
)

// backend is the run-time state of one pool member.
type backend struct {
	name   string
	addr   netip.AddrPort
	weight int
	active *atomic.Int64 // connections and flows in progress; shared with the backend's successor after a reload
	m      *backendMetrics
}

// pool is the run-time state of a Pool.
type pool struct {
	cfg      Pool
	backends []*backend

	rr atomic.Uint64 // round robin cursor

	mu      sync.Mutex // guards current
	current []int      // smooth weighted round robin state, one per backend
}

func newPool(cfg Pool, old *pool, m *metrics) *pool {
	p := &pool{cfg: cfg, current: make([]int, len(cfg.Backends))}
	for _, b := range cfg.Backends {
		nb := &backend{name: b.Name, addr: b.Address, weight: b.Weight, active: new(atomic.Int64)}
		if old != nil {
			// Share the counter of a backend that stays, so least_conn still sees its
			// established connections after a reload and their ends still count down.
			for _, ob := range old.backends {
				if ob.name == b.Name && ob.addr == b.Address {
					nb.active = ob.active
					break
				}
			}
		}
		nb.m = m.backend(cfg.Name, b.Name)
		p.backends = append(p.backends, nb)
	}
	return p
}

// byName returns the pool's backend called name, or nil.
func (p *pool) byName(name string) *backend {
	for _, b := range p.backends {
		if b.name == name {
			return b
		}
	}
	return nil
}

// pick chooses a backend among those ok accepts, by the pool's policy.
func (p *pool) pick(client netip.Addr, ok func(*backend) bool) *backend {
	var buf [16]int
	idx := buf[:0]
	for i, b := range p.backends {
		if ok(b) {
			idx = append(idx, i)
		}
	}
	if len(idx) == 0 {
		return nil
	}
	switch p.cfg.Balance {
	case RoundRobin:
		n := p.rr.Add(1) - 1
		return p.backends[idx[n%uint64(len(idx))]]
	case Weighted:
		return p.pickWeighted(idx)
	case SourceHash:
		return p.pickHash(client, idx)
	default:
		return p.pickLeast(idx)
	}
}

// pickLeast returns the backend with the fewest active connections per weight; ties go to
// the next backend after the round robin cursor, so equal backends share new connections.
func (p *pool) pickLeast(idx []int) *backend {
	start := int(p.rr.Add(1)-1) % len(idx)
	var best *backend
	var bestActive, bestWeight int64
	for k := range idx {
		b := p.backends[idx[(start+k)%len(idx)]]
		a, w := b.active.Load(), int64(b.weight)
		// a/w < bestActive/bestWeight without division.
		if best == nil || a*bestWeight < bestActive*w {
			best, bestActive, bestWeight = b, a, w
		}
	}
	return best
}

// pickWeighted is nginx's smooth weighted round robin over the eligible backends.
func (p *pool) pickWeighted(idx []int) *backend {
	p.mu.Lock()
	defer p.mu.Unlock()
	total, best := 0, -1
	for _, i := range idx {
		p.current[i] += p.backends[i].weight
		total += p.backends[i].weight
		if best < 0 || p.current[i] > p.current[best] {
			best = i
		}
	}
	p.current[best] -= total
	return p.backends[best]
}

// pickHash is weighted rendezvous hashing of the client address over the eligible backends.
func (p *pool) pickHash(client netip.Addr, idx []int) *backend {
	a := client.Unmap().As16()
	var best *backend
	var bestScore uint64
	for _, i := range idx {
		b := p.backends[i]
		h := fnv.New64a()
		h.Write(a[:])
		h.Write([]byte(b.name))
		s := mix64(h.Sum64())
		// Scale by weight on the top bits; weights are small, so this stays monotone enough
		// for a fair split without floating point.
		score := (s >> 10) * uint64(b.weight)
		if best == nil || score > bestScore {
			best, bestScore = b, score
		}
	}
	return best
}

// mix64 is the splitmix64 finalizer; FNV alone clusters on similar inputs.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
