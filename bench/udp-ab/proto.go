//go:build linux

package main

// The three transports under test, each as an echo server and a client link:
//   plain — UDP datagrams as the display channels carry them today;
//   dtls  — DTLS 1.2 (pion/dtls v3), TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, extended master
//           secret, connection IDs on (the server hands out 8-byte CIDs, the client sends them),
//           pion's own HelloVerifyRequest cookie exchange;
//   quic  — QUIC DATAGRAM frames (RFC 9221, quic-go), Retry on every new connection.

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/pion/dtls/v3"
	"github.com/quic-go/quic-go"
)

const alpn = "frontdoor-bench"

// certs is the server's certificate and the pool that trusts it.
type certs struct {
	cert tls.Certificate
	pool *x509.CertPool
}

// writeCerts makes an ECDSA P-256 self-signed certificate for 127.0.0.1 (the key type the
// site CA issues) into dir, for the server and client processes to share.
func writeCerts(dir string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "udp-ab"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:              []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return err
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "cert.pem"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "key.pem"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600)
}

func loadCerts(dir string) (*certs, error) {
	c, err := tls.LoadX509KeyPair(filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem"))
	if err != nil {
		return nil, err
	}
	leaf, err := x509.ParseCertificate(c.Certificate[0])
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return &certs{cert: c, pool: pool}, nil
}

func dtlsServerOptions(c *certs) []dtls.ServerOption {
	return []dtls.ServerOption{
		dtls.WithCertificates(c.cert),
		dtls.WithCipherSuites(dtls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256),
		dtls.WithExtendedMasterSecret(dtls.RequireExtendedMasterSecret),
		dtls.WithConnectionIDGenerator(dtls.RandomCIDGenerator(8)),
		dtls.WithMTU(1400),
	}
}

func dtlsClientOptions(c *certs) []dtls.ClientOption {
	return []dtls.ClientOption{
		dtls.WithRootCAs(c.pool),
		dtls.WithServerName("localhost"),
		dtls.WithCipherSuites(dtls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256),
		dtls.WithExtendedMasterSecret(dtls.RequireExtendedMasterSecret),
		dtls.WithConnectionIDGenerator(dtls.OnlySendCIDGenerator()),
		dtls.WithMTU(1400),
	}
}

func quicConfig() *quic.Config {
	return &quic.Config{EnableDatagrams: true, MaxIdleTimeout: 10 * time.Second, HandshakeIdleTimeout: 5 * time.Second}
}

// quicClientTLS: Go's default key exchange (X25519MLKEM768 first in Go 1.26), or X25519 alone.
func quicClientTLS(c *certs, x25519Only bool) *tls.Config {
	t := &tls.Config{RootCAs: c.pool, ServerName: "localhost", NextProtos: []string{alpn}, MinVersion: tls.VersionTLS13}
	if x25519Only {
		t.CurvePreferences = []tls.CurveID{tls.X25519}
	}
	return t
}

// link is one client's channel to the echo server.
type link interface {
	send(b []byte) error
	recv(b []byte) (int, error)
	close()
}

type plainLink struct{ c *net.UDPConn }

func (l plainLink) send(b []byte) error        { _, err := l.c.Write(b); return err }
func (l plainLink) recv(b []byte) (int, error) { return l.c.Read(b) }
func (l plainLink) close()                     { l.c.Close() }

type dtlsLink struct{ c *dtls.Conn }

func (l dtlsLink) send(b []byte) error        { _, err := l.c.Write(b); return err }
func (l dtlsLink) recv(b []byte) (int, error) { return l.c.Read(b) }
func (l dtlsLink) close()                     { l.c.Close() }

type quicLink struct {
	c  *quic.Conn
	tr *quic.Transport
}

func (l quicLink) send(b []byte) error { return l.c.SendDatagram(b) }
func (l quicLink) recv(b []byte) (int, error) {
	d, err := l.c.ReceiveDatagram(context.Background())
	if err != nil {
		return 0, err
	}
	return copy(b, d), nil
}
func (l quicLink) close() {
	l.c.CloseWithError(0, "")
	l.tr.Close()
	l.tr.Conn.Close()
}

// dial opens a link of proto to addr, handshake included.
func dial(proto, addr string, c *certs) (link, error) {
	ra, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	switch proto {
	case "plain":
		uc, err := net.DialUDP("udp", nil, ra)
		if err != nil {
			return nil, err
		}
		return plainLink{uc}, nil
	case "dtls":
		uc, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			return nil, err
		}
		dc, err := dtls.ClientWithOptions(uc, ra, dtlsClientOptions(c)...)
		if err != nil {
			uc.Close()
			return nil, err
		}
		if err := dc.HandshakeContext(ctx); err != nil {
			dc.Close()
			return nil, err
		}
		return dtlsLink{dc}, nil
	case "quic", "quic-x25519":
		uc, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			return nil, err
		}
		tr := &quic.Transport{Conn: uc}
		qc, err := tr.Dial(ctx, ra, quicClientTLS(c, proto == "quic-x25519"), quicConfig())
		if err != nil {
			tr.Close()
			uc.Close()
			return nil, err
		}
		return quicLink{qc, tr}, nil
	}
	return nil, fmt.Errorf("unknown proto %q", proto)
}

