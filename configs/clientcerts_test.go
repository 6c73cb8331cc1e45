package configs

import (
	"os"
	"regexp"
	"slices"
	"testing"
)

// An operator CA's certificates name their users by the subject's common name unless
// user_from says otherwise; the other keys load as written.
func TestClientCertificatesLoadWithTheirDefaults(t *testing.T) {
	src := `site:
  auth:
    client_certificates:
      - {ca_file: corp-ca.pem}
      - {ca_file: cards-ca.pem, user_from: upn, strip_domain: Corp.Example, crl_files: [cards.crl, cards-delta.crl]}
zones: [{name: hq, primary: true}]
users: [{name: alice}]
`
	c, err := Load("t.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	got := c.Site.Auth.ClientCertificates
	if len(got) != 2 || got[0].UserFrom != UserFromCommonName || len(got[0].CRLFiles) != 0 {
		t.Fatalf("the first CA: %+v, want user_from %s and no CRL", got, UserFromCommonName)
	}
	if g := got[1]; g.CAFile != "cards-ca.pem" || g.UserFrom != UserFromUPN || g.StripDomain != "Corp.Example" || !slices.Equal(g.CRLFiles, []string{"cards.crl", "cards-delta.crl"}) {
		t.Fatalf("the second CA: %+v", g)
	}
}

// The README's client_certificates example loads, with a zone and a user added.
func TestREADMEClientCertificatesExample(t *testing.T) {
	raw, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)\\*\\*Smart cards and other certificates\\.\\*\\*.*?```yaml\n(.*?)```").FindSubmatch(raw)
	if m == nil {
		t.Fatal("README.md has no yaml block in its smart cards paragraph")
	}
	c, err := Load("README.md", append(m[1], "zones: [{name: hq, primary: true}]\nusers: [{name: alice}]\n"...))
	if err != nil {
		t.Fatalf("the README's example: %v", err)
	}
	if cc := c.Site.Auth.ClientCertificates; len(cc) != 1 || cc[0].UserFrom != UserFromUPN || cc[0].StripDomain != "corp.example" || len(cc[0].CRLFiles) != 1 {
		t.Fatalf("the README's example loads as %+v", cc)
	}
}
