// Package ticket signs and checks the tickets that let a client open a session's channels on a
// secure gateway: short-lived launch tickets and longer-lived reconnect tickets, both signed with
// the site's Ed25519 key.
//
// A launch ticket names one session, one machine and the channels (port/protocol) it opens; it
// expires after about a minute and each of its channels can be opened once (a replay of the
// same channel is refused). A reconnect ticket is bound to one session and lives for hours; a
// gateway that admits a channel hands out the next one (Signer.Reissue, one generation later),
// and once a ticket of a later generation was used the earlier ones are refused (Ledger's
// Supersede). A ticket can be used again until then, so a client whose answer was lost with a
// gateway goes on with the one it holds. Direct-mode reconnect tickets, which no gateway
// rotates, are used again and again. Any ticket stops working when its session is revoked
// (logoff, steal).
//
// A ticket seals the login that led to it (Claims.User, Factors, AuthTime): every channel it
// opens inherits who logged in, how and when, and a reissued reconnect ticket keeps them (a
// rotation is no new login). Past Claims.LoginExpires (the login's time plus the site's
// factor lifetime) a ticket opens nothing (ErrLoginExpired): the client must launch again,
// with a new login.
//
// A token is URL-safe base64 (no padding), at most MaxLen characters, of: version (1 byte, 4),
// the signing key's id (8: KeyIDOf), kind (1), ticket ID (16), issued and expires (Unix
// milliseconds, 8 each), the generation (4), the login's time and its expiry (Unix
// milliseconds, 8 each, 0 for none), the login's factors (1, a Factors bit set), then
// session, machine, mode and user as length-prefixed strings, the channel list, and a 64-byte
// Ed25519 signature over everything before it. The site may hold several keys (KeySet): a new
// one is rolled in while tickets signed with the old one still live. Version 3 tokens (no
// login), version 2 tokens (no generation either) and version 1 tokens (no key id either)
// are still read, so that tickets in flight across an upgrade keep working; they carry no
// login, and NoLoginLifetime limits them (and the reconnect tickets reissued from them). A token's structure is checked before its
// signature: malformed input costs no signature check.
package ticket

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"
)

// Kind tells launch tickets from reconnect tickets.
type Kind uint8

// The ticket kinds.
const (
	Launch    Kind = 1
	Reconnect Kind = 2
	// Enrol lets a machine's agent obtain its certificate once (Verifier.CheckEnrolment);
	// it opens no channel.
	Enrol Kind = 3
	// LaunchFile is a launch file's (LaunchFileDoc): it launches one resource once, as
	// the login that made it (Verifier.CheckLaunchFile); it opens no channel. Its Session
	// names the resource.
	LaunchFile Kind = 4
)

