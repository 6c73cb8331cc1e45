package resume

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"math/big"
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// countingConn counts the writes made on it.
type countingConn struct {
	net.Conn
	writes atomic.Int64
}

func (c *countingConn) Write(b []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(b)
}

func selfSigned(t *testing.T) tls.Certificate {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "batch"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// A BatchedTLS hands a write of four records' bytes to its connection in one call, and the
// far end reads them as written; handshakes and alerts still go through.
func TestABatchedWriteIsOneCallOfItsConnection(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	cc := &countingConn{Conn: a}
	server := BatchTLS(cc, func(u net.Conn) *tls.Conn {
		return tls.Server(u, &tls.Config{Certificates: []tls.Certificate{selfSigned(t)}, MinVersion: tls.VersionTLS13})
	})
	client := tls.Client(b, &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS13})
	data := make([]byte, writeBatch)
	rand.Read(data)
	got := make(chan []byte, 1)
	go func() {
		buf := make([]byte, len(data))
		if _, err := io.ReadFull(client, buf); err != nil {
			t.Error(err)
		}
		got <- buf
	}()
	if err := server.Handshake(); err != nil {
		t.Fatal(err)
	}
	before := cc.writes.Load()
	if n, err := server.Write(data); err != nil || n != len(data) {
		t.Fatalf("Write: %d, %v", n, err)
	}
	if w := cc.writes.Load() - before; w != 1 {
		t.Errorf("a write of %d bytes took %d calls of the connection, want 1", len(data), w)
	}
	if !bytes.Equal(<-got, data) {
		t.Fatal("the far end read other bytes")
	}
}

// A first Write before any handshake makes the handshake, unbatched, then writes.
func TestABatchedWriteBeforeTheHandshakeCompletes(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	server := BatchTLS(a, func(u net.Conn) *tls.Conn {
		return tls.Server(u, &tls.Config{Certificates: []tls.Certificate{selfSigned(t)}, MinVersion: tls.VersionTLS13})
	})
	client := tls.Client(b, &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS13})
	got := make(chan []byte, 1)
	go func() {
		buf := make([]byte, 5)
		io.ReadFull(client, buf)
		got <- buf
	}()
	a.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := server.Write([]byte("hello")); err != nil {
		t.Fatalf("Write: %v", err)
	}
	if g := <-got; string(g) != "hello" {
		t.Fatalf("read %q", g)
	}
}
