package logins

import (
	"net"
	"net/http"
	"net/netip"
)

// ClientAddr is the client's address as the socket sees it.
func ClientAddr(r *http.Request) netip.Addr {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return netip.Addr{}
	}
	a, _ := netip.ParseAddr(host)
	return a.Unmap()
}
