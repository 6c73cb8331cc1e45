package pki

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/frontdoor-vdi/frontdoor/configs"
	"github.com/frontdoor-vdi/frontdoor/internal/testbuf"
	"github.com/frontdoor-vdi/frontdoor/pki/pkitest"
)

// The user name of a certificate: its UPNs, email addresses or common name as the CA's
// entry says, less the domain compared without regard to case, the one name it gives.
func TestTheUserNameOfACertificate(t *testing.T) {
	leaf := func(cn string, emails []string, upns ...string) *x509.Certificate {
		ca := pkitest.NewCA(t, t.TempDir(), "names", false)
		tmpl := x509.Certificate{Subject: pkix.Name{CommonName: cn}, EmailAddresses: emails}
		if upns != nil {
			tmpl.ExtraExtensions = []pkix.Extension{pkitest.UPNSAN(upns...)}
		}
		return ca.User(tmpl).Leaf
	}
	for _, tc := range []struct {
		name, from, strip string
		cert              *x509.Certificate
		want              string // "" for an error
	}{
		{"a UPN less the domain", configs.UserFromUPN, "corp.example", leaf("x", nil, "alice@CORP.example"), "alice"},
		{"a UPN of another domain is taken whole", configs.UserFromUPN, "corp.example", leaf("x", nil, "alice@other.example"), "alice@other.example"},
		{"a UPN without stripping", configs.UserFromUPN, "", leaf("x", nil, "alice@corp.example"), "alice@corp.example"},
		{"two UPNs of one user are that user", configs.UserFromUPN, "corp.example", leaf("x", nil, "alice@corp.example", "alice"), "alice"},
		{"two users' UPNs are none", configs.UserFromUPN, "corp.example", leaf("x", nil, "alice@corp.example", "bob@corp.example"), ""},
		{"no UPN is none", configs.UserFromUPN, "", leaf("alice", []string{"alice@corp.example"}), ""},
		{"an email address", configs.UserFromEmail, "corp.example", leaf("x", []string{"bob@corp.example"}), "bob"},
		{"no email address is none", configs.UserFromEmail, "", leaf("bob", nil, "bob@corp.example"), ""},
		{"the common name", configs.UserFromCommonName, "", leaf("carol", []string{"x@corp.example"}), "carol"},
		{"the common name less the domain", configs.UserFromCommonName, "corp.example", leaf("carol@corp.example", nil), "carol"},
		{"no common name is none", configs.UserFromCommonName, "", leaf("", []string{"carol@corp.example"}), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			op := &OperatorCA{cfg: configs.ClientCertificates{UserFrom: tc.from, StripDomain: tc.strip}}
			got, err := op.UserName(tc.cert)
			if got != tc.want || (err == nil) != (tc.want != "") {
				t.Fatalf("userName = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// LoadClientCAs refuses a CA file that is missing, holds no certificate, or a certificate
// that is no CA's, naming its key; it logs a CRL that cannot be used.
func TestLoadClientCAsNamesTheBadFile(t *testing.T) {
	dir := t.TempDir()
	site, err := LoadOrCreateCA(dir, "test", slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ca := pkitest.NewCA(t, dir, "corp", false)
	leafFile := filepath.Join(dir, "leaf.pem")
	os.WriteFile(leafFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.User(x509.Certificate{Subject: pkix.Name{CommonName: "alice"}}).Leaf.Raw}), 0o644)
	empty := filepath.Join(dir, "empty.pem")
	os.WriteFile(empty, []byte("not pem\n"), 0o644)
	for _, tc := range []struct{ file, want string }{
		{filepath.Join(dir, "missing.pem"), "no such file"},
		{empty, "holds no PEM certificate"},
		{leafFile, `"CN=alice" is no CA certificate`},
	} {
		auth := configs.Auth{ClientCertificates: []configs.ClientCertificates{{CAFile: ca.File}, {CAFile: tc.file}}}
		_, err := LoadClientCAs(auth, site, nil)
		if err == nil || !strings.HasPrefix(err.Error(), "site.auth.client_certificates[1].ca_file: ") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("LoadClientCAs(%s): %v, want an error of site.auth.client_certificates[1].ca_file saying %q", tc.file, err, tc.want)
		}
	}
	if cas, err := LoadClientCAs(configs.Auth{}, site, nil); cas != nil || err != nil {
		t.Fatalf("no operator CA: %v, %v; want nil (the site CA alone)", cas, err)
	}
	// A CRL that cannot be used is no error (it refuses its CA's certificates), but is
	// logged at once.
	logs := &testbuf.Buffer{}
	auth := configs.Auth{ClientCertificates: []configs.ClientCertificates{{CAFile: ca.File, CRLFiles: []string{empty}}}}
	if _, err := LoadClientCAs(auth, site, slog.New(slog.NewTextHandler(logs, nil))); err != nil {
		t.Fatalf("a CA with a bad CRL: %v, want no error", err)
	}
	if !strings.Contains(logs.String(), `level=ERROR msg="a CRL cannot be used: its CA's client certificates are refused until it can" key=site.auth.client_certificates[0].crl_files[0]`) {
		t.Fatalf("the bad CRL is not logged at start:\n%s", logs)
	}
}

// CheckClientCertificates finds a CRL past its next update, and nothing in good files.
func TestCheckClientCertificatesFindsAStaleCRL(t *testing.T) {
	dir := t.TempDir()
	ca := pkitest.NewCA(t, dir, "corp", true)
	crl := filepath.Join(dir, "corp.crl")
	now := time.Now()
	ca.WriteCRL(crl, 1, now, now.Add(time.Hour))
	auth := configs.Auth{ClientCertificates: []configs.ClientCertificates{{CAFile: ca.File, CRLFiles: []string{crl}}}}
	if errs := CheckClientCertificates(auth, now); len(errs) != 0 {
		t.Fatalf("good files: %v", errs)
	}
	errs := CheckClientCertificates(auth, now.Add(2*time.Hour))
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "site.auth.client_certificates[0].crl_files[0]: "+crl+" is past its next update") {
		t.Fatalf("a stale CRL: %v", errs)
	}
}
