package node

import (
	"net/netip"
	"testing"

	"github.com/frontdoor-vdi/frontdoor/configs"
	"github.com/frontdoor-vdi/frontdoor/internal/rawio"
)

// TestUDPWorkersCountsOnlyBlockingSockets: workers (and their Ps) are counted for each udp DNS
// listener (one) or udp proxy listener (two: reads and replies) of the named nodes that is
// bound to a specific IP address.
func TestUDPWorkersCountsOnlyBlockingSockets(t *testing.T) {
	cfg := &configs.Config{
		Nodes: []configs.Node{
			{Name: "a", Listeners: []configs.Listener{
				{Kind: "dns", Address: netip.MustParseAddrPort("10.0.0.1:53"), Protocols: []string{"udp", "tcp"}},
				{Kind: "dns", Address: netip.MustParseAddrPort("0.0.0.0:5353"), Protocols: []string{"udp"}}, // wildcard: poller
				{Kind: "dns", Address: netip.MustParseAddrPort("10.0.0.1:54"), Protocols: []string{"tcp"}},  // no udp
				{Kind: "launch", Address: netip.MustParseAddrPort("10.0.0.1:443"), Protocols: []string{"tcp"}},
			}},
			{Name: "b", Listeners: []configs.Listener{
				{Kind: "dns", Address: netip.MustParseAddrPort("10.0.0.2:53"), Protocols: []string{"udp"}},
			}},
		},
		Proxy: configs.Proxy{Listeners: []configs.ProxyListener{
			{Name: "u", Node: "a", Address: netip.MustParseAddrPort("10.0.0.1:4172"), Protocol: "udp"},
			{Name: "u6", Node: "a", Address: netip.MustParseAddrPort("[::]:4172"), Protocol: "udp"}, // wildcard: poller
			{Name: "t", Node: "a", Address: netip.MustParseAddrPort("10.0.0.1:8443"), Protocol: "tcp"},
			{Name: "ub", Node: "b", Address: netip.MustParseAddrPort("10.0.0.2:4172"), Protocol: "udp"},
		}},
	}
	want := map[string]int{"a": 3, "b": 3, "a,b": 6}
	if !rawio.Supported {
		want = map[string]int{"a": 0, "b": 0, "a,b": 0}
	}
	for nodes, w := range want {
		var names []string
		switch nodes {
		case "a,b":
			names = []string{"a", "b"}
		default:
			names = []string{nodes}
		}
		if got := UDPWorkers(cfg, names...); got != w {
			t.Errorf("UDPWorkers(%s) = %d, want %d", nodes, got, w)
		}
	}
}
