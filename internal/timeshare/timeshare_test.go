package timeshare

import (
	"math/rand/v2"
	"testing"
	"time"
)

// A Share lets work start once the work before it is paid for, at its share of the
// time, and saves nothing up while none runs.
func TestShare(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	type work struct{ start, end int } // ms from t0
	for _, tc := range []struct {
		name  string
		share float64
		done  []work
		at    int // asked at, ms
		want  int // may start at, ms
	}{
		{"the first work starts at once", 0.25, nil, 0, 0},
		{"60 ms of work at a quarter share is paid for 240 ms after it began", 0.25, []work{{0, 60}}, 60, 240},
		{"asked once it is paid for, work starts at once", 0.25, []work{{0, 60}}, 500, 500},
		{"a quiet spell saves nothing up", 0.25, []work{{0, 60}, {10000, 10060}}, 10060, 10240},
		{"work charged back to back adds up", 0.25, []work{{0, 60}, {240, 300}}, 300, 480},
		{"at a share of two CPUs two pieces at once are paid for in one piece's time", 2, []work{{0, 60}, {0, 60}}, 60, 60},
		{"at a share of two CPUs four pieces at once are paid for in two pieces' time", 2, []work{{0, 60}, {0, 60}, {0, 60}, {0, 60}}, 60, 120},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := New(tc.share)
			for _, w := range tc.done {
				s.Charge(ms(w.start), ms(w.end))
			}
			if got := s.Next(ms(tc.at)); !got.Equal(ms(tc.want)) {
				t.Fatalf("next(%d ms) = %v ms, want %d ms", tc.at, got.Sub(t0).Milliseconds(), tc.want)
			}
		})
	}
	t.Run("work started as soon as it may takes no more than its share", func(t *testing.T) {
		r := rand.New(rand.NewPCG(1, 2))
		for _, share := range []float64{0.1, 0.25, 0.5, 1, 2} {
			s := New(share)
			now, worked, longest := t0, time.Duration(0), time.Duration(0)
			for range 1000 {
				now = now.Add(time.Duration(r.IntN(50)) * time.Millisecond) // asked a while later
				start := s.Next(now)
				d := time.Duration(1+r.IntN(100)) * time.Millisecond
				s.Charge(start, start.Add(d))
				now, worked, longest = start.Add(d), worked+d, max(longest, d)
			}
			if limit := time.Duration(share*float64(now.Sub(t0))) + longest; worked > limit {
				t.Errorf("share %v: %v of work in %v, want at most %v", share, worked, now.Sub(t0), limit)
			}
		}
	})
}
