package health

import (
	"errors"
	"net/netip"
	"testing"
	"time"
)

// History keeps a target's last events, newest first: what Subscribe delivered, the port and
// the reason of each, and no more than HistoryLen of them.
func TestHistoryKeepsTheLastEventsNewestFirst(t *testing.T) {
	s := newSim(t, 1, gateway("gw", gwAddr, DefaultMonitor()))
	start := s.clk.Now()
	s.net.set(netip.AddrPortFrom(gwAddr, 4172), refuse)
	s.runUntil(start.Add(3*time.Second), nil)
	if err := s.c.SetOverride("gw", OverrideDrain); err != nil {
		t.Fatal(err)
	}
	s.c.flush()
	h := s.c.History("gw")
	if len(h) == 0 || len(h) != len(s.events) {
		t.Fatalf("history holds %d events, Subscribe delivered %d", len(h), len(s.events))
	}
	for i, ev := range h {
		if want := s.events[len(s.events)-1-i]; ev.Time != want.Time || ev.Port != want.Port || ev.Reason != want.Reason {
			t.Fatalf("history[%d] = %+v, want the %d-th newest event %+v", i, ev, i+1, want)
		}
	}
	if h[0].Reason != "admin" || h[0].To != StateDown {
		t.Fatalf("newest event %+v, want the admin's drain override (verdict stays down)", h[0])
	}
	var portDown bool
	for _, ev := range h[1:] {
		if ev.Port == TCP(4172) && ev.PortTo == StateDown && ev.Reason == "probe" && ev.Err != nil {
			portDown = true
		}
	}
	if !portDown {
		t.Fatalf("no probe event took 4172/tcp down with its error: %+v", h)
	}

	for i := range 3 * HistoryLen {
		o := OverrideUp
		if i%2 == 1 {
			o = OverrideDown
		}
		s.c.SetOverride("gw", o)
	}
	h = s.c.History("gw")
	if len(h) != HistoryLen {
		t.Fatalf("history holds %d events after %d overrides, want %d", len(h), 3*HistoryLen, HistoryLen)
	}
	if h[0].To != StateDown || h[1].To != StateUp {
		t.Fatalf("the two newest events go to %v then %v, want down (the last override) then up", h[0].To, h[1].To)
	}
	if got := s.c.History("nope"); got != nil {
		t.Fatalf("an unknown target's history: %v, want nil", got)
	}
	if !errors.Is(s.c.SetOverride("nope", OverrideUp), ErrUnknownTarget) {
		t.Fatal("override of an unknown target")
	}
}