// serve runs proto's echo server on addr until the process ends; ready gets the bound address.
// Servers of dtls and quic validate every client's address first (HelloVerifyRequest, Retry).
// dtls-sl is not an echo server: it is a stateless HelloVerifyRequest responder (see flood.go).
func serve(proto, addr string, c *certs, hsTimeout time.Duration, ready func(string)) error {
	la, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return err
	}
	switch proto {
	case "plain":
		uc, err := net.ListenUDP("udp", la)
		if err != nil {
			return err
		}
		ready(uc.LocalAddr().String())
		buf := make([]byte, 2048)
		for {
			n, from, err := uc.ReadFromUDPAddrPort(buf)
			if err != nil {
				return err
			}
			uc.WriteToUDPAddrPort(buf[:n], from)
		}
	case "dtls-sl":
		uc, err := net.ListenUDP("udp", la)
		if err != nil {
			return err
		}
		ready(uc.LocalAddr().String())
		return statelessHVR(uc)
	case "dtls":
		ln, err := dtls.ListenWithOptions("udp", la, dtlsServerOptions(c)...)
		if err != nil {
			return err
		}
		ready(ln.Addr().String())
		for {
			nc, err := ln.Accept()
			if err != nil {
				return err
			}
			go func() {
				defer nc.Close()
				dc := nc.(*dtls.Conn)
				ctx, cancel := context.WithTimeout(context.Background(), hsTimeout)
				err := dc.HandshakeContext(ctx)
				cancel()
				if err != nil {
					return
				}
				buf := make([]byte, 2048)
				for {
					n, err := dc.Read(buf)
					if err != nil {
						return
					}
					if _, err := dc.Write(buf[:n]); err != nil {
						return
					}
				}
			}()
		}
	case "quic":
		uc, err := net.ListenUDP("udp", la)
		if err != nil {
			return err
		}
		tr := &quic.Transport{Conn: uc, VerifySourceAddress: func(net.Addr) bool { return true }}
		ln, err := tr.Listen(&tls.Config{Certificates: []tls.Certificate{c.cert}, NextProtos: []string{alpn}, MinVersion: tls.VersionTLS13}, quicConfig())
		if err != nil {
			return err
		}
		ready(uc.LocalAddr().String())
		for {
			qc, err := ln.Accept(context.Background())
			if err != nil {
				return err
			}
			go func() {
				for {
					d, err := qc.ReceiveDatagram(context.Background())
					if err != nil {
						return
					}
					if err := qc.SendDatagram(d); err != nil {
						var tl *quic.DatagramTooLargeError
						if errors.As(err, &tl) {
							continue
						}
						return
					}
				}
			}()
		}
	}
	return fmt.Errorf("unknown proto %q", proto)
}
