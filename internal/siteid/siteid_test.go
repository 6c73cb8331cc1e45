package siteid

import (
	"crypto/x509"
	"net/url"
	"testing"
)

func TestOfReadsTheOneRoleACertificateNames(t *testing.T) {
	other, _ := url.Parse("spiffe://example.test/gateway/gw-1")
	for _, c := range []struct {
		name      string
		uris      []*url.URL
		role, who string
		ok        bool
	}{
		{"a gateway", []*url.URL{URI(RoleGateway, "gw-1")}, RoleGateway, "gw-1", true},
		{"a machine", []*url.URL{URI(RoleMachine, "vda-1")}, RoleMachine, "vda-1", true},
		{"a user's certificate names none", nil, "", "", false},
		{"another scheme names none", []*url.URL{other}, "", "", false},
		{"an empty name names none", []*url.URL{{Scheme: "frontdoor", Host: RoleGateway, Path: "/"}}, "", "", false},
		{"two roles name none", []*url.URL{URI(RoleGateway, "gw-1"), URI(RoleMachine, "vda-1")}, "", "", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			role, who, ok := Of(&x509.Certificate{URIs: c.uris})
			if role != c.role || who != c.who || ok != c.ok {
				t.Fatalf("Of = %q %q %v, want %q %q %v", role, who, ok, c.role, c.who, c.ok)
			}
		})
	}
	if !Is(&x509.Certificate{URIs: []*url.URL{URI(RoleGateway, "gw-1")}}, RoleGateway, "gw-1") {
		t.Fatal("Is does not recognise the gateway it names")
	}
	if URI(RoleMachine, "vda-1").String() != "frontdoor://machine/vda-1" {
		t.Fatalf("URI = %s", URI(RoleMachine, "vda-1"))
	}
}
