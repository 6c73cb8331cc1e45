// Package pki keeps a site's certificates: the site CA (made, loaded, rotated in three
// steps), the certificates of the site's parties (gateways, machines) and of the node's
// listeners (from the internal CA or an ACME CA, by certmagic, stored in the site store), the
// one TLS policy every HTTPS listener serves, and the operator's CAs whose client
// certificates log users in, with their CRLs.
package pki
