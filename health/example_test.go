package health_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	"github.com/frontdoor-vdi/frontdoor/health"
)

// A gateway that must answer on 443 (HTTPS), 4172 (TCP and UDP) to be eligible; the admin
// drains it, a consumer reports failures, and the verdicts follow.
func Example() {
	gw := health.Target{
		Name: "gw-hq-1",
		Addr: netip.MustParseAddr("127.1.0.11"),
		Ports: []health.Port{
			{ID: health.TCP(443), Check: health.Check{Kind: health.KindHTTPS}},
			{ID: health.TCP(4172)},
			{ID: health.UDP(4172)},
		},
		Monitor: health.DefaultMonitor(),
	}
	c, err := health.New([]health.Target{gw}, health.Deps{
		// A real Checker uses the default NetProber; this one never runs probes.
		Probe: func(context.Context, netip.AddrPort, *health.Check) error { return nil },
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	fmt.Println("eligible:", c.Eligible("gw-hq-1"))

	c.SetOverride("gw-hq-1", health.OverrideDrain)
	v, _ := c.Verdict("gw-hq-1")
	fmt.Println("after drain:", v)
	c.SetOverride("gw-hq-1", health.OverrideNone)

	// The proxy saw three resets on 4172/tcp within the passive window.
	for range 3 {
		c.ReportFailure("gw-hq-1", health.TCP(4172), errors.New("connection reset by peer"))
	}
	st, _ := c.Status("gw-hq-1")
	for _, p := range st.Ports {
		fmt.Println(p.ID, p.State)
	}
	fmt.Println("eligible:", c.Eligible("gw-hq-1"))
	// Output:
	// eligible: true
	// after drain: draining
	// 443/tcp up
	// 4172/tcp down
	// 4172/udp up
	// eligible: false
}
