package proxy

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"math/big"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

func selfSigned(t testing.TB) tls.Certificate {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		DNSNames: []string{"a.example.com", "b.example.com", "x.example.com"}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// tlsBackend terminates TLS and answers with its name: the proxy in front only passes through.
func tlsBackend(t *testing.T, name string, cert tls.Certificate) netip.AddrPort {
	be := startTCP(t, func(c *net.TCPConn) {
		tc := tls.Server(c, &tls.Config{Certificates: []tls.Certificate{cert}})
		tc.SetDeadline(time.Now().Add(5 * time.Second))
		if tc.Handshake() != nil {
			return
		}
		tc.Write([]byte(name + " " + tc.ConnectionState().ServerName + "\n"))
	})
	return be.addr()
}

func gatherValue(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, lp := range m.GetLabel() {
				have[lp.GetName()] = lp.GetValue()
			}
			for k, v := range labels {
				if have[k] != v {
					continue next
				}
			}
			if m.Counter != nil {
				return m.GetCounter().GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	return 0
}

func TestTLSPassthroughRoutesByServerName(t *testing.T) {
	cert := selfSigned(t)
	a, b, d := tlsBackend(t, "A", cert), tlsBackend(t, "B", cert), tlsBackend(t, "D", cert)
	s := startServer(t, Config{
		Listeners: []Listener{{Name: "tls", Address: loopback, Protocol: TLS, Pool: "default", Routes: []Route{
			{ServerNames: []string{"a.example.com"}, Pool: "pa"},
			{ServerNames: []string{"*.example.com"}, Pool: "pb"},
		}}},
		Pools: []Pool{onePool("pa", a), onePool("pb", b), onePool("default", d)},
	}, Options{})
	for _, tc := range []struct{ name, sni, want string }{
		{"an exact name goes to its pool", "a.example.com", "A a.example.com"},
		{"a wildcard matches one more label", "x.example.com", "B x.example.com"},
		{"names are case-insensitive", "A.EXAMPLE.COM", "A A.EXAMPLE.COM"},
		{"no server name goes to the default pool", "", "D "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw := dial(t, s.Addr("tls"))
			c := tls.Client(raw, &tls.Config{ServerName: tc.sni, InsecureSkipVerify: true})
			if err := c.Handshake(); err != nil {
				t.Fatal(err)
			}
			if got := readLine(t, c); got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// record wraps a handshake message in TLS records of at most per bytes each.
func record(hs []byte, per int) []byte {
	var out []byte
	for len(hs) > 0 {
		n := min(per, len(hs))
		out = append(out, 0x16, 3, 1)
		out = binary.BigEndian.AppendUint16(out, uint16(n))
		out = append(out, hs[:n]...)
		hs = hs[n:]
	}
	return out
}

// clientHello builds a minimal ClientHello handshake message with the given server name and
// an extra padding extension of pad bytes.
func clientHello(name string, pad int) []byte {
	body := []byte{3, 3}
	body = append(body, make([]byte, 32)...)
	body = append(body, 0)                // session id
	body = append(body, 0, 2, 0x13, 0x01) // one cipher suite
	body = append(body, 1, 0)             // null compression
	var ext []byte
	if name != "" {
		sn := append([]byte{0}, binary.BigEndian.AppendUint16(nil, uint16(len(name)))...)
		sn = append(sn, name...)
		list := binary.BigEndian.AppendUint16(nil, uint16(len(sn)))
		list = append(list, sn...)
		ext = append(ext, 0, 0)
		ext = binary.BigEndian.AppendUint16(ext, uint16(len(list)))
		ext = append(ext, list...)
	}
	if pad > 0 {
		ext = append(ext, 0, 21)
		ext = binary.BigEndian.AppendUint16(ext, uint16(pad))
		ext = append(ext, make([]byte, pad)...)
	}
	body = binary.BigEndian.AppendUint16(body, uint16(len(ext)))
	body = append(body, ext...)
	hs := []byte{1, byte(len(body) >> 16), byte(len(body) >> 8), byte(len(body))}
	return append(hs, body...)
}

func TestTLSBadClientHellosAreDroppedAndCounted(t *testing.T) {
	be := startTCP(t, named("reached"))
	reg := prometheus.NewRegistry()
	s := startServer(t, Config{
		Listeners: []Listener{{Name: "tls", Address: loopback, Protocol: TLS, Pool: "p", MaxClientHello: 4096,
			HandshakeTimeout: time.Second}},
		Pools: []Pool{onePool("p", be.addr())},
	}, Options{Registry: reg})
	for _, tc := range []struct {
		name, reason string
		send         []byte
	}{
		{"plain text is not a handshake", "client_hello", []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")},
		{"a truncated body is malformed", "client_hello", record(clientHello("a.example.com", 0)[:30], 16384)},
		{"a bad host name is malformed", "client_hello", record(clientHello("a\x00b", 0), 16384)},
		{"a hello larger than the bound is refused", "client_hello_too_large", record(clientHello("a.example.com", 8000), 16384)},
		{"many small records over the bound are refused", "client_hello_too_large", record(clientHello("a.example.com", 6000), 100)},
		{"a header claiming a huge record is refused", "client_hello_too_large", []byte{0x16, 3, 1, 0x3f, 0xff}},
		{"a silent client times out", "client_hello", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := gatherValue(t, reg, "frontdoor_proxy_errors_total", map[string]string{"reason": tc.reason})
			c := dial(t, s.Addr("tls"))
			c.Write(tc.send)
			expectClosed(t, c)
			// The counter is bumped before the socket closes.
			if got := gatherValue(t, reg, "frontdoor_proxy_errors_total", map[string]string{"reason": tc.reason}); got != before+1 {
				t.Fatalf("errors_total{reason=%q} = %v, want %v", tc.reason, got, before+1)
			}
		})
	}
	t.Run("a hello split over records within the bound is routed", func(t *testing.T) {
		c := dial(t, s.Addr("tls"))
		c.Write(record(clientHello("a.example.com", 1000), 200))
		if got := readLine(t, c); got != "reached" {
			t.Fatalf("got %q, want reached", got)
		}
	})
}

func TestParseClientHelloTable(t *testing.T) {
	for _, tc := range []struct {
		name, want string
		hello      []byte
		bad        bool
	}{
		{name: "with a server name", hello: clientHello("Desktop.Example.com.", 0), want: "desktop.example.com"},
		{name: "without extensions", hello: clientHello("", 0), want: ""},
		{name: "padding only", hello: clientHello("", 10), want: ""},
		{name: "truncated", hello: clientHello("a.b", 0)[:40], bad: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseClientHello(tc.hello[4:])
			if (err != nil) != tc.bad || got != tc.want {
				t.Fatalf("got %q, %v; want %q, bad=%v", got, err, tc.want, tc.bad)
			}
		})
	}
}

func FuzzParseClientHello(f *testing.F) {
	f.Add(clientHello("a.example.com", 0)[4:])
	f.Add(clientHello("", 5)[4:])
	f.Fuzz(func(t *testing.T, b []byte) {
		name, err := parseClientHello(b)
		if err == nil && len(name) > 253 {
			t.Fatalf("name of %d bytes accepted", len(name))
		}
	})
}

func TestMatchName(t *testing.T) {
	for _, tc := range []struct {
		pattern, name string
		want          bool
	}{
		{"a.example.com", "a.example.com", true},
		{"*.example.com", "a.example.com", true},
		{"*.example.com", "example.com", false},
		{"*.example.com", "a.b.example.com", false},
		{"a.example.com", "b.example.com", false},
	} {
		if got := matchName(tc.pattern, tc.name); got != tc.want {
			t.Errorf("matchName(%q, %q) = %v, want %v", tc.pattern, tc.name, got, tc.want)
		}
	}
}
