package logins

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/md5"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"sync"
	"time"

	"layeh.com/radius"
	"layeh.com/radius/rfc2865"
	"layeh.com/radius/rfc2869"

	"github.com/frontdoor-vdi/frontdoor/configs"
	"github.com/frontdoor-vdi/frontdoor/ticket"
)

// RADIUS (site.auth.radius): the launch and admin APIs ask the site's RADIUS servers
// (RFC 2865) with Access-Request packets of PAP — User-Name, User-Password, NAS-Identifier,
// NAS-Port-Type Virtual, Calling-Station-Id (the client's address) — signed with a
// Message-Authenticator (RFC 3579) as their first attribute. In role factor the password is
// the one-time passcode of OTPHeader, sent once the local password (or client certificate)
// checks; in role primary it is the Basic password of a covered user without a
// password_hash. The servers are asked in order: one that refuses the packets at once (port
// unreachable) or does not answer within the timeout, each of 1+retries sends, gives way to
// the next. An answer counts only when its Response Authenticator and its
// Message-Authenticator (required unless require_message_authenticator is false) check
// with the shared secret; any other is dropped and the wait goes on, so a forged or
// mis-keyed answer is no answer, and a server whose answers all fail is logged as having
// the wrong secret.
//
// Access-Accept gives the radius factor; Access-Reject fails the login like a wrong password
// (throttled alike); Access-Challenge (a next tokencode, a new PIN: a further round that the
// HTTP Basic login cannot carry) fails it too, counted alike, with a 401 that says so; no
// server answering (or the secret file unreadable) is answered 503 and counts no failure.
//
// A passcode is not recorded as used (ticket.Verifier.Once) as TOTP codes are: the RADIUS
// server is the one that knows its passcodes (RSA Authentication Manager and Duo refuse a
// passcode used once themselves, and a next-tokencode state is theirs alone), and in role primary the
// password is a reusable one that a record would lock out after its first login. What
// frontdoor adds is its login cache, which remembers a RADIUS login exactly as a TOTP one —
// user, password and code together, for the same minutes — so a passcode goes no further
// than a TOTP code does.

// Errors of the RADIUS checks.
var (
	// errRADIUSUnavailable: no RADIUS server answered (or the secret file cannot be read);
	// answered 503, no failure counted.
	errRADIUSUnavailable = errors.New("the RADIUS servers cannot be asked now; try again shortly")
	// ErrRADIUSChallenge: a RADIUS server answered Access-Challenge, a further prompt that
	// a login cannot answer; answered 401 and counted as a failed login.
	ErrRADIUSChallenge = errors.New("the RADIUS server asked a further question (Access-Challenge), which frontdoor does not support")
	// ErrRADIUSSecretMode is returned for a RADIUS secret file that others than its owner
	// may read.
	ErrRADIUSSecretMode = errors.New("the RADIUS secret file may be read by others than its owner (want mode 0600)")
)

// challengeError is ErrRADIUSChallenge with the server's Reply-Message, shown to the user.
type challengeError struct{ reply string }

func (e challengeError) Error() string {
	if e.reply == "" {
		return ErrRADIUSChallenge.Error() + ": log in with a passcode the server takes at once"
	}
	return fmt.Sprintf("%s (it said %q): log in with a passcode the server takes at once", ErrRADIUSChallenge, e.reply)
}

func (e challengeError) Unwrap() error { return ErrRADIUSChallenge }

// countsAsFailure says whether a refusal that is returned as it is (not ErrNoLogin) costs
// the login's source and user a token: an Access-Challenge does, an unavailable server not.
func countsAsFailure(err error) bool { return errors.Is(err, ErrRADIUSChallenge) }

// radiusVerdict is a RADIUS server's answer to a login.
type radiusVerdict int

const (
	radiusAccept radiusVerdict = iota
	radiusReject
	radiusChallenge
)

