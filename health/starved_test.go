package health

import (
	"net/netip"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestTimeoutsOfAStarvedProcessAreHeld: a timeout counts against the target only when this
// process was on time to see the answer, and only up to Fall held results in a row.
func TestTimeoutsOfAStarvedProcessAreHeld(t *testing.T) {
	tests := []struct {
		name    string
		starved time.Duration // what the meter says for every probe
		silence time.Duration // how long the gateway stays silent
		down    bool          // whether the gateway is to go down
		min     time.Duration // the earliest the down verdict may come
		max     time.Duration // the latest
	}{
		{"a second of silence on time is a dead gateway", 0, time.Second, true, 750 * time.Millisecond, time.Second},
		{"a second of silence while starved is a busy node", 200 * time.Millisecond, time.Second, false, 0, 0},
		{"a short lateness holds nothing", 50 * time.Millisecond, time.Second, true, 750 * time.Millisecond, time.Second},
		{"a dead gateway behind a starved prober goes down after twice Fall probes", 200 * time.Millisecond, 5 * time.Second, true, 1500 * time.Millisecond, 1750 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for seed := range uint64(50) {
				s := newSim(t, seed, gateway("gw", gwAddr, DefaultMonitor()))
				s.c.starved = func(time.Time) time.Duration { return tt.starved }
				s.runUntil(s.clk.Now().Add(2*time.Second), nil)
				for _, port := range []uint16{443, 4172} {
					s.net.set(netip.AddrPortFrom(gwAddr, port), blackhole)
				}
				t0 := s.clk.Now()
				s.runUntil(t0.Add(tt.silence), nil)
				for _, port := range []uint16{443, 4172} {
					s.net.set(netip.AddrPortFrom(gwAddr, port), answer)
				}
				s.runUntil(t0.Add(tt.silence+time.Second), nil)
				ev, down := s.verdictEvent("gw", StateDown, t0)
				if down != tt.down {
					t.Fatalf("seed %d: went down: %v (%+v), want %v", seed, down, ev, tt.down)
				}
				if d := ev.Time.Sub(t0); down && (d < tt.min || d > tt.max) {
					t.Fatalf("seed %d: down after %v, want %v..%v", seed, d, tt.min, tt.max)
				}
				held := testutil.ToFloat64(s.c.met.helds.WithLabelValues("gw"))
				if (tt.starved >= DefaultMonitor().Timeout/4) != (held > 0) {
					t.Fatalf("seed %d: %v probes held, with the meter at %v", seed, held, tt.starved)
				}
			}
		})
	}
}
