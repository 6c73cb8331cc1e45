package logins

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/frontdoor-vdi/frontdoor/internal/atomicfile"
	"github.com/pquerna/otp"
	"github.com/pquerna/otp/hotp"
	"github.com/pquerna/otp/totp"
)

// OTPHeader carries a login's one-time code beside its HTTP Basic password (or client
// certificate): a TOTP code (six digits), or the RADIUS passcode of a user that
// site.auth.radius of role factor covers. A code that checks adds the totp (or radius)
// factor to the login, a code that does not fails it like a wrong password (and is
// throttled alike). Without the header a login has neither factor, which access rules that
// require it deny.
const OTPHeader = "X-Frontdoor-OTP"

// The TOTP parameters: those of RFC 6238's defaults and of every authenticator app — six
// digits, 30-second steps, HMAC-SHA1 — and one step of clock skew either way.
const (
	totpPeriod = 30 * time.Second
	totpSkew   = 1
	totpDigits = otp.DigitsSix
)

// Errors of the one-time codes.
var (
	// errCodeUnchecked: the site's TOTP file cannot be read (missing, or readable by
	// others); a login with a code is answered 503 and counts as no failure.
	errCodeUnchecked = errors.New("one-time codes cannot be checked now")
	// ErrTOTPFileMode is returned for a TOTP file that others than its owner may read.
	ErrTOTPFileMode = errors.New("the TOTP file may be read by others than its owner (want mode 0600)")
)

// totpSecrets reads site.auth.totp_file, again when it changes (an enrolment while the node
// runs takes effect at the next login).
type totpSecrets struct {
	path string

	mu      sync.Mutex // guards mod, size, secrets
	mod     time.Time
	size    int64
	secrets map[string]string
}