// radiusClient asks the site's RADIUS servers.
type radiusClient struct {
	cfg       *configs.Config
	r         *configs.RADIUS
	secret    *radiusSecret
	timeout   time.Duration
	retries   int
	requireMA bool
	log       *slog.Logger
}

// newRADIUSClient returns the client of cfg's site.auth.radius; nil when it has none.
func newRADIUSClient(cfg *configs.Config, log *slog.Logger) *radiusClient {
	r := cfg.Site.Auth.RADIUS
	if r == nil {
		return nil
	}
	c := &radiusClient{cfg: cfg, r: r, secret: &radiusSecret{path: r.SecretFile}, timeout: r.Timeout.D(),
		retries: configs.DefaultRADIUSRetries, requireMA: true, log: log.With("component", "radius")}
	if c.timeout <= 0 {
		c.timeout = configs.DefaultRADIUSTimeout
	}
	if r.Retries != nil {
		c.retries = *r.Retries
	}
	if r.RequireMessageAuthenticator != nil {
		c.requireMA = *r.RequireMessageAuthenticator
	}
	return c
}

// covers says whether the client's role applies to user.
func (c *radiusClient) covers(role, user string) bool {
	return c != nil && c.r.Role == role && c.r.Covers(c.cfg, user)
}

// radiusPrimary says whether u's password is the RADIUS servers' to check (role primary, a
// covered user without a password_hash).
func (a *Authenticator) radiusPrimary(u configs.User) bool {
	return u.PasswordHash == "" && a.radius.covers(configs.RADIUSRolePrimary, u.Name)
}

// checkPrimary asks the RADIUS servers for user's password: nil when they accept it,
// ErrNoLogin when they reject it, a challengeError or errRADIUSUnavailable.
func (a *Authenticator) checkPrimary(r *http.Request, user, pass string) error {
	v, err := a.radius.ask(r.Context(), user, pass, ClientAddr(r))
	switch {
	case err != nil:
		return err
	case v == radiusAccept:
		return nil
	}
	return ErrNoLogin
}

// checkSecond checks user's one-time code: the RADIUS servers' passcode when role factor
// covers the user, else a TOTP code (checkCode). It returns the factor the code proves, 0
// for a wrong one; the error is errCodeUnchecked, errRADIUSUnavailable or a challengeError.
func (a *Authenticator) checkSecond(r *http.Request, user, code string) (ticket.Factors, error) {
	if !a.radius.covers(configs.RADIUSRoleFactor, user) {
		ok, err := a.checkCode(user, code)
		if !ok || err != nil {
			return 0, err
		}
		return ticket.FactorTOTP, nil
	}
	v, err := a.radius.ask(r.Context(), user, code, ClientAddr(r))
	switch {
	case err != nil:
		return 0, err
	case v == radiusAccept:
		return ticket.FactorRADIUS, nil
	}
	return 0, nil
}

// ask sends user's password (a passcode in role factor) to the servers in turn and returns
// the first authentic answer: radiusAccept, radiusReject, or a challengeError; otherwise
// errRADIUSUnavailable, after logging why.
func (c *radiusClient) ask(ctx context.Context, user, password string, from netip.Addr) (radiusVerdict, error) {
	secret, err := c.secret.read()
	if err != nil {
		c.log.Error("reading the RADIUS secret: logins that need RADIUS fail", "file", c.r.SecretFile, "err", err)
		return 0, errRADIUSUnavailable
	}
	var errs []error
	for i, server := range c.r.Servers {
		req, err := c.request(secret, user, password, from)
		if err != nil {
			// A password RADIUS cannot carry (longer than 128 bytes) is a wrong one.
			c.log.Warn("a RADIUS login refused unsent", "user", user, "err", err)
			return radiusReject, nil
		}
		resp, err := c.exchange(ctx, server, req, secret)
		if err != nil {
			if ctx.Err() != nil {
				return 0, errRADIUSUnavailable
			}
			if i+1 < len(c.r.Servers) {
				c.log.Warn("a RADIUS server did not answer; asking the next", "server", server, "next", c.r.Servers[i+1], "user", user, "err", err)
			}
			errs = append(errs, fmt.Errorf("%s: %w", server, err))
			continue
		}
		switch resp.Code {
		case radius.CodeAccessAccept:
			c.log.Info("RADIUS accepted a login", "server", server, "user", user, "role", c.r.Role, "from", from)
			return radiusAccept, nil
		case radius.CodeAccessReject:
			c.log.Warn("RADIUS rejected a login", "server", server, "user", user, "role", c.r.Role, "from", from)
			return radiusReject, nil
		default: // exchange takes no other code
			reply := replyMessage(resp)
			c.log.Warn("RADIUS answered a login with a challenge, which frontdoor does not support: refused", "server", server, "user", user, "role", c.r.Role, "from", from, "reply", reply)
			return radiusChallenge, challengeError{reply: reply}
		}
	}
	c.log.Error("no RADIUS server answered: logins that need RADIUS are answered 503", "user", user, "err", errors.Join(errs...))
	return 0, errRADIUSUnavailable
}

