// Package api serves frontdoor's HTTPS APIs: the launch API that clients call to start or
// resume a session, with the user's portal beside it (portal.go: sign-in, resources, the
// desktop in the browser), and the admin API (status, the secure-gateway toggle, /metrics)
// with the operator's console. It also keeps the node's certificates (certmagic, with an
// internal CA for lab and tests).
package api
