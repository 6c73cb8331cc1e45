// Package api serves frontdoor's HTTPS APIs: the launch API that clients call to start or
// resume a session, and the admin API (status, the secure-gateway toggle, /metrics). It also
// keeps the node's certificates (certmagic, with an internal CA for lab and tests).
package api
