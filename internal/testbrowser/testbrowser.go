// Package testbrowser starts a headless Chromium for tests of web pages (package
// internal/browser), closed when the test ends.
package testbrowser

import (
	"context"
	"crypto/x509"
	"errors"
	"testing"
	"time"

	"github.com/frontdoor-vdi/frontdoor/internal/browser"
)

// Start starts a headless Chromium that trusts the HTTPS servers whose certificates are
// given (their public keys, pinned; no other certificate is trusted), closed when the test
// ends. The context it returns bounds the whole browser to three minutes.
//
// Chromium lets a pinned key pass a page's certificate error, not a WebSocket's: a page that
// opens WebSockets to other servers needs StartTrusting.
func Start(t testing.TB, trusted ...*x509.Certificate) context.Context {
	t.Helper()
	return start(t, browser.Options{Pins: trusted})
}

// StartTrusting starts a headless Chromium, as Start does, that trusts the certificate
// authorities roots as a user's browser does after importing them (Options.Roots), and
// nothing else.
func StartTrusting(t testing.TB, roots ...*x509.Certificate) context.Context {
	t.Helper()
	return start(t, browser.Options{Roots: roots})
}

func start(t testing.TB, o browser.Options) context.Context {
	t.Helper()
	o.Dir = t.TempDir()
	bctx, stop, err := browser.Launch(context.Background(), o)
	if errors.Is(err, browser.ErrNoBrowser) {
		t.Fatal("the browser tests need Chromium and certutil: apt-get install chromium libnss3-tools (.ci/run installs them)")
	}
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(bctx, 3*time.Minute)
	t.Cleanup(func() { cancel(); stop() })
	return ctx
}
