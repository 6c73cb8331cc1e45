package configs

import "testing"

func TestOnlyRDPHasAUDPChannel(t *testing.T) {
	ports := []string{"4172/tcp", "4172/udp", "8443/tcp", "8443/udp"}
	for _, tc := range []struct {
		name  string
		d     Desktop
		ports []string
		want  string
	}{
		{"rdp rides the udp port of its channel's number", Desktop{Protocol: DesktopRDP, Channel: "8443/tcp"}, ports, "8443/udp"},
		{"rdp on another channel takes that number", Desktop{Protocol: DesktopRDP, Channel: "4172/tcp"}, ports, "4172/udp"},
		{"rdp without that udp port has none", Desktop{Protocol: DesktopRDP, Channel: "8443/tcp"}, []string{"8443/tcp", "4172/udp"}, ""},
		{"vnc has no udp transport", Desktop{Protocol: DesktopVNC, Channel: "8443/tcp"}, ports, ""},
		{"the builtin desktop echoes instead", Desktop{Protocol: DesktopBuiltin, Channel: "8443/tcp"}, ports, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.d.UDPChannel(tc.ports); got != tc.want {
				t.Errorf("UDPChannel = %q, want %q", got, tc.want)
			}
		})
	}
}