// secret returns user's base32 secret; false when the user has none.
func (t *totpSecrets) secret(user string) (string, bool, error) {
	st, err := os.Stat(t.path)
	if err != nil {
		return "", false, err
	}
	if err := privateMode(st.Mode()); err != nil {
		return "", false, fmt.Errorf("%s: %w", t.path, err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.secrets == nil || !st.ModTime().Equal(t.mod) || st.Size() != t.size {
		m, err := ReadTOTPFile(t.path)
		if err != nil {
			return "", false, err
		}
		t.secrets, t.mod, t.size = m, st.ModTime(), st.Size()
	}
	s, ok := t.secrets[user]
	return s, ok, nil
}

// privateMode refuses a mode that lets the group or others read or write (where the
// platform has such modes).
func privateMode(m fs.FileMode) error {
	if runtime.GOOS != "windows" && m.Perm()&0o077 != 0 {
		return fmt.Errorf("%w: %04o", ErrTOTPFileMode, m.Perm())
	}
	return nil
}

// openPrivate opens a file of secrets that its owner alone may read (privateMode), for
// reading; a file others may read is refused with modeErr, naming the path.
func openPrivate(path string, modeErr error) (*os.File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err == nil && privateMode(st.Mode()) != nil {
		err = fmt.Errorf("%s: %w: %04o", path, modeErr, st.Mode().Perm())
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// readSecret reads a secret file of one line (a RADIUS shared secret, an OIDC client secret):
// its bytes, a trailing newline (and carriage return) dropped. It refuses a file others may
// read (modeErr) and an empty secret.
func readSecret(path string, modeErr error) ([]byte, error) {
	f, err := openPrivate(path, modeErr)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 4096))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	b = bytes.TrimSuffix(bytes.TrimSuffix(b, []byte("\n")), []byte("\r"))
	if len(b) == 0 {
		return nil, fmt.Errorf("%s: the secret is empty", path)
	}
	return b, nil
}

// ReadTOTPFile reads a TOTP file (site.auth.totp_file): lines "USER SECRET", the secret in
// base32; blank lines and lines starting with '#' are skipped. It refuses a file that others
// than its owner may read (ErrTOTPFileMode), a malformed line and a user named twice.
func ReadTOTPFile(path string) (map[string]string, error) {
	f, err := openPrivate(path, ErrTOTPFileMode)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) != 2 {
			return nil, fmt.Errorf("%s:%d: want \"USER SECRET\"", path, n)
		}
		if _, err := hotp.GenerateCode(fields[1], 0); err != nil {
			return nil, fmt.Errorf("%s:%d: the secret of %s is not base32: %v", path, n, fields[0], err)
		}
		if _, dup := out[fields[0]]; dup {
			return nil, fmt.Errorf("%s:%d: %s has a secret already", path, n, fields[0])
		}
		out[fields[0]] = fields[1]
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return out, nil
}

// TOTPEnrolment is a user's new TOTP secret, for `frontdoor totp enroll`.
type TOTPEnrolment struct {
	// URL is the otpauth:// URL an authenticator app takes (as a QR code or typed in).
	URL string
	// Secret is the secret in base32, for apps that take it typed in.
	Secret string
}

// EnrollTOTP gives user a new TOTP secret in the TOTP file at path (created, mode 0600, when
// it is not there; a secret the user had is replaced), written whole or not at all, and
// returns it with its otpauth:// URL; issuer names the site in the app.
func EnrollTOTP(path, issuer, user string) (TOTPEnrolment, error) {
	if user == "" || strings.ContainsAny(user, " \t\r\n#") {
		return TOTPEnrolment{}, fmt.Errorf("user name %q cannot be written to a TOTP file", user)
	}
	var lines []string
	raw, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		lines = []string{"# frontdoor TOTP secrets: USER SECRET (base32). Keep this file mode 0600."}
	case err != nil:
		return TOTPEnrolment{}, err
	default:
		if _, err := ReadTOTPFile(path); err != nil { // its mode and lines
			return TOTPEnrolment{}, err
		}
		sc := bufio.NewScanner(bytes.NewReader(raw))
		for sc.Scan() {
			if f := strings.Fields(sc.Text()); len(f) == 2 && f[0] == user {
				continue // replaced
			}
			lines = append(lines, sc.Text())
		}
	}
	key, err := totp.Generate(totp.GenerateOpts{Issuer: issuer, AccountName: user, Period: uint(totpPeriod / time.Second), Digits: totpDigits, Algorithm: otp.AlgorithmSHA1})
	if err != nil {
		return TOTPEnrolment{}, fmt.Errorf("generating a TOTP secret: %w", err)
	}
	lines = append(lines, user+" "+key.Secret())
	if err := atomicfile.Write(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		return TOTPEnrolment{}, fmt.Errorf("writing %s: %w", path, err)
	}
	return TOTPEnrolment{URL: key.URL(), Secret: key.Secret()}, nil
}

// totpStep is the step of a code: its time divided into totpPeriod steps.
func totpStep(t time.Time) int64 { return t.Unix() / int64(totpPeriod/time.Second) }

// checkCode returns the step whose code of secret code is, among the step of now and one
// either side; false when it is none of them.
func checkCode(secret, code string, now time.Time) (int64, bool) {
	if len(code) != totpDigits.Length() {
		return 0, false
	}
	step := totpStep(now)
	opts := hotp.ValidateOpts{Digits: totpDigits, Algorithm: otp.AlgorithmSHA1}
	for _, s := range []int64{step, step - 1, step + 1}[:1+2*totpSkew] {
		if s < 0 {
			continue
		}
		if ok, err := hotp.ValidateCustom(code, uint64(s), secret, opts); err == nil && ok {
			return s, true
		}
	}
	return 0, false
}

// codeID is what the ledger records of user's code of step: a code is accepted once.
func codeID(user string, step int64) [16]byte {
	h := sha256.New()
	h.Write([]byte("frontdoor totp\x00" + user + "\x00"))
	binary.Write(h, binary.BigEndian, step)
	var id [16]byte
	copy(id[:], h.Sum(nil))
	return id
}

// codeUntil is when a code of step can no longer be accepted (its step and the skew after it
// are over), and its record in the ledger may go.
func codeUntil(step int64) time.Time {
	return time.Unix((step+1+totpSkew+1)*int64(totpPeriod/time.Second), 0)
}
