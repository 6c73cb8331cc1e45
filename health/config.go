package health

import (
	"fmt"
	"strings"

	"github.com/frontdoor-vdi/frontdoor/configs"
)

// TargetsFromConfig returns a target for every gateway and machine of a loaded (defaulted
// and validated) configuration. Gateways keep their ports, checks and monitors, and a
// gateway's quic_port is probed as a required UDP port. Machines,
// which have no monitor in the configuration, get DefaultMonitor; their TCP display ports
// are required TCP connects and their UDP display ports are optional UDP probes (a display
// protocol's UDP port need not answer a probe datagram, so it must not make a machine
// ineligible). Target names are the gateway and machine names, which must not collide.
func TargetsFromConfig(cfg *configs.Config) ([]Target, error) {
	var out []Target
	seen := map[string]string{}
	add := func(kind string, t Target) error {
		if k, dup := seen[t.Name]; dup {
			return fmt.Errorf("%s %s has the name of a %s: %w", kind, t.Name, k, ErrInvalidTarget)
		}
		seen[t.Name] = kind
		out = append(out, t)
		return nil
	}
	for _, g := range cfg.Gateways {
		if !g.Address.IsValid() {
			return nil, fmt.Errorf("gateway %s: no address: %w", g.Name, ErrInvalidTarget)
		}
		t := Target{Name: g.Name, Kind: "gateway", Zone: g.Zone, Addr: g.Address.Unmap(), Monitor: MonitorFromConfig(g.Monitor)}
		ports := g.Ports
		if len(ports) == 0 {
			ports = configs.DefaultGatewayPorts()
		}
		for _, p := range ports {
			t.Ports = append(t.Ports, portFromConfig(p))
		}
		if g.QUICPort != 0 {
			// Clients carry their UDP channels there: a required UDP probe, which the QUIC
			// end answers beside its connections. Its default payload is no QUIC packet.
			t.Ports = append(t.Ports, Port{ID: PortID{Port: uint16(g.QUICPort), Protocol: "udp"}, Check: Check{Kind: KindUDP}})
		}
		if err := add("gateway", t); err != nil {
			return nil, err
		}
	}
	for _, m := range cfg.Machines {
		if !m.Address.IsValid() {
			return nil, fmt.Errorf("machine %s: no address: %w", m.Name, ErrInvalidTarget)
		}
		t := Target{Name: m.Name, Kind: "machine", Zone: m.Zone, Addr: m.Address.Unmap(), Monitor: DefaultMonitor()}
		specs := m.DisplayPorts
		if len(specs) == 0 {
			specs = configs.DefaultDisplayPorts
		}
		for _, s := range specs {
			n, proto, err := configs.ParsePortSpec(s)
			if err != nil {
				return nil, fmt.Errorf("machine %s: %w: %w", m.Name, err, ErrInvalidTarget)
			}
			t.Ports = append(t.Ports, Port{ID: PortID{Port: uint16(n), Protocol: proto}, Optional: proto == "udp"})
		}
		if err := add("machine", t); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// MonitorFromConfig converts a configured monitor; zero fields keep DefaultMonitor's values
// (except PassiveFailures, where 0 means off).
func MonitorFromConfig(m configs.Monitor) Monitor {
	out := Monitor{
		Interval:        m.Interval.D(),
		Timeout:         m.Timeout.D(),
		Rise:            m.Rise,
		Fall:            m.Fall,
		Jitter:          m.Jitter,
		Mode:            Mode(m.Mode),
		PassiveFailures: m.PassiveFailures,
		PassiveWindow:   m.PassiveWindow.D(),
	}
	out.InitialDown = strings.EqualFold(m.Initial, "down")
	return out.withDefaults()
}

func portFromConfig(p configs.GatewayPort) Port {
	proto := p.Protocol
	if proto == "" {
		proto = "tcp"
	}
	c := p.Check
	out := Port{
		ID:       PortID{Port: uint16(p.Port), Protocol: proto},
		Optional: p.Optional,
		Check: Check{
			Kind: Kind(c.Kind), ServerName: c.ServerName, VerifyName: c.VerifyName,
			Method: c.Method, Path: c.Path, ExpectStatus: c.ExpectStatus,
		},
	}
	if c.Send != "" {
		out.Check.Send = []byte(c.Send)
	}
	if c.Expect != "" {
		out.Check.Expect = []byte(c.Expect)
	}
	return out
}
