package api

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/frontdoor-vdi/frontdoor/configs"
)

// The descriptor names the desktop's UDP channel for RDP, whose UDP transport rides it, and
// none for the builtin desktop, which has no UDP transport of its own.
func TestTheDescriptorNamesRDPsUDPChannel(t *testing.T) {
	for _, tc := range []struct {
		name string
		dk   configs.Desktop
		want *Channel
	}{
		{"rdp", configs.Desktop{Protocol: configs.DesktopRDP, Server: "127.0.0.1:3389", Channel: "8443/tcp"}, &Channel{Port: 8443, Proto: "udp"}},
		{"builtin", configs.Desktop{Protocol: configs.DesktopBuiltin, Channel: "8443/tcp"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, br := labSite(t, "")
			for i := range cfg.Groups {
				cfg.Groups[i].Desktop = tc.dk
			}
			launch, _ := labLaunch(cfg, br)
			req := httptest.NewRequest(http.MethodPost, "/v1/launch", strings.NewReader(`{"resource":"desktop","endpoint":"desk"}`))
			req.Header.Set("Content-Type", "application/json")
			req.RemoteAddr = "127.1.8.7:40000"
			req.SetBasicAuth("alice", "lab")
			rec := httptest.NewRecorder()
			launch.ServeHTTP(rec, req)
			var d Descriptor
			if err := json.Unmarshal(rec.Body.Bytes(), &d); rec.Code != http.StatusOK || err != nil || d.Desktop == nil {
				t.Fatalf("launch: %d %s (%v)", rec.Code, rec.Body, err)
			}
			if got := d.Desktop.UDPChannel; (got == nil) != (tc.want == nil) || got != nil && *got != *tc.want {
				t.Fatalf("the desktop's UDP channel %v, want %v", got, tc.want)
			}
		})
	}
}
