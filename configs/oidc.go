package configs

import (
	"fmt"
	"net/netip"
	"net/url"
	"slices"
)

// OIDC configures login through an OpenID Connect identity provider (Entra ID, Okta,
// Keycloak, ADFS, Google...): the launch API takes the provider's ID tokens as bearer
// credentials, `frontdoor connect --sso` gets one with the authorization code flow and PKCE
// through a loopback redirect (RFC 8252), and the console signs in with the same flow through
// RedirectURL. A token's user claim names the user, and its groups claim the user groups:
// those of the site's user groups it names count as the user's (so home zones and
// entitlements by group keep working), and a user the configuration does not list is a user
// of the site when it names at least one. The login's factors are oidc, and mfa too when
// the token's amr claim names one of MFAMethods.
type OIDC struct {
	// Issuer is the provider's issuer URL, whose /.well-known/openid-configuration the
	// launch API reads at start. https, or http on a loopback address. Default: "" (no
	// OIDC login).
	Issuer string `yaml:"issuer"`
	// ClientID is the client registered at the provider for the console (and, unless
	// NativeClientID says otherwise, for `frontdoor connect`); ID tokens must name it as
	// their audience. Required with Issuer.
	ClientID string `yaml:"client_id"`
	// ClientSecretFile holds the console client's secret, for providers that register it as
	// a confidential client (one line; mode 0600 or stricter). Default: "" (a public client:
	// PKCE alone proves the code's requester).
	ClientSecretFile string `yaml:"client_secret_file"`
	// NativeClientID is the public client `frontdoor connect` uses, with a loopback redirect
	// URI (http://127.0.0.1/callback, any port); its ID tokens are taken too. Default:
	// ClientID.
	NativeClientID string `yaml:"native_client_id"`
	// RedirectURL is the console's redirect URI registered at the provider: the console's
	// address with the path /console/oidc/callback. Default: "" (the console signs in with
	// passwords only).
	RedirectURL string `yaml:"redirect_url"`
	// PortalRedirectURL is the user's portal's redirect URI, registered at the provider for
	// ClientID as well: the portal's address (a launch listener) with the path
	// /portal/oidc/callback. Default: "" (the portal signs in with passwords and client
	// certificates only).
	PortalRedirectURL string `yaml:"portal_redirect_url"`
	// Scopes are asked for besides openid. Default: [profile, email].
	Scopes []string `yaml:"scopes"`
	// UserClaim is the ID token's claim that names a user the configuration does not list
	// (one whose user groups come from the token); listed users sign in by their
	// oidc_subject only, and a name that is a listed user's (compared as RFC 8265
	// usernames, case-folded) is refused. Default: preferred_username.
	UserClaim string `yaml:"user_claim"`
	// GroupsClaim is the claim that lists the user's groups (a list of strings). Default:
	// groups.
	GroupsClaim string `yaml:"groups_claim"`
	// GroupMap maps the provider's group names (or IDs, as Entra ID sends them) to the
	// site's user groups: the only groups a token vouches for; a group it does not map
	// counts for nothing. Default: none.
	GroupMap map[string]string `yaml:"group_map"`
	// MFAMethods are the amr values (RFC 8176) that make the login's factors include mfa.
	// Default: [mfa, otp, hwk, swk, sc].
	MFAMethods []string `yaml:"mfa_methods"`
}

// Enabled reports whether OIDC login is configured.
func (o OIDC) Enabled() bool { return o.Issuer != "" }

// Native returns the client ID of `frontdoor connect`.
func (o OIDC) Native() string {
	if o.NativeClientID != "" {
		return o.NativeClientID
	}
	return o.ClientID
}

func (o *OIDC) setDefaults() {
	if !o.Enabled() {
		return
	}
	if o.Scopes == nil {
		o.Scopes = []string{"profile", "email"}
	}
	setStr(&o.UserClaim, "preferred_username")
	setStr(&o.GroupsClaim, "groups")
	if o.MFAMethods == nil {
		o.MFAMethods = []string{"mfa", "otp", "hwk", "swk", "sc"}
	}
}

func (k *checker) validateOIDC(o OIDC) {
	const p = "site.auth.oidc"
	if !o.Enabled() {
		if o.ClientID != "" || o.RedirectURL != "" || o.PortalRedirectURL != "" || o.ClientSecretFile != "" || o.NativeClientID != "" {
			k.errf(p+".issuer", "required with the other oidc keys")
		}
		return
	}
	if err := checkProviderURL(o.Issuer); err != nil {
		k.errf(p+".issuer", "%v", err)
	}
	if o.ClientID == "" {
		k.errf(p+".client_id", "required with issuer")
	}
	k.checkRedirect(p+".redirect_url", o.RedirectURL, OIDCCallbackPath, "the console")
	k.checkRedirect(p+".portal_redirect_url", o.PortalRedirectURL, PortalOIDCCallbackPath, "the portal")
	if slices.Contains(o.Scopes, "openid") {
		k.errf(p+".scopes", "openid is always asked for: list only the others")
	}
	for from, to := range o.GroupMap {
		if !slices.ContainsFunc(k.c.UserGroups, func(g UserGroup) bool { return g.Name == to }) {
			k.errf(p+".group_map", "%q maps to %q, which is not a user group", from, to)
		}
	}
}

// OIDCCallbackPath is the path of the console's redirect URI (OIDC.RedirectURL).
const OIDCCallbackPath = "/console/oidc/callback"

// PortalOIDCCallbackPath is the path of the portal's redirect URI (OIDC.PortalRedirectURL).
const PortalOIDCCallbackPath = "/portal/oidc/callback"

// checkRedirect checks a redirect URI at key (empty: none): absolute, https (http only on a
// loopback address), with the path where who takes the provider's answer.
func (k *checker) checkRedirect(key, uri, path, who string) {
	if uri == "" {
		return
	}
	u, err := url.Parse(uri)
	switch {
	case err != nil || u.Host == "":
		k.errf(key, "%q is not an absolute URL", uri)
	case u.Scheme != "https" && !(u.Scheme == "http" && isLoopbackHost(u.Hostname())):
		k.errf(key, "%q must be https (http only on a loopback address)", uri)
	case u.Path != path:
		k.errf(key, "%q must have the path %s, where %s takes the provider's answer", uri, path, who)
	}
}

// checkProviderURL accepts an https URL, or an http one on a loopback address.
func checkProviderURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("%q is not an issuer URL (scheme, host, optional path)", s)
	}
	if u.Scheme != "https" && !(u.Scheme == "http" && isLoopbackHost(u.Hostname())) {
		return fmt.Errorf("%q must be https (http only on a loopback address)", s)
	}
	return nil
}

func isLoopbackHost(h string) bool {
	ip, err := netip.ParseAddr(h)
	return h == "localhost" || (err == nil && ip.IsLoopback())
}
