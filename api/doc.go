// Package api serves frontdoor's HTTPS APIs: the launch API that clients call to start or
// resume a session, with the user's portal beside it (portal.go: sign-in, resources, the
// desktop in the browser), and the admin API (status, the secure-gateway toggle, /metrics)
// with the operator's console. Its certificates and TLS
// configs are package pki's.
package api
