// Package siteid names the parties of a site in the certificates the site CA issues them:
// a gateway carries the URI SAN frontdoor://gateway/NAME and a machine's agent
// frontdoor://machine/NAME. A certificate with neither is a user's or a front door's.
package siteid

import (
	"crypto/x509"
	"net/url"
)

// Roles a certificate can name.
const (
	RoleGateway = "gateway"
	RoleMachine = "machine"
)

// URI returns the URI SAN of a party: frontdoor://ROLE/NAME.
func URI(role, name string) *url.URL {
	return &url.URL{Scheme: "frontdoor", Host: role, Path: "/" + name}
}

// Of returns the role and name a certificate names; ok is false when it names none (or more
// than one, which the site CA never issues).
func Of(cert *x509.Certificate) (role, name string, ok bool) {
	for _, u := range cert.URIs {
		if u.Scheme != "frontdoor" || (u.Host != RoleGateway && u.Host != RoleMachine) || len(u.Path) < 2 {
			continue
		}
		if ok {
			return "", "", false
		}
		role, name, ok = u.Host, u.Path[1:], true
	}
	return role, name, ok
}

// Is reports whether cert names the party role/name.
func Is(cert *x509.Certificate, role, name string) bool {
	r, n, ok := Of(cert)
	return ok && r == role && n == name
}