// String names the kind.
func (k Kind) String() string {
	switch k {
	case Launch:
		return "launch"
	case Reconnect:
		return "reconnect"
	case Enrol:
		return "enrol"
	case LaunchFile:
		return "launch file"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Channel is one port and protocol of a session, e.g. 8443/tcp.
type Channel struct {
	Port  uint16
	Proto string // "tcp" or "udp"
}

// String formats the channel as "8443/tcp".
func (c Channel) String() string { return fmt.Sprintf("%d/%s", c.Port, c.Proto) }

// The modes a ticket names (Claims.Mode).
const (
	// ModeGateway: the session's channels pass through a gateway, which alone may present
	// its tickets at the machine.
	ModeGateway = "gateway"
	// ModeDirect: the client connects to the machine itself.
	ModeDirect = "direct"
)

// Claims are what a ticket says.
type Claims struct {
	Kind     Kind
	Key      KeyID     // the signing key's id; zero for a version 1 ticket
	ID       [16]byte  // random, unique per ticket
	Session  string    // the session the ticket opens
	Machine  string    // the machine the session runs on
	Mode     string    // ModeGateway or ModeDirect
	Channels []Channel // the channels it may open; empty for reconnect tickets means all
	// Gen counts the rotations of a reconnect ticket's chain (Signer.Reissue): 0 for the
	// tickets of a launch. A gateway-mode reconnect ticket is refused once a ticket of a later
	// generation of its session was used.
	Gen     uint32
	Issued  time.Time
	Expires time.Time
	// User is who logged in for the launch; "" in tickets of version 3 and older and in
	// enrolment tickets.
	User string
	// Factors are the factors that login used.
	Factors Factors
	// AuthTime is when that login was checked; zero when the ticket names no login. A
	// reissued reconnect ticket keeps it.
	AuthTime time.Time
	// LoginExpires is when the login stops vouching for the session: from then on Check
	// refuses the ticket with ErrLoginExpired. Zero: no login sealed, and NoLoginLifetime
	// after Issued instead. A reissued reconnect ticket keeps it.
	LoginExpires time.Time
	// Reused is set by Verifier.Check, not signed: the ticket is a gateway-mode reconnect
	// ticket of the session's latest generation used already (a client whose answer was
	// lost presents it again; so would someone who took it).
	Reused bool
}

// Errors of Check. Callers log them and tell the client only "denied".
var (
	ErrMalformed    = errors.New("malformed ticket")
	ErrSignature    = errors.New("bad ticket signature")
	ErrExpired      = errors.New("ticket expired")
	ErrNotYetValid  = errors.New("ticket not yet valid")
	ErrReplayed     = errors.New("launch ticket already used for this channel")
	ErrWrongMachine = errors.New("ticket is for another machine")
	ErrWrongChannel = errors.New("ticket does not name this channel")
	ErrRevoked      = errors.New("session revoked")
	ErrSuperseded   = errors.New("a newer reconnect ticket of the session was used")
	ErrWrongKind    = errors.New("wrong ticket kind")
	ErrUnknownKey   = errors.New("ticket signed with a key the site does not hold")
	// ErrLoginExpired: the ticket is good, but the login it seals is older than the site's
	// factor lifetime; the client must log in again (a new launch). Gateways and agents
	// answer it with StatusLoginExpired, not StatusDenied, so that the client can say so.
	ErrLoginExpired = errors.New("the login's factor lifetime is over: log in again")
	// ErrTooLong is returned by Issue and Reissue for claims whose token would be longer
	// than MaxLen.
	ErrTooLong = errors.New("ticket longer than MaxLen")
)

const (
	version   = 4
	versionV3 = 3 // without a login
	versionV2 = 2 // without a generation
	versionV1 = 1 // without a key id or a generation
	// MaxLen bounds a token's length; longer input is refused before decoding.
	MaxLen   = 1024
	maxField = 255
	// clockSkew is how far in the future an issue time may be (nodes' clocks differ).
	clockSkew = 5 * time.Second
)

var enc = base64.RawURLEncoding.Strict()

// Signer issues tickets with the site's signing key.
type Signer struct {
	key atomic.Pointer[ed25519.PrivateKey]
	now func() time.Time
}

// NewSigner returns a Signer for key; now is the clock (time.Now when nil).
func NewSigner(key ed25519.PrivateKey, now func() time.Time) *Signer {
	if now == nil {
		now = time.Now
	}
	s := &Signer{now: now}
	s.SetKey(key)
	return s
}

// SetKey makes key the signing key from now on (a key rotation).
func (s *Signer) SetKey(key ed25519.PrivateKey) { s.key.Store(&key) }

// KeyID returns the id of the signing key.
func (s *Signer) KeyID() KeyID { return KeyIDOf((*s.key.Load()).Public().(ed25519.PublicKey)) }

// Issue signs c for ttl from now, filling in ID, Issued and Expires.
func (s *Signer) Issue(c Claims, ttl time.Duration) (string, Claims, error) {
	return s.issueAt(c, s.now(), ttl)
}

// IssueLaunch issues a launch's two tickets from c (its Kind is ignored): the launch ticket,
// good for ttl, and the session's first reconnect ticket, good for reconnectTTL, both issued
// at one reading of the clock — a chain's rotations keep its issue time and count up its
// generation, so a reconnect ticket issued a millisecond after the launch ticket would rank
// above every ticket rotated from the launch's and never be superseded. It returns the launch
// ticket's claims.
func (s *Signer) IssueLaunch(c Claims, ttl, reconnectTTL time.Duration) (launch, reconnect string, lc Claims, err error) {
	now := s.now()
	c.Kind = Launch
	if launch, lc, err = s.issueAt(c, now, ttl); err != nil {
		return "", "", lc, err
	}
	c.Kind = Reconnect
	if reconnect, _, err = s.issueAt(c, now, reconnectTTL); err != nil {
		return "", "", lc, err
	}
	return launch, reconnect, lc, nil
}

// issueAt issues c as of now.
func (s *Signer) issueAt(c Claims, now time.Time, ttl time.Duration) (string, Claims, error) {
	if c.Kind != Launch && c.Kind != Reconnect && c.Kind != Enrol && c.Kind != LaunchFile {
		return "", c, fmt.Errorf("issuing ticket: %w: %v", ErrWrongKind, c.Kind)
	}
	if len(c.Session) > maxField || len(c.Machine) > maxField || len(c.Mode) > maxField || len(c.User) > maxField || len(c.Channels) > 32 {
		return "", c, fmt.Errorf("issuing ticket: field too long")
	}
	if _, err := rand.Read(c.ID[:]); err != nil {
		return "", c, fmt.Errorf("issuing ticket: %w", err)
	}
	c.Issued = now.Truncate(time.Millisecond)
	c.Expires = now.Add(ttl).Truncate(time.Millisecond)
	c.AuthTime, c.LoginExpires = sealTime(c.AuthTime), sealTime(c.LoginExpires)
	tok, c, err := s.sign(c)
	if err != nil {
		return "", c, fmt.Errorf("issuing ticket: %w", err)
	}
	return tok, c, nil
}

// sealTime is t as a token holds it: to the millisecond, zero when before 1970 (a token
// holds no earlier time).
func sealTime(t time.Time) time.Time {
	if t.UnixMilli() <= 0 {
		return time.Time{}
	}
	return t.Truncate(time.Millisecond)
}

// sign names the current key in c and signs it.
func (s *Signer) sign(c Claims) (string, Claims, error) {
	key := *s.key.Load()
	c.Key = KeyIDOf(key.Public().(ed25519.PublicKey))
	b := marshal(c)
	b = append(b, ed25519.Sign(key, b)...)
	if enc.EncodedLen(len(b)) > MaxLen {
		return "", c, fmt.Errorf("%w: %d bytes", ErrTooLong, enc.EncodedLen(len(b)))
	}
	return enc.EncodeToString(b), c, nil
}

// Reissue signs the next reconnect ticket of the session of c, whose ticket a gateway just
// took: the next generation, a new ID, the current key, the same session, machine, mode and
// channels, expiring at expires. It keeps c's issue time, so that a revocation of the
// tickets issued before a time (a steal's) reaches the whole chain of an endpoint's tickets,
// and c's login (user, factors, its time and expiry): a rotation is no new login.
func (s *Signer) Reissue(c Claims, expires time.Time) (string, Claims, error) {
	c.Kind = Reconnect
	c.Gen++
	if _, err := rand.Read(c.ID[:]); err != nil {
		return "", c, fmt.Errorf("reissuing ticket: %w", err)
	}
	c.Expires = expires.Truncate(time.Millisecond)
	tok, c, err := s.sign(c)
	if err != nil {
		return "", c, fmt.Errorf("reissuing ticket: %w", err)
	}
	return tok, c, nil
}

func marshal(c Claims) []byte {
	b := make([]byte, 0, 136)
	b = append(b, version)
	b = append(b, c.Key[:]...)
	b = append(b, byte(c.Kind))
	b = append(b, c.ID[:]...)
	b = binary.BigEndian.AppendUint64(b, uint64(c.Issued.UnixMilli()))
	b = binary.BigEndian.AppendUint64(b, uint64(c.Expires.UnixMilli()))
	b = binary.BigEndian.AppendUint32(b, c.Gen)
	b = binary.BigEndian.AppendUint64(b, uint64(max(sealTime(c.AuthTime).UnixMilli(), 0)))
	b = binary.BigEndian.AppendUint64(b, uint64(max(sealTime(c.LoginExpires).UnixMilli(), 0)))
	b = append(b, byte(c.Factors))
	for _, s := range []string{c.Session, c.Machine, c.Mode, c.User} {
		b = append(b, byte(len(s)))
		b = append(b, s...)
	}
	b = append(b, byte(len(c.Channels)))
	for _, ch := range c.Channels {
		b = binary.BigEndian.AppendUint16(b, ch.Port)
		p := byte('t')
		if ch.Proto == "udp" {
			p = 'u'
		}
		b = append(b, p)
	}
	return b
}

// Parse decodes a token and checks its signature with pub; it checks nothing else.
func Parse(token string, pub ed25519.PublicKey) (Claims, error) {
	return parse(token, func(id KeyID) (ed25519.PublicKey, bool) { return pub, id == KeyIDOf(pub) }, []ed25519.PublicKey{pub})
}

// parse decodes a token, then checks its signature with the key its key id names (key) or,
// for a version 1 token, with each of v1 in turn.
func parse(token string, key func(KeyID) (ed25519.PublicKey, bool), v1 []ed25519.PublicKey) (Claims, error) {
	if len(token) > MaxLen || len(token) == 0 {
		return Claims{}, ErrMalformed
	}
	b, err := enc.DecodeString(token)
	if err != nil || len(b) < 1+ed25519.SignatureSize {
		return Claims{}, ErrMalformed
	}
	body, sig := b[:len(b)-ed25519.SignatureSize], b[len(b)-ed25519.SignatureSize:]
	c, err := parseBody(body)
	if err != nil {
		return c, err
	}
	if body[0] == versionV1 {
		for _, pub := range v1 {
			if ed25519.Verify(pub, body, sig) {
				return c, nil
			}
		}
		return c, ErrSignature
	}
	pub, ok := key(c.Key)
	if !ok {
		return c, fmt.Errorf("%w: key %s", ErrUnknownKey, c.Key)
	}
	if !ed25519.Verify(pub, body, sig) {
		return c, ErrSignature
	}
	return c, nil
}

// parseBody decodes what a token's signature covers; it checks no signature.
func parseBody(body []byte) (Claims, error) {
	var c Claims
	if len(body) < 1 {
		return c, ErrMalformed
	}
	rest := body[1:]
	switch body[0] {
	case version, versionV3, versionV2:
		if len(rest) < len(c.Key) {
			return c, ErrMalformed
		}
		copy(c.Key[:], rest)
		rest = rest[len(c.Key):]
	case versionV1:
	default:
		return c, ErrMalformed
	}
	if len(rest) < 1+16+16 {
		return c, ErrMalformed
	}
	c.Kind = Kind(rest[0])
	copy(c.ID[:], rest[1:17])
	c.Issued = time.UnixMilli(int64(binary.BigEndian.Uint64(rest[17:25])))
	c.Expires = time.UnixMilli(int64(binary.BigEndian.Uint64(rest[25:33])))
	rest = rest[33:]
	if body[0] >= versionV3 {
		if len(rest) < 4 {
			return c, ErrMalformed
		}
		c.Gen, rest = binary.BigEndian.Uint32(rest), rest[4:]
	}
	strs := 3
	if body[0] == version {
		if len(rest) < 8+8+1 {
			return c, ErrMalformed
		}
		var ok1, ok2 bool
		c.AuthTime, ok1 = openTime(rest)
		c.LoginExpires, ok2 = openTime(rest[8:])
		if !ok1 || !ok2 {
			return c, ErrMalformed
		}
		c.Factors, rest = Factors(rest[16]), rest[17:]
		strs = 4
	}
	var fields [4]string
	for i := range strs {
		if len(rest) < 1 || len(rest) < 1+int(rest[0]) {
			return c, ErrMalformed
		}
		fields[i], rest = string(rest[1:1+int(rest[0])]), rest[1+int(rest[0]):]
	}
	c.Session, c.Machine, c.Mode, c.User = fields[0], fields[1], fields[2], fields[3]
	if len(rest) < 1 || len(rest) != 1+3*int(rest[0]) {
		return c, ErrMalformed
	}
	n := int(rest[0])
	rest = rest[1:]
	for i := 0; i < n; i++ {
		ch := Channel{Port: binary.BigEndian.Uint16(rest[3*i:]), Proto: "tcp"}
		switch rest[3*i+2] {
		case 't':
		case 'u':
			ch.Proto = "udp"
		default:
			return c, ErrMalformed
		}
		c.Channels = append(c.Channels, ch)
	}
	if c.Kind != Launch && c.Kind != Reconnect && c.Kind != Enrol && c.Kind != LaunchFile {
		return c, ErrWrongKind
	}
	return c, nil
}

// openTime reads a login time of a token: 0 is none, and a time before 1970 no token holds.
func openTime(b []byte) (time.Time, bool) {
	ms := int64(binary.BigEndian.Uint64(b))
	switch {
	case ms == 0:
		return time.Time{}, true
	case ms < 0:
		return time.Time{}, false
	}
	return time.UnixMilli(ms), true
}

// Names reports whether the claims allow channel ch.
func (c Claims) Names(ch Channel) bool {
	if len(c.Channels) == 0 && c.Kind == Reconnect {
		return true
	}
	return slices.Contains(c.Channels, ch)
}
