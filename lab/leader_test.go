package lab

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"
)

// probers returns, for every target, the running nodes of this process that probe it.
func probers(l *Lab) map[string][]string {
	out := map[string][]string{}
	for _, m := range l.members {
		m.mu.Lock()
		gone := m.closed || m.killed
		m.mu.Unlock()
		if gone {
			continue
		}
		for _, t := range m.n.Probes() {
			out[t] = append(out[t], m.name)
		}
	}
	return out
}

// wellLed reports whether every zone has one leader, a node of that zone other than dead,
// and every gateway and machine is probed by exactly one node: its zone's leader.
func wellLed(l *Lab, dead string) error {
	leaders := l.Site().Election().Leaders()
	zoneOf := map[string]string{}
	for _, n := range l.Config.Nodes {
		zoneOf[n.Name] = n.Zone
	}
	for _, z := range l.Config.Zones {
		ld, ok := leaders[z.Name]
		if !ok || zoneOf[ld.Node] != z.Name || ld.Node == dead {
			return fmt.Errorf("zone %s has no live leader of its own (%q)", z.Name, ld.Node)
		}
	}
	p := probers(l)
	check := func(name, zone string) error {
		if got := p[name]; len(got) != 1 || got[0] != leaders[zone].Node {
			return fmt.Errorf("%s probed by [%s], want %s", name, strings.Join(got, " "), leaders[zone].Node)
		}
		return nil
	}
	for _, g := range l.Config.Gateways {
		if err := check(g.Name, g.Zone); err != nil {
			return err
		}
	}
	for _, m := range l.Config.Machines {
		if err := check(m.Name, m.Zone); err != nil {
			return err
		}
	}
	return nil
}

// waitWellLed waits up to d for wellLed and returns how long it took.
func waitWellLed(t *testing.T, l *Lab, dead string, d time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		err := wellLed(l, dead)
		if err == nil {
			return time.Since(start)
		}
		if time.Since(start) > d {
			t.Fatalf("after %v: %v", d, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestOneLeaderPerZoneProbes: on the lab every zone elects one of its nodes, only that leader
// probes the zone's gateways and machines, the admin status names each zone's leader and
// since when; a killed leader is replaced within the election's bound, the new leader
// probes, and the other nodes see the dead node's gateway go down from its verdicts.
func TestOneLeaderPerZoneProbes(t *testing.T) {
	l, _ := startLab(t)
	waitWellLed(t, l, "", 10*time.Second)

	type status struct {
		Store struct {
			Leaders []struct {
				Zone, Node string
				Since      time.Time
			} `json:"leaders"`
			Registrations map[string]struct{ Node, Zone string } `json:"registrations"`
		} `json:"store"`
	}
	get := func() status {
		t.Helper()
		var st status
		adminStatus(t, l, &st)
		return st
	}
	st := get()
	if len(st.Store.Leaders) != len(l.Config.Zones) {
		t.Fatalf("admin status leaders %+v, want one per zone", st.Store.Leaders)
	}
	// Every machine is registered with a node of its own zone (each lab zone has two).
	deadline := time.Now().Add(5 * time.Second)
	for {
		st = get()
		bad := ""
		for _, m := range l.Config.Machines {
			if r, ok := st.Store.Registrations[m.Name]; !ok || r.Zone != m.Zone || r.Node == "" {
				bad = fmt.Sprintf("%s (zone %s) registered at %+v", m.Name, m.Zone, r)
			}
		}
		if bad == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("admin status registrations: %s", bad)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, ld := range st.Store.Leaders {
		if ld.Node == "" || ld.Since.IsZero() || time.Since(ld.Since) > time.Minute {
			t.Errorf("admin status: leader %+v lacks a node or a recent since", ld)
		}
	}

	// Kill east's leader: the other east node leads and probes within the crash bound, and
	// the killed node's gateway reads down everywhere (its new prober's verdict).
	old := l.Site().Election().Leaders()["east"].Node
	var gw string
	for _, g := range l.Config.Gateways {
		if g.Node == old {
			gw = g.Name
		}
	}
	start := time.Now()
	if err := l.Signal(old, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	d := waitWellLed(t, l, old, 5*time.Second)
	t.Logf("zone east: %s killed, new leader probing after %v", old, time.Since(start))
	if d > 3*time.Second {
		t.Errorf("the new leader took %v, want within the lease's 1.5 s bound (and some slack)", d)
	}
	deadline = time.Now().Add(5 * time.Second)
	for v := verdict(t, l, gw); v != "down"; v = verdict(t, l, gw) {
		if time.Now().After(deadline) {
			t.Fatalf("gateway %s of the killed node reads %q at the admin node after 5s, want down", gw, v)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("gateway %s reads down at hq's admin node %v after the kill", gw, time.Since(start))
}