// request builds the wire bytes of an Access-Request for user and password, signed with
// a Message-Authenticator as its first attribute.
func (c *radiusClient) request(secret []byte, user, password string, from netip.Addr) ([]byte, error) {
	p := radius.New(radius.CodeAccessRequest, secret)
	p.Add(rfc2869.MessageAuthenticator_Type, make(radius.Attribute, md5.Size))
	if err := rfc2865.UserName_SetString(p, user); err != nil {
		return nil, fmt.Errorf("user name: %w", err)
	}
	if err := rfc2865.UserPassword_SetString(p, password); err != nil {
		return nil, fmt.Errorf("password: %w", err)
	}
	if err := rfc2865.NASIdentifier_SetString(p, c.r.NASIdentifier); err != nil {
		return nil, fmt.Errorf("NAS-Identifier: %w", err)
	}
	rfc2865.NASPortType_Set(p, rfc2865.NASPortType_Value_Virtual)
	if from.IsValid() {
		rfc2865.CallingStationID_SetString(p, from.Unmap().String())
	}
	wire, err := p.Encode()
	if err != nil {
		return nil, err
	}
	at := 20 + 2 // the first attribute's value
	copy(wire[at:at+md5.Size], messageAuthenticator(wire, secret))
	return wire, nil
}

// messageAuthenticator is the HMAC-MD5 of a packet's wire bytes (whose Message-Authenticator
// value must be zero, and whose authenticator field the request's) keyed by the secret.
func messageAuthenticator(wire, secret []byte) []byte {
	h := hmac.New(md5.New, secret)
	h.Write(wire)
	return h.Sum(nil)
}

