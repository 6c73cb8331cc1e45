package configs

import (
	"fmt"
	"net/netip"
	"strings"
)

// Desktop says which desktop server a machine's agent fronts: after a channel's ticket
// checks out, the agent connects to it and carries the channel's bytes both ways.
type Desktop struct {
	// Protocol is builtin (the agent's own desktop: a VNC server drawn by the agent, for
	// a lab or a first look), vnc (a VNC server: TigerVNC's Xvnc, x11vnc) or rdp (an RDP
	// server: xrdp, Windows' own). Default: builtin.
	Protocol string `yaml:"protocol"`
	// Server is where the agent reaches the desktop server: "host:port", or for vnc
	// "unix:/path" (Xvnc's -rfbunixpath). The ticket is the user's key to it, so it should
	// listen only where the agent reaches it: on loopback or a Unix socket. Default:
	// 127.0.0.1:5900 for vnc, 127.0.0.1:3389 for rdp, none for builtin.
	Server string `yaml:"server"`
	// Channel is the machine's TCP display port that carries the desktop, "port/tcp".
	// Default: 8443/tcp, or for a machine without it its first TCP display port.
	Channel string `yaml:"channel"`
}

// The desktop protocols.
const (
	DesktopBuiltin = "builtin"
	DesktopVNC     = "vnc"
	DesktopRDP     = "rdp"
)

// defaultDesktopServer is the server a protocol's agent dials when none is given.
func defaultDesktopServer(protocol string) string {
	switch protocol {
	case DesktopVNC:
		return "127.0.0.1:5900"
	case DesktopRDP:
		return "127.0.0.1:3389"
	}
	return ""
}

// setDesktopDefaults fills a group's desktop, then each machine's override from its group's.
func setDesktopDefaults(c *Config) {
	groups := map[string]*Desktop{}
	chosen := map[string]bool{} // groups whose channel the config gives
	for i := range c.Groups {
		d := &c.Groups[i].Desktop
		chosen[c.Groups[i].Name] = d.Channel != ""
		setStr(&d.Protocol, DesktopBuiltin)
		setStr(&d.Server, defaultDesktopServer(d.Protocol))
		setStr(&d.Channel, "8443/tcp")
		groups[c.Groups[i].Name] = d
	}
	for i := range c.Machines {
		m := &c.Machines[i]
		if m.Desktop == nil {
			// A machine without the default channel has its desktop on its first TCP port.
			if g := groups[m.Group]; g != nil && !chosen[m.Group] && !hasPort(m.DisplayPorts, 8443, "tcp") {
				if first := firstTCP(m.DisplayPorts); first != "" {
					d := *g
					d.Channel = first
					m.Desktop = &d
				}
			}
			continue
		}
		g := groups[m.Group]
		if g == nil {
			g = &Desktop{Protocol: DesktopBuiltin, Channel: "8443/tcp"}
		}
		switch {
		case m.Desktop.Protocol == "":
			m.Desktop.Protocol = g.Protocol
			setStr(&m.Desktop.Server, g.Server)
		case m.Desktop.Protocol == g.Protocol:
			setStr(&m.Desktop.Server, g.Server)
		default:
			setStr(&m.Desktop.Server, defaultDesktopServer(m.Desktop.Protocol))
		}
		if m.Desktop.Channel == "" {
			m.Desktop.Channel = g.Channel
			if !chosen[m.Group] && !hasPort(m.DisplayPorts, 8443, "tcp") {
				m.Desktop.Channel = firstTCP(m.DisplayPorts)
			}
		}
	}
}

// DesktopOf returns the desktop of machine m: its own, else its group's (after SetDefaults).
func (c *Config) DesktopOf(m Machine) Desktop {
	if m.Desktop != nil {
		return *m.Desktop
	}
	for _, g := range c.Groups {
		if g.Name == m.Group {
			return g.Desktop
		}
	}
	return Desktop{Protocol: DesktopBuiltin, Channel: "8443/tcp"}
}

// UDPChannel returns the UDP display port, "port/udp", that carries the desktop's UDP
// transport on a machine with display ports ports, or "" for none. Only RDP has one (its UDP
// transport, which Windows' RDP server offers on the port of its TCP one): it rides the UDP
// display port of the desktop channel's number, when the machine has that port; the agent
// relays its datagrams to the server's address over UDP. A site that wants RDP on TCP alone
// leaves that port out of display_ports.
func (d Desktop) UDPChannel(ports []string) string {
	if d.Protocol != DesktopRDP {
		return ""
	}
	n, _, err := ParsePortSpec(d.Channel)
	if err != nil || !hasPort(ports, n, "udp") {
		return ""
	}
	return fmt.Sprintf("%d/udp", n)
}

// DesktopServer is a desktop server's parsed address: a TCP address or a Unix socket.
type DesktopServer struct {
	Network string // "tcp" or "unix"
	Address string // host:port or a path
	// Loopback reports a TCP address on loopback (or a Unix socket): reachable only from the
	// machine.
	Loopback bool
}

// ParseDesktopServer parses a desktop's server for its protocol.
func ParseDesktopServer(protocol, s string) (DesktopServer, error) {
	if path, ok := strings.CutPrefix(s, "unix:"); ok {
		if protocol != DesktopVNC {
			return DesktopServer{}, fmt.Errorf("a Unix socket serves only vnc, not %s", protocol)
		}
		if !strings.HasPrefix(path, "/") {
			return DesktopServer{}, fmt.Errorf("%q: the socket's path must be absolute", s)
		}
		return DesktopServer{Network: "unix", Address: path, Loopback: true}, nil
	}
	ap, err := netip.ParseAddrPort(s)
	if err != nil || ap.Port() == 0 {
		return DesktopServer{}, fmt.Errorf("%q is neither IP:port nor unix:/path", s)
	}
	return DesktopServer{Network: "tcp", Address: ap.String(), Loopback: ap.Addr().Unmap().IsLoopback()}, nil
}

// validateDesktop checks a desktop at path; ports are the machine's display ports (nil for a
// group's, checked for each of its machines).
func (k *checker) validateDesktop(path string, d Desktop, ports []string) {
	k.oneOf(path+".protocol", d.Protocol, DesktopBuiltin, DesktopVNC, DesktopRDP)
	switch {
	case d.Protocol == DesktopBuiltin && d.Server != "":
		k.errf(path+".server", "the builtin desktop has no server; give protocol vnc or rdp with it")
	case d.Protocol == DesktopVNC || d.Protocol == DesktopRDP:
		if _, err := ParseDesktopServer(d.Protocol, d.Server); err != nil {
			k.errf(path+".server", "%v", err)
		}
	}
	n, proto, err := ParsePortSpec(d.Channel)
	switch {
	case err != nil:
		k.errf(path+".channel", "%v", err)
	case proto != "tcp":
		k.errf(path+".channel", "%s: a desktop rides a TCP channel", d.Channel)
	case ports != nil && !hasPort(ports, n, proto):
		k.errf(path+".channel", "%s is not one of the machine's display_ports %v", d.Channel, ports)
	}
}

// firstTCP returns the first TCP port of specs, or "".
func firstTCP(specs []string) string {
	for _, s := range specs {
		if _, p, err := ParsePortSpec(s); err == nil && p == "tcp" {
			return s
		}
	}
	return ""
}

func hasPort(specs []string, port int, proto string) bool {
	for _, s := range specs {
		if n, p, err := ParsePortSpec(s); err == nil && n == port && p == proto {
			return true
		}
	}
	return false
}
