package logins

import (
	"crypto/md5"
	"io"
	"log/slog"
	"net/netip"
	"strings"
	"testing"

	"layeh.com/radius"
	"layeh.com/radius/rfc2865"
	"layeh.com/radius/rfc2869"

	"github.com/frontdoor-vdi/frontdoor/configs"
	"github.com/frontdoor-vdi/frontdoor/logins/radiustest"
)

// testRADIUSClient is a radiusClient of the tests' secret that requires signed answers.
func testRADIUSClient() *radiusClient {
	return &radiusClient{r: &configs.RADIUS{NASIdentifier: "lab"}, requireMA: true, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

// answer encodes an answer of code to the request req, signed as sign says.
func answer(t *testing.T, req []byte, code radius.Code, secret string, sign func(p *radius.Packet)) []byte {
	t.Helper()
	in, err := radius.Parse(req, []byte(secret))
	if err != nil {
		t.Fatal(err)
	}
	p := in.Response(code)
	if sign != nil {
		sign(p)
	}
	b, err := p.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// signed adds a Message-Authenticator of secret to an answer.
func signed(secret string) func(p *radius.Packet) {
	return func(p *radius.Packet) {
		rfc2869.MessageAuthenticator_Set(p, make([]byte, md5.Size))
		b, _ := p.MarshalBinary()
		rfc2869.MessageAuthenticator_Set(p, radiustest.MA(b, []byte(secret)))
	}
}

// An answer counts only when it is one to the request, of an answer's code, with a
// Response Authenticator and a Message-Authenticator of the secret; the request is signed
// with a Message-Authenticator as its first attribute.
func TestRADIUSAnswersAreCheckedBeforeTheyCount(t *testing.T) {
	c := testRADIUSClient()
	secret := []byte(radiustest.SecretText)
	req, err := c.request(secret, "alice", "123456", netip.MustParseAddr("127.0.0.1"))
	if err != nil {
		t.Fatal(err)
	}
	if p, _ := radius.Parse(req, secret); !radiustest.MACheck(req, p.Authenticator, secret) || rfc2865.UserPassword_GetString(p) != "123456" {
		t.Fatalf("the request's Message-Authenticator or password does not check")
	}
	for _, tt := range []struct {
		name   string
		answer func() []byte
		want   string // "" for an answer that counts
	}{
		{"a signed Access-Accept counts", func() []byte {
			return answer(t, req, radius.CodeAccessAccept, radiustest.SecretText, signed(radiustest.SecretText))
		}, ""},
		{"a signed Access-Challenge counts", func() []byte {
			return answer(t, req, radius.CodeAccessChallenge, radiustest.SecretText, signed(radiustest.SecretText))
		}, ""},
		{"an answer of another secret is refused", func() []byte { return answer(t, req, radius.CodeAccessAccept, "other", signed("other")) }, "Response Authenticator"},
		{"an unsigned answer is refused", func() []byte { return answer(t, req, radius.CodeAccessAccept, radiustest.SecretText, nil) }, "no Message-Authenticator"},
		{"a Message-Authenticator of another secret is refused", func() []byte { return answer(t, req, radius.CodeAccessAccept, radiustest.SecretText, signed("other")) }, "Message-Authenticator does not check"},
		{"two Message-Authenticators are refused", func() []byte {
			return answer(t, req, radius.CodeAccessAccept, radiustest.SecretText, func(p *radius.Packet) {
				signed(radiustest.SecretText)(p)
				p.Add(rfc2869.MessageAuthenticator_Type, make([]byte, md5.Size))
			})
		}, "more than one"},
		{"a short Message-Authenticator is refused", func() []byte {
			return answer(t, req, radius.CodeAccessAccept, radiustest.SecretText, func(p *radius.Packet) { p.Add(rfc2869.MessageAuthenticator_Type, make([]byte, 4)) })
		}, "wrong length"},
		{"an answer to another request is refused", func() []byte {
			b := answer(t, req, radius.CodeAccessAccept, radiustest.SecretText, signed(radiustest.SecretText))
			b[1]++
			return b
		}, "another request"},
		{"the request sent back is refused", func() []byte { return req }, "code"},
		{"a short packet is refused", func() []byte { return req[:19] }, "20 bytes"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := c.verify(tt.answer(), req, secret)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("verify: %v, want the answer taken", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("verify: %v, want an error saying %q", err, tt.want)
			}
		})
	}
	c.requireMA = false
	if _, err := c.verify(answer(t, req, radius.CodeAccessReject, radiustest.SecretText, nil), req, secret); err != nil {
		t.Fatalf("an unsigned answer where the site takes them: %v", err)
	}
	if _, err := c.verify(answer(t, req, radius.CodeAccessReject, radiustest.SecretText, signed("other")), req, secret); err == nil {
		t.Fatal("a badly signed answer where the site takes unsigned ones: taken")
	}
}

// FuzzRADIUSVerify: whatever comes back on the socket, verify neither panics nor takes an
// answer the secret did not sign.
func FuzzRADIUSVerify(f *testing.F) {
	c := testRADIUSClient()
	secret := []byte(radiustest.SecretText)
	req, err := c.request(secret, "alice", "123456", netip.MustParseAddr("127.0.0.1"))
	if err != nil {
		f.Fatal(err)
	}
	good := func(code radius.Code) []byte {
		p, _ := radius.Parse(req, secret)
		a := p.Response(code)
		signed(radiustest.SecretText)(a)
		b, _ := a.Encode()
		return b
	}
	f.Add(good(radius.CodeAccessAccept))
	f.Add(good(radius.CodeAccessChallenge))
	f.Add(req)
	f.Add([]byte{2, req[1], 0, 20})
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := c.verify(b, req, secret)
		if err != nil {
			return
		}
		if len(b) < 20 || !radius.IsAuthenticResponse(b[:int(b[2])<<8|int(b[3])], req, secret) || p.Identifier != req[1] {
			t.Fatalf("verify took %x", b)
		}
	})
}
