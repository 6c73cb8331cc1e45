package configs

import (
	"fmt"
	"regexp"
)

// How the user name comes from a client certificate of an operator CA
// (ClientCertificates.UserFrom).
const (
	// UserFromCommonName takes the subject's common name.
	UserFromCommonName = "common_name"
	// UserFromEmail takes the certificate's email address (an rfc822Name SAN).
	UserFromEmail = "email"
	// UserFromUPN takes the Microsoft user principal name that smart-card logon
	// certificates carry (the SAN otherName 1.3.6.1.4.1.311.20.2.3).
	UserFromUPN = "upn"
)

// userFroms are the values of ClientCertificates.UserFrom.
var userFroms = [...]string{UserFromCommonName, UserFromEmail, UserFromUPN}

// ClientCertificates is a CA of the operator (a smart-card or corporate PKI) whose client
// certificates log users in to the launch and admin APIs with the certificate factor, as
// those of the site CA do: the user name comes from the certificate (UserFrom, less
// StripDomain) and must be a configured user's. Certificates the CA revoked are refused
// when CRLFiles has its CRL.
type ClientCertificates struct {
	// CAFile is a PEM file of the CA's certificates: the root, and the issuing CAs whose
	// CRLs CRLFiles holds (a CRL is checked against the certificate of this file that
	// signed it). A client certificate that chains to one of them is accepted at the TLS
	// handshake. Read when the node starts. Required. Default: "".
	CAFile string `yaml:"ca_file"`
	// UserFrom is where the user name is in the certificate: common_name (the subject's
	// CN), email (its email address SAN) or upn (the Microsoft UPN in the SAN otherName
	// 1.3.6.1.4.1.311.20.2.3, which smart cards carry). A certificate with none, or with
	// several different ones, logs nobody in. Default: common_name.
	UserFrom string `yaml:"user_from"`
	// StripDomain is a domain taken off the name's end: with corp.example,
	// alice@corp.example is the user alice (compared without regard to case); a name of
	// another domain is taken whole. Default: "" (names are taken whole).
	StripDomain string `yaml:"strip_domain"`
	// CRLFiles are the CA's certificate revocation lists (PEM or DER), each signed by a
	// certificate of CAFile: a certificate whose serial one of its issuer's CRLs lists is
	// refused, the user's or an issuing CA's above it (by the root's CRL). A CRL past its next update refuses every certificate of its issuer until a
	// fresh one is there (fail closed), and so does one that cannot be read or verified,
	// and, once any CRL is given, a certificate whose issuer has none. The files are read
	// again when they change. Default: none (no revocation is checked).
	CRLFiles []string `yaml:"crl_files"`
}

// domainRE is a domain name without a final dot: labels of letters, digits and '-'.
var domainRE = regexp.MustCompile(`^([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)*[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$`)

// validateClientCertificates checks site.auth.client_certificates.
func (k *checker) validateClientCertificates() {
	files := map[string]string{} // a file named already, and where
	for i, cc := range k.c.Site.Auth.ClientCertificates {
		p := fmt.Sprintf("site.auth.client_certificates[%d]", i)
		switch prev, dup := files[cc.CAFile]; {
		case cc.CAFile == "":
			k.errf(p, "a client certificate CA needs its ca_file (a PEM file of its certificates)")
		case dup:
			k.errf(p+".ca_file", "%q is named twice (also %s): give a CA once, with all its crl_files", cc.CAFile, prev)
		default:
			files[cc.CAFile] = p + ".ca_file"
		}
		k.oneOf(p+".user_from", cc.UserFrom, userFroms[:]...)
		if d := cc.StripDomain; d != "" && !domainRE.MatchString(d) {
			k.errf(p+".strip_domain", "%q is not a domain (e.g. corp.example, without @)", d)
		}
		for j, f := range cc.CRLFiles {
			fp := fmt.Sprintf("%s.crl_files[%d]", p, j)
			switch prev, dup := files[f]; {
			case f == "":
				k.errf(fp, "a CRL file needs a name")
			case dup:
				k.errf(fp, "%q is named twice (also %s)", f, prev)
			default:
				files[f] = fp
			}
		}
	}
}