// exchange sends req to server, again after each timeout up to retries times, and returns
// the first authentic answer to it. An answer that is not authentic is dropped and the wait
// goes on; when the server's answers all failed, the error says the secret may be wrong.
func (c *radiusClient) exchange(ctx context.Context, server netip.AddrPort, req, secret []byte) (*radius.Packet, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "udp", server.String())
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.SetReadDeadline(time.Now()) })
	defer stop()
	buf := make([]byte, radius.MaxPacketLength)
	forged := 0
	var why error
	for range 1 + c.retries {
		if _, err := conn.Write(req); err != nil {
			return nil, err
		}
		conn.SetReadDeadline(time.Now().Add(c.timeout))
		for {
			n, err := conn.Read(buf)
			if errors.Is(err, os.ErrDeadlineExceeded) {
				break
			}
			if err != nil {
				return nil, err // the port is unreachable, say
			}
			resp, err := c.verify(buf[:n], req, secret)
			if err != nil {
				forged++
				why = err
				continue
			}
			return resp, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	if forged > 0 {
		return nil, fmt.Errorf("%d answers were not authentic (is the shared secret the server's?), the last: %w", forged, why)
	}
	return nil, fmt.Errorf("no answer to %d sends, %s apart", 1+c.retries, c.timeout)
}

// verify parses b as the answer to req and checks that it is one: its identifier, its code
// (Access-Accept, -Reject or -Challenge), its Response Authenticator and its
// Message-Authenticator (when it has one, and that it has one unless the site takes
// unsigned answers).
func (c *radiusClient) verify(b, req, secret []byte) (*radius.Packet, error) {
	p, err := radius.Parse(b, secret)
	if err != nil {
		return nil, err
	}
	b = b[:int(b[2])<<8|int(b[3])] // Parse checked the length
	switch {
	case p.Identifier != req[1]:
		return nil, errors.New("an answer to another request")
	case p.Code != radius.CodeAccessAccept && p.Code != radius.CodeAccessReject && p.Code != radius.CodeAccessChallenge:
		return nil, fmt.Errorf("an answer of code %s", p.Code)
	case !radius.IsAuthenticResponse(b, req, secret):
		return nil, errors.New("the Response Authenticator does not check")
	}
	at, n := attributeAt(b, rfc2869.MessageAuthenticator_Type)
	switch {
	case n > 1:
		return nil, errors.New("more than one Message-Authenticator")
	case n == 0 && c.requireMA:
		return nil, errors.New("no Message-Authenticator (set require_message_authenticator: false for a server too old to sign)")
	case n == 0:
		return p, nil
	case int(b[at-1]) != 2+md5.Size:
		return nil, errors.New("a Message-Authenticator of the wrong length")
	}
	signed := bytes.Clone(b)
	copy(signed[4:20], req[4:20])
	clear(signed[at : at+md5.Size])
	if !hmac.Equal(messageAuthenticator(signed, secret), b[at:at+md5.Size]) {
		return nil, errors.New("the Message-Authenticator does not check")
	}
	return p, nil
}

// attributeAt returns where the value of the first attribute of type t starts in the packet
// b, and how many attributes of type t it has.
func attributeAt(b []byte, t radius.Type) (at, n int) {
	for i := 20; i+2 <= len(b) && b[i+1] >= 2; i += int(b[i+1]) {
		if radius.Type(b[i]) == t {
			if n == 0 {
				at = i + 2
			}
			n++
		}
	}
	return at, n
}

// replyMessage is an answer's Reply-Message, printable and short, for a log line and the
// user.
func replyMessage(p *radius.Packet) string {
	msgs, _ := rfc2865.ReplyMessage_GetStrings(p)
	s := strings.Join(msgs, " ")
	s = strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return ' '
		}
		return r
	}, s)
	if len(s) > 200 {
		s = s[:200]
	}
	return strings.TrimSpace(strings.ToValidUTF8(s, ""))
}

// radiusSecret reads site.auth.radius.secret_file, again when it changes.
type radiusSecret struct {
	path string

	mu     sync.Mutex // guards mod, size, secret
	mod    time.Time
	size   int64
	secret []byte
}

// read returns the secret: the file's bytes without a trailing newline. It refuses a file
// that others than its owner may read (ErrRADIUSSecretMode) and an empty secret.
func (s *radiusSecret) read() ([]byte, error) {
	st, err := os.Stat(s.path)
	if err != nil {
		return nil, err
	}
	if err := privateMode(st.Mode()); err != nil {
		return nil, fmt.Errorf("%s: %w", s.path, ErrRADIUSSecretMode)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.secret == nil || !st.ModTime().Equal(s.mod) || st.Size() != s.size {
		b, err := ReadRADIUSSecret(s.path)
		if err != nil {
			return nil, err
		}
		s.secret, s.mod, s.size = b, st.ModTime(), st.Size()
	}
	return s.secret, nil
}

// ReadRADIUSSecret reads a RADIUS secret file (site.auth.radius.secret_file): the shared
// secret is its bytes, a trailing newline (and carriage return) dropped. It refuses a file
// that others than its owner may read (ErrRADIUSSecretMode) and an empty secret.
func ReadRADIUSSecret(path string) ([]byte, error) { return readSecret(path, ErrRADIUSSecretMode) }
