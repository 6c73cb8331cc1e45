package client

import (
	"encoding/json"
	"net/netip"
	"strings"
	"testing"
)

func addrs(ss ...string) []netip.Addr {
	var out []netip.Addr
	for _, s := range ss {
		out = append(out, netip.MustParseAddr(s))
	}
	return out
}

// A gateway address that is not an IP address fails the descriptor's decoding: the launch
// API writes addresses, not names.
func TestADescriptorsGatewayAddressesAreIPAddresses(t *testing.T) {
	var d Descriptor
	if err := json.Unmarshal([]byte(`{"mode":"gateway","gateways":[{"name":"gw-1","addresses":["gw.example"]}]}`), &d); err == nil {
		t.Fatalf("a gateway address gw.example decoded: %+v", d)
	}
}

func TestRoutesFollowTheDescriptor(t *testing.T) {
	for _, tc := range []struct {
		name string
		d    Descriptor
		want []string // route strings; nil when an error is wanted
		err  string
	}{
		{"gateways in order, every address",
			Descriptor{Mode: ModeGateway, Gateways: []GatewayEndpoint{{Name: "gw-1", Addresses: addrs("127.0.0.1", "::1")}, {Name: "gw-2", Addresses: addrs("::ffff:127.0.0.2")}}},
			[]string{"gw-1 127.0.0.1", "gw-1 ::1", "gw-2 127.0.0.2"}, ""},
		{"an empty gateway address is skipped",
			Descriptor{Mode: ModeGateway, Gateways: []GatewayEndpoint{{Name: "gw-1", Addresses: []netip.Addr{{}}}, {Name: "gw-2", Addresses: addrs("127.0.0.2")}}},
			[]string{"gw-2 127.0.0.2"}, ""},
		{"direct goes to the machine", Descriptor{Mode: ModeDirect, Machine: "vda-9", Address: "127.0.0.9"}, []string{"direct 127.0.0.9"}, ""},
		{"direct without a machine name fails", Descriptor{Mode: ModeDirect, Address: "127.0.0.9"}, nil, "no machine name"},
		{"gateway mode without gateways fails", Descriptor{Mode: ModeGateway}, nil, "no usable gateway"},
		{"direct without an address fails", Descriptor{Mode: ModeDirect}, nil, "machine address"},
		{"an unknown mode fails", Descriptor{Mode: "tunnel"}, nil, `mode "tunnel"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs, err := routes(&tc.d)
			if tc.want == nil {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("routes: %v, want an error with %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range rs {
				got = append(got, r.String())
			}
			if strings.Join(got, "|") != strings.Join(tc.want, "|") {
				t.Fatalf("routes = %q, want %q", got, tc.want)
			}
		})
	}
}
