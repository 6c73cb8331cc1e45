// Package tlspolicy is the TLS policy of every listener a node serves TLS on: the versions
// and cipher suites it offers, and the header that keeps browsers on HTTPS.
package tlspolicy

import (
	"crypto/tls"
	"net/http"
	"slices"
)

// suites are the TLS 1.2 cipher suites a node offers: forward-secret key exchange and an
// AEAD cipher (no CBC, no SHA-1 MAC, no RSA key exchange), as Mozilla's "intermediate"
// profile. TLS 1.3's suites are all AEAD and not configurable.
var suites = []uint16{
	tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384, tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256, tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
}

// Server sets c's policy: TLS 1.3, or TLS 1.2 with ECDHE and AEAD suites only, and no
// session tickets. A TLS 1.2 session resumed from a ticket has no forward secrecy: whoever
// takes the ticket key later reads it. Go keeps its ticket keys for 7 days (rotated daily)
// and tells clients a ticket is good for 7 days, which no setting changes. A full handshake
// costs about a quarter more CPU than a resumed one (BenchmarkHandshake, client and server
// together on loopback: 642 µs against 511 µs), and a browser's connections to a front door
// are few and long (HTTP/2, WebSockets).
func Server(c *tls.Config) {
	c.MinVersion = tls.VersionTLS12
	c.CipherSuites = slices.Clone(suites)
	c.SessionTicketsDisabled = true
}

// HSTS is the Strict-Transport-Security of every HTTPS answer: a browser that saw one comes
// back over HTTPS only, for a year (it ignores the header for a site reached by an IP
// address).
const HSTS = "max-age=31536000"

// Handler adds HSTS to every answer of h, and X-Content-Type-Options: nosniff (a browser
// takes an answer for its declared type only); pages add their own policies.
func Handler(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Strict-Transport-Security", HSTS)
		w.Header().Set("X-Content-Type-Options", "nosniff")
		h.ServeHTTP(w, r)
	})
}
