package pki

import (
	"errors"
	"strings"
	"testing"

	"github.com/frontdoor-vdi/frontdoor/pki/pkitest"
)

// parseUPNs reads the UPNs among other names, and refuses what does not parse.
func TestParseUPNs(t *testing.T) {
	got, err := parseUPNs(pkitest.UPNSAN("alice@corp.example", "bob").Value)
	if err != nil || strings.Join(got, ",") != "alice@corp.example,bob" {
		t.Fatalf("parseUPNs = %q, %v", got, err)
	}
	for _, bad := range [][]byte{nil, {0x30}, {0x30, 0x02, 0xa0, 0x00}, append(pkitest.UPNSAN("x").Value, 0)} {
		if _, err := parseUPNs(bad); !errors.Is(err, errBadSAN) {
			t.Errorf("parseUPNs(%x) = %v, want %v", bad, err, errBadSAN)
		}
	}
}

// FuzzParseUPNs: any extension value parses or is refused, without a panic, and a UPN it
// returns is valid UTF-8 that a SAN of it gives back.
func FuzzParseUPNs(f *testing.F) {
	f.Add(pkitest.UPNSAN("alice@corp.example").Value)
	f.Add(pkitest.UPNSAN().Value)
	f.Add(pkitest.UPNSAN("a", "b", "ü@example").Value)
	f.Fuzz(func(t *testing.T, der []byte) {
		got, err := parseUPNs(der)
		if err != nil {
			return
		}
		again, err := parseUPNs(pkitest.UPNSAN(got...).Value)
		if err != nil || strings.Join(again, "\x00") != strings.Join(got, "\x00") {
			t.Fatalf("the UPNs %q written again read %q, %v", got, again, err)
		}
	})
}
