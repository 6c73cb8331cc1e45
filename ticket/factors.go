package ticket

import (
	"fmt"
	"strings"
)

// Factors is a set of login factors, as a ticket seals them: a bit each.
type Factors uint8

// The login factors.
const (
	// FactorPassword: a password (HTTP Basic) checked against the user's bcrypt hash.
	FactorPassword Factors = 1 << iota
	// FactorCertificate: a client certificate of the site CA naming the user.
	FactorCertificate
	// FactorTOTP: a time-based one-time code (RFC 6238) of the user's enrolled secret.
	FactorTOTP
	// FactorOIDC: an ID token of the site's OpenID Connect provider.
	FactorOIDC
	// FactorMFA: an ID token whose amr claim names a multi-factor method.
	FactorMFA
	// FactorRADIUS: the site's RADIUS servers accepted the login (a passcode beside the
	// password, or the password itself).
	FactorRADIUS
)

// factorNames are the names of the factors, bit by bit: those of the configuration
// (configs.Factor*).
var factorNames = [...]string{"password", "certificate", "totp", "oidc", "mfa", "radius"}

// ParseFactor returns the factor named name ("password", "certificate", "totp", "oidc",
// "mfa" or "radius").
func ParseFactor(name string) (Factors, bool) {
	for i, n := range factorNames {
		if n == name {
			return 1 << i, true
		}
	}
	return 0, false
}

// Names lists the factors of f by name, in bit order; bits no factor has are named by
// number ("factor7").
func (f Factors) Names() []string {
	var out []string
	for i := range 8 {
		if f&(1<<i) == 0 {
			continue
		}
		if i < len(factorNames) {
			out = append(out, factorNames[i])
		} else {
			out = append(out, fmt.Sprintf("factor%d", i))
		}
	}
	return out
}

// String joins the names with "+" ("password+totp"); "none" for the empty set.
func (f Factors) String() string {
	if f == 0 {
		return "none"
	}
	return strings.Join(f.Names(), "+")
}
