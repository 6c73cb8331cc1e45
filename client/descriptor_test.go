package client

import (
	"strings"
	"testing"
)

func TestRoutesFollowTheDescriptor(t *testing.T) {
	for _, tc := range []struct {
		name string
		d    Descriptor
		want []string // route strings; nil when an error is wanted
		err  string
	}{
		{"gateways in order, every address",
			Descriptor{Mode: ModeGateway, Gateways: []GatewayEndpoint{{Name: "gw-1", Addresses: []string{"127.0.0.1", "::1"}}, {Name: "gw-2", Addresses: []string{"127.0.0.2:443"}}}},
			[]string{"gw-1 127.0.0.1", "gw-1 ::1", "gw-2 127.0.0.2"}, ""},
		{"a gateway address that is no IP is skipped",
			Descriptor{Mode: ModeGateway, Gateways: []GatewayEndpoint{{Name: "gw-1", Addresses: []string{"gw.example"}}, {Name: "gw-2", Addresses: []string{"127.0.0.2"}}}},
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
