// Package radiustest runs RADIUS servers on loopback for tests, as a site's RSA, Duo or NPS
// server would answer, and the UDP ports of servers that are down.
package radiustest

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/md5"
	"errors"
	"io"
	"log"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"layeh.com/radius"
	"layeh.com/radius/rfc2865"
	"layeh.com/radius/rfc2869"
)

// SecretText is the shared secret of the tests' RADIUS servers.
const SecretText = "s3cret-shared-with-the-nas"

// Server is a RADIUS server of layeh.com/radius on loopback UDP, as a site's RSA,
// Duo or NPS server would answer: a user's passcode 123456 is accepted once (a second use is
// rejected, as those servers do), 999999 is challenged ("Enter the next tokencode"), the
// password "radius-pw" (role primary) is accepted as often as it comes, and anything else
// is rejected. It checks each request's Message-Authenticator (a request without one is
// dropped, as a server that requires it does) and signs its answers with one, unless
// unsigned.
type Server struct {
	Addr     netip.AddrPort // where it listens
	secret   []byte
	unsigned bool // answers carry no Message-Authenticator

	mu       sync.Mutex // guards requests, used, attrs
	requests int
	used     map[string]bool // users whose 123456 was accepted
	attrs    []string        // the last request's NAS-Identifier, Calling-Station-Id and NAS-Port-Type
}

// Start starts a Server with secret on 127.0.0.1, stopped when the test ends.
func Start(t *testing.T, secret string, unsigned bool) *Server {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{Addr: pc.LocalAddr().(*net.UDPAddr).AddrPort(), secret: []byte(secret), unsigned: unsigned, used: map[string]bool{}}
	srv := &radius.PacketServer{Handler: radius.HandlerFunc(s.serve), SecretSource: radius.StaticSecretSource(s.secret),
		ErrorLog: log.New(io.Discard, "", 0)}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(pc) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		if err := <-done; err != nil && !errors.Is(err, radius.ErrServerShutdown) {
			t.Errorf("the RADIUS server: %v", err)
		}
	})
	return s
}

// Count is how many requests the server answered.
func (s *Server) Count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests
}

func (s *Server) serve(w radius.ResponseWriter, r *radius.Request) {
	raw, err := r.Packet.MarshalBinary()
	if err != nil || !MACheck(raw, r.Authenticator, s.secret) {
		return // unsigned or signed with another secret: dropped
	}
	user := rfc2865.UserName_GetString(r.Packet)
	pass := rfc2865.UserPassword_GetString(r.Packet)
	s.mu.Lock()
	s.requests++
	s.attrs = []string{rfc2865.NASIdentifier_GetString(r.Packet), rfc2865.CallingStationID_GetString(r.Packet), rfc2865.NASPortType_Get(r.Packet).String()}
	code := radius.CodeAccessReject
	switch {
	case pass == "123456" && !s.used[user]:
		s.used[user] = true
		code = radius.CodeAccessAccept
	case pass == "radius-pw":
		code = radius.CodeAccessAccept
	case pass == "999999":
		code = radius.CodeAccessChallenge
	}
	s.mu.Unlock()
	resp := r.Response(code)
	if code == radius.CodeAccessChallenge {
		rfc2865.ReplyMessage_SetString(resp, "Enter the next tokencode")
		rfc2865.State_SetString(resp, "round-2")
	}
	if !s.unsigned {
		// The Message-Authenticator of an answer is over the answer with the request's
		// authenticator (RFC 3579 3.2); Encode then computes the Response Authenticator.
		rfc2869.MessageAuthenticator_Set(resp, make([]byte, md5.Size))
		b, _ := resp.MarshalBinary()
		rfc2869.MessageAuthenticator_Set(resp, MA(b, s.secret))
	}
	w.Write(resp)
}

// MA is HMAC-MD5 of a packet with its Message-Authenticator zeroed, written here apart
// from the code under test.
func MA(b, secret []byte) []byte {
	b = bytes.Clone(b)
	for i := 20; i+2 <= len(b); i += int(b[i+1]) {
		if b[i] == 80 {
			clear(b[i+2 : i+int(b[i+1])])
		}
	}
	h := hmac.New(md5.New, secret)
	h.Write(b)
	return h.Sum(nil)
}

// MACheck checks a request's Message-Authenticator, which must be its first attribute.
func MACheck(raw []byte, auth [16]byte, secret []byte) bool {
	if len(raw) < 38 || raw[20] != 80 || raw[21] != 18 {
		return false
	}
	return hmac.Equal(MA(raw, secret), raw[22:38])
}

// SilentUDP is a UDP port that takes datagrams and never answers: a server that is down
// behind a firewall that drops, not refuses.
func SilentUDP(t *testing.T) netip.AddrPort {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	return pc.LocalAddr().(*net.UDPAddr).AddrPort()
}

// ClosedUDP is a loopback UDP port nobody listens on: the kernel refuses datagrams to it.
func ClosedUDP(t *testing.T) netip.AddrPort {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := pc.LocalAddr().(*net.UDPAddr).AddrPort()
	pc.Close()
	return a
}

// StartNoCheck is a RADIUS server of secret that answers every request (it does not
// check Message-Authenticators, so a request of another secret gets a reject signed with
// its own).
func StartNoCheck(t *testing.T, secret string) *Server {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{Addr: pc.LocalAddr().(*net.UDPAddr).AddrPort(), secret: []byte(secret)}
	srv := &radius.PacketServer{SecretSource: radius.StaticSecretSource(s.secret), ErrorLog: log.New(io.Discard, "", 0),
		Handler: radius.HandlerFunc(func(w radius.ResponseWriter, r *radius.Request) {
			resp := r.Response(radius.CodeAccessReject)
			rfc2869.MessageAuthenticator_Set(resp, make([]byte, md5.Size))
			b, _ := resp.MarshalBinary()
			rfc2869.MessageAuthenticator_Set(resp, MA(b, s.secret))
			w.Write(resp)
		})}
	go srv.Serve(pc)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	})
	return s
}

// Attrs are the last request's NAS-Identifier, Calling-Station-Id and NAS-Port-Type.
func (s *Server) Attrs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.attrs
}

// Forget forgets the passcodes the server accepted, so that each may be used once more.
func (s *Server) Forget() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.used)
}
