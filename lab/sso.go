package lab

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/frontdoor-vdi/frontdoor/configs"
	"github.com/frontdoor-vdi/frontdoor/internal/devidp"
)

// SSOAddress is where the lab's identity provider listens (WithSSO): in hq's loopback block.
const SSOAddress = "127.1.0.250:9400"

// SSO is the lab's identity provider (`frontdoor lab --sso`): internal/devidp, whose page
// lists the lab's users to sign in as, without passwords.
type SSO struct{ p *devidp.Provider }

// Issuer is its issuer URL.
func (s *SSO) Issuer() string { return s.p.Issuer }

// Close stops it.
func (s *SSO) Close() error { return s.p.Close() }

// WithSSO starts the lab's identity provider and returns the site's YAML with
// site.auth.oidc signing in through it: the console's client (its redirect at the first admin
// listener) and connect's public one. Its users are the site's, with their user groups, and
// erin, whom the site does not list, in west-office.
func WithSSO(src []byte) (*SSO, []byte, error) {
	cfg, err := configs.Load("lab.yaml", src)
	if err != nil {
		return nil, nil, err
	}
	if cfg.Site.Auth.OIDC.Enabled() {
		return nil, nil, errors.New("--sso: the site configures site.auth.oidc already")
	}
	admin, launch := "", ""
	for _, n := range cfg.Nodes {
		for _, li := range n.Listeners {
			if li.Kind == "admin" && admin == "" {
				admin = li.Address.String()
			}
			if li.Kind == "launch" && launch == "" {
				launch = li.Address.String()
			}
		}
	}
	if admin == "" {
		return nil, nil, errors.New("--sso: the site has no admin listener for the console's sign-in")
	}
	var users []devidp.Identity
	for _, u := range cfg.Users {
		id := devidp.Identity{Subject: "lab-" + u.Name, Username: u.Name, AMR: []string{"pwd", "mfa"}}
		for _, g := range cfg.UserGroups {
			if slices.Contains(g.Members, u.Name) {
				id.Groups = append(id.Groups, g.Name)
			}
		}
		users = append(users, id)
	}
	if slices.ContainsFunc(cfg.UserGroups, func(g configs.UserGroup) bool { return g.Name == "west-office" }) {
		users = append(users, devidp.Identity{Subject: "lab-erin", Username: "erin", Groups: []string{"west-office"}, AMR: []string{"pwd"}})
	}
	redirect := "https://" + admin + configs.OIDCCallbackPath
	redirects := []string{redirect}
	portal := ""
	if launch != "" {
		portal = "https://" + launch + configs.PortalOIDCCallbackPath
		redirects = append(redirects, portal)
	}
	idp, err := devidp.New(SSOAddress, []devidp.Client{
		{ID: "frontdoor-lab-console", Redirects: redirects},
		{ID: "frontdoor-lab-connect", Redirects: []string{"http://127.0.0.1/callback"}},
	}, users)
	if err != nil {
		return nil, nil, fmt.Errorf("--sso: starting the lab's identity provider: %w", err)
	}
	// The provider's groups are named as the site's user groups, each mapped to itself;
	// every listed user is bound to its identity at the provider (oidc_subject).
	var groups []string
	for _, g := range cfg.UserGroups {
		groups = append(groups, fmt.Sprintf("%q: %q", g.Name, g.Name))
	}
	oidc := fmt.Sprintf("\nsite:\n  auth:\n    oidc: {issuer: %q, client_id: frontdoor-lab-console, native_client_id: frontdoor-lab-connect, redirect_url: %q, portal_redirect_url: %q, group_map: {%s}}\n",
		idp.Issuer, redirect, portal, strings.Join(groups, ", "))
	out := strings.Replace(string(src), "\nsite:\n", oidc, 1)
	if out == string(src) || strings.Count(out, "\n  auth:") > 1 {
		idp.Close()
		return nil, nil, errors.New("--sso: the site's YAML needs a top-level site: block without an auth: key, to add site.auth.oidc to")
	}
	for _, u := range cfg.Users {
		entry := "- {name: " + u.Name + ","
		if !strings.Contains(out, entry) || u.OIDCSubject != "" {
			idp.Close()
			return nil, nil, fmt.Errorf("--sso: user %s: the site's YAML needs its users as one-line entries ({name: %s, ...}) without oidc_subject, to bind them to the lab's provider", u.Name, u.Name)
		}
		out = strings.Replace(out, entry, fmt.Sprintf("- {name: %s, oidc_subject: %q,", u.Name, "lab-"+u.Name), 1)
	}
	return &SSO{idp}, []byte(out), nil
}
