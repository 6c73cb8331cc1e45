package configs

import (
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
