// Package testbrowser starts a headless Chromium for tests of web pages, driven by
// github.com/chromedp/chromedp.
package testbrowser

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// Start starts a headless Chromium that trusts the HTTPS servers whose certificates are
// given (their public keys, pinned; no other certificate is trusted), closed when the test
// ends. The context it returns bounds the whole browser to three minutes.
func Start(t testing.TB, trusted ...*x509.Certificate) context.Context {
	t.Helper()
	exe := ""
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			exe = p
			break
		}
	}
	if exe == "" {
		t.Fatal("the browser tests need Chromium: apt-get install chromium (.ci/run installs it)")
	}
	pins := make([]string, len(trusted))
	for i, c := range trusted {
		spki := sha256.Sum256(c.RawSubjectPublicKeyInfo)
		pins[i] = base64.StdEncoding.EncodeToString(spki[:])
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(exe), chromedp.NoSandbox,
		chromedp.WindowSize(1280, 900), chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("ignore-certificate-errors-spki-list", strings.Join(pins, ",")))
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	bctx, cancelB := chromedp.NewContext(actx)
	ctx, cancel := context.WithTimeout(bctx, 3*time.Minute)
	t.Cleanup(func() { cancel(); cancelB(); cancelA() })
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting %s: %v", exe, err)
	}
	return ctx
}
