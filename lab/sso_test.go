package lab

import (
	"strings"
	"testing"

	"github.com/frontdoor-vdi/frontdoor/configs"
)

// WithSSO (lab --sso) adds site.auth.oidc for its identity provider to the lab site (the console's
// client redirecting to the admin listener, connect's public one), and refuses a site that
// configures its own.
func TestLabSSOConfiguresTheSite(t *testing.T) {
	src, err := configs.Shipped("lab.yaml")
	if err != nil {
		t.Fatal(err)
	}
	idp, out, err := WithSSO(src)
	if err != nil {
		t.Fatal(err)
	}
	defer idp.Close()
	cfg, err := configs.Load("lab.yaml", out)
	if err != nil {
		t.Fatalf("the site with SSO: %v", err)
	}
	o := cfg.Site.Auth.OIDC
	if o.Issuer != idp.Issuer() || o.ClientID != "frontdoor-lab-console" || o.Native() != "frontdoor-lab-connect" ||
		o.RedirectURL != "https://127.1.0.1:9090"+configs.OIDCCallbackPath {
		t.Fatalf("site.auth.oidc %+v", o)
	}
	// Single sign-on reaches a listed user only through its subject, and the provider's
	// groups count only through group_map.
	for _, u := range cfg.Users {
		if u.OIDCSubject != "lab-"+u.Name {
			t.Errorf("user %s is bound to subject %q, want the lab provider's lab-%s", u.Name, u.OIDCSubject, u.Name)
		}
	}
	if o.GroupMap["west-office"] != "west-office" {
		t.Errorf("group_map %v, want the provider's west-office mapped to the site's", o.GroupMap)
	}
	again := strings.Replace(string(src), "\nsite:\n", "\nsite:\n  auth: {oidc: {issuer: \"https://idp.example.com\", client_id: x}}\n", 1)
	if _, _, err := WithSSO([]byte(again)); err == nil || !strings.Contains(err.Error(), "already") {
		t.Fatalf("a site with its own oidc: %v, want a refusal", err)
	}
}
