// Package testbrowser starts a headless Chromium for tests of web pages, driven by
// github.com/chromedp/chromedp.
package testbrowser

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// Start starts a headless Chromium that trusts the HTTPS servers whose certificates are
// given (their public keys, pinned; no other certificate is trusted), closed when the test
// ends. The context it returns bounds the whole browser to three minutes.
//
// Chromium lets a pinned key pass a page's certificate error, not a WebSocket's: a page that
// opens WebSockets to other servers needs StartTrusting.
func Start(t testing.TB, trusted ...*x509.Certificate) context.Context {
	t.Helper()
	pins := make([]string, len(trusted))
	for i, c := range trusted {
		spki := sha256.Sum256(c.RawSubjectPublicKeyInfo)
		pins[i] = base64.StdEncoding.EncodeToString(spki[:])
	}
	return start(t, chromedp.Flag("ignore-certificate-errors-spki-list", strings.Join(pins, ",")))
}

// StartTrusting starts a headless Chromium, as Start does, that trusts the certificate
// authorities roots as a user's browser does after importing them: they are put in the NSS
// database of a home directory of the browser's own (certutil, Debian's libnss3-tools), and
// nothing else is trusted.
func StartTrusting(t testing.TB, roots ...*x509.Certificate) context.Context {
	t.Helper()
	if _, err := exec.LookPath("certutil"); err != nil {
		t.Fatal("trusting a CA in Chromium needs certutil: apt-get install libnss3-tools (.ci/run installs it)")
	}
	home := t.TempDir()
	db := filepath.Join(home, ".pki", "nssdb")
	if err := os.MkdirAll(db, 0o700); err != nil {
		t.Fatal(err)
	}
	certutil := func(args ...string) {
		if out, err := exec.Command("certutil", append([]string{"-d", "sql:" + db}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("certutil %v: %v: %s", args, err, out)
		}
	}
	certutil("-N", "--empty-password")
	for i, c := range roots {
		f := filepath.Join(home, fmt.Sprintf("root-%d.pem", i))
		if err := os.WriteFile(f, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw}), 0o600); err != nil {
			t.Fatal(err)
		}
		certutil("-A", "-t", "C,,", "-n", fmt.Sprintf("root-%d", i), "-i", f)
	}
	return start(t, chromedp.Env("HOME="+home))
}

func start(t testing.TB, extra ...chromedp.ExecAllocatorOption) context.Context {
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
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(exe), chromedp.NoSandbox,
		chromedp.WindowSize(1280, 900), chromedp.UserDataDir(t.TempDir()))
	opts = append(opts, extra...)
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	bctx, cancelB := chromedp.NewContext(actx)
	ctx, cancel := context.WithTimeout(bctx, 3*time.Minute)
	t.Cleanup(func() { cancel(); cancelB(); cancelA() })
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting %s: %v", exe, err)
	}
	return ctx
}
