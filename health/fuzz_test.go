package health

import (
	"bytes"
	"net"
	"net/netip"
	"testing"
)

// replyConn is a probed port that answers with a fixed reply and takes anything written.
type replyConn struct {
	net.Conn
	r *bytes.Reader
}

func (c replyConn) Read(b []byte) (int, error)  { return c.r.Read(b) }
func (c replyConn) Write(b []byte) (int, error) { return len(b), nil }

// FuzzProbeReplies: what a probed port answers comes from whatever listens there; the judges
// of TLS hello and HTTP replies never panic, and take a reply only when it is one.
func FuzzProbeReplies(f *testing.F) {
	f.Add([]byte("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"))
	f.Add([]byte("HTTP/1.1 503 Service Unavailable\r\n\r\n"))
	f.Add([]byte{recordHandshake, 3, 3, 0, 10, typeServerHello, 0})
	f.Add([]byte{recordAlert, 3, 3, 0, 2, 2, 40})
	f.Add([]byte("SSH-2.0-OpenSSH\r\n"))
	addr := netip.MustParseAddrPort("127.0.0.1:443")
	f.Fuzz(func(t *testing.T, b []byte) {
		if helloReply(addr, b) == nil && (len(b) < helloReplyLen || b[0] != recordHandshake || b[5] != typeServerHello) {
			t.Fatalf("helloReply took % x", b)
		}
		c := &Check{Kind: KindHTTP, Method: "GET", Path: "/favicon.ico", ExpectStatus: 200}
		if probeHTTP(replyConn{r: bytes.NewReader(b)}, addr, c) == nil && !bytes.HasPrefix(b, []byte("HTTP/")) {
			t.Fatalf("probeHTTP took %q", b)
		}
	})
}
