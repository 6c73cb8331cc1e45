package pki

import (
	"crypto/x509"
	encasn1 "encoding/asn1"
	"errors"
	"unicode/utf8"

	"golang.org/x/crypto/cryptobyte"
	"golang.org/x/crypto/cryptobyte/asn1"
)

var (
	// oidSubjectAltName is the subject alternative name extension (RFC 5280 4.2.1.6).
	oidSubjectAltName = encasn1.ObjectIdentifier{2, 5, 29, 17}
	// oidUPN is Microsoft's user principal name, an otherName of the SAN that smart-card
	// logon certificates carry.
	oidUPN = encasn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 311, 20, 2, 3}
)

// errBadSAN is a subject alternative name extension that does not parse.
var errBadSAN = errors.New("the subject alternative names do not parse")

// upns returns the user principal names of cert's subject alternative names.
func upns(cert *x509.Certificate) ([]string, error) {
	for _, e := range cert.Extensions {
		if e.Id.Equal(oidSubjectAltName) {
			return parseUPNs(e.Value)
		}
	}
	return nil, nil
}

// parseUPNs returns the UPNs of a DER subject alternative name extension's value:
//
//	GeneralNames ::= SEQUENCE OF GeneralName
//	GeneralName  ::= CHOICE { otherName [0] IMPLICIT OtherName, ... }
//	OtherName    ::= SEQUENCE { type-id OBJECT IDENTIFIER, value [0] EXPLICIT ANY }
//
// with a UPN's value a UTF8String. Other names are skipped; a UPN that is no valid UTF-8
// string, or names that do not parse, are errBadSAN.
func parseUPNs(der []byte) ([]string, error) {
	in := cryptobyte.String(der)
	var names cryptobyte.String
	if !in.ReadASN1(&names, asn1.SEQUENCE) || !in.Empty() {
		return nil, errBadSAN
	}
	var out []string
	for !names.Empty() {
		var name cryptobyte.String
		var tag asn1.Tag
		if !names.ReadAnyASN1(&name, &tag) {
			return nil, errBadSAN
		}
		if tag != asn1.Tag(0).ContextSpecific().Constructed() {
			continue // not an otherName
		}
		var id encasn1.ObjectIdentifier
		var value cryptobyte.String
		if !name.ReadASN1ObjectIdentifier(&id) || !name.ReadASN1(&value, asn1.Tag(0).ContextSpecific().Constructed()) || !name.Empty() {
			return nil, errBadSAN
		}
		if !id.Equal(oidUPN) {
			continue
		}
		var upn cryptobyte.String
		if !value.ReadASN1(&upn, asn1.UTF8String) || !value.Empty() || !utf8.Valid(upn) {
			return nil, errBadSAN
		}
		out = append(out, string(upn))
	}
	return out, nil
}
