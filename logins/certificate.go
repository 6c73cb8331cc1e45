package logins

import (
	"crypto/x509"
	"net/http"
	"slices"

	"github.com/frontdoor-vdi/frontdoor/configs"
	"github.com/frontdoor-vdi/frontdoor/internal/siteid"
	"github.com/frontdoor-vdi/frontdoor/pki"
)

// certificateUser returns the user of the request's verified client certificate. One of the
// site CA names its user by its common name, wants the client-authentication usage and is
// never a party's. One of an operator CA names its user as the CA's entry says, and is
// refused when its CA's CRLs revoke it: a certificate that names no configured user (or
// several) or is revoked fails like a wrong password (throttled), one whose revocation
// cannot be checked is errCertUnchecked.
func (a *Authenticator) certificateUser(r *http.Request) (configs.User, error) {
	chains := r.TLS.VerifiedChains
	leaf := chains[0][0]
	if a.certs == nil && a.operatorCAs {
		a.log.Error("the configuration names operator CAs, but this API was given none (ClientCAs): client certificates log nobody in")
		return configs.User{}, ErrNoLogin
	}
	op, chain := a.certs.OperatorOf(chains)
	if op == nil {
		if a.certs != nil && !a.certs.FromSite(chains) {
			return configs.User{}, ErrNoLogin // a CA this authenticator does not know
		}
		if _, _, party := siteid.Of(leaf); party {
			return configs.User{}, ErrNoLogin
		}
		u, ok := a.users[leaf.Subject.CommonName]
		if !ok || !slices.Contains(leaf.ExtKeyUsage, x509.ExtKeyUsageClientAuth) {
			return configs.User{}, ErrNoLogin
		}
		return u, nil
	}
	name, nameErr := op.UserName(leaf)
	u, known := a.users[name]
	revoked, by, err := op.Revoked(chain, a.now())
	switch {
	case err != nil:
		// The reason (a file, a date) is logged as the CRL's state changes; the client is
		// told no more than that its certificate cannot be checked now.
		a.log.Debug("a client certificate of an operator CA cannot be checked", "serial", pki.SerialHex(leaf), "ca_file", op.CAFile(), "err", err)
		return configs.User{}, pki.ErrCertUnchecked
	case revoked != nil:
		// The revoked certificate is the user's, or an issuing CA above it; the CA named is
		// the one whose CRL revokes it.
		a.log.Info("a revoked client certificate was refused", "serial", pki.SerialHex(revoked), "ca", by.Subject.String(), "subject", revoked.Subject.String(),
			"ca_file", op.CAFile(), "user", name, "from", ClientAddr(r))
	case pki.NamesParty(leaf):
		a.log.Warn("a client certificate of an operator CA that names a party of the site was refused", "subject", leaf.Subject.String(), "ca_file", op.CAFile(), "from", ClientAddr(r))
	case nameErr != nil:
		a.log.Info("a client certificate of an operator CA names no user", "subject", leaf.Subject.String(), "ca_file", op.CAFile(), "reason", nameErr, "from", ClientAddr(r))
	case !known:
		a.log.Info("a client certificate of an operator CA names no configured user", "user", name, "serial", pki.SerialHex(leaf), "ca_file", op.CAFile(), "from", ClientAddr(r))
	default:
		return u, nil
	}
	// A failure counts against its source and name as a wrong password does: a throttled
	// one is answered 429.
	who := name
	if who == "" {
		who = leaf.Subject.String()
	}
	src := ClientAddr(r)
	if _, err := a.guard.admit(r.Context(), src, who); err != nil {
		return configs.User{}, err
	}
	a.guard.done(src, who, true)
	return configs.User{}, ErrNoLogin
}
