// Package ratemap keeps a rate.Limiter per key, for a bounded number of keys, failing closed:
// when the map is full, the keys whose limiters are full again (idle) are forgotten, and the
// keys that still do not fit share one limiter — never a fresh one each, which a flood of
// keys (addresses, user names) would get by filling the map, nor a reset of everyone's. The
// login throttle keeps one per source and per user name; a gateway one per source.
package ratemap

import (
	"time"

	"golang.org/x/time/rate"
)

// Map is a bounded map of limiters. It is not safe for concurrent use: its user holds a lock
// of its own.
type Map[K comparable] struct {
	limit    rate.Limit
	burst    int
	max      int
	m        map[K]*rate.Limiter
	overflow *rate.Limiter
	swept    time.Time // when idle limiters were last looked for
}

// New returns a Map of at most max limiters of limit and burst, each made full on first use.
func New[K comparable](limit rate.Limit, burst, max int) *Map[K] {
	return &Map[K]{limit: limit, burst: burst, max: max, m: map[K]*rate.Limiter{}, overflow: rate.NewLimiter(limit, burst)}
}

// Get returns k's limiter. When the map is full, it first forgets the limiters that are full
// again at now, looking for them once a second at most (a pass reads every limiter); if k
// still does not fit, it gets the limiter the keys that do not fit share.
func (m *Map[K]) Get(k K, now time.Time) *rate.Limiter {
	if l := m.m[k]; l != nil {
		return l
	}
	if len(m.m) >= m.max && now.Sub(m.swept) >= time.Second {
		m.swept = now
		for key, l := range m.m {
			if l.TokensAt(now) >= float64(m.burst) {
				delete(m.m, key)
			}
		}
	}
	if len(m.m) >= m.max {
		return m.overflow
	}
	l := rate.NewLimiter(m.limit, m.burst)
	m.m[k] = l
	return l
}

// Len returns how many keys have a limiter of their own.
func (m *Map[K]) Len() int { return len(m.m) }
