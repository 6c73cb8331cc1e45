// Package testbrowser starts a headless Chromium, driven by github.com/chromedp/chromedp, for
// tests of web pages (Start, StartTrusting) and for the failure drills' browser rows (Launch).
package testbrowser

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"image"
	"image/draw"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// ErrNoBrowser: Chromium, or the certutil that makes it trust a CA, is not installed.
var ErrNoBrowser = errors.New("Chromium and certutil are needed: apt-get install chromium libnss3-tools")

// Canvas returns the pixels of the page's canvas that selector names, as the page drew them
// (the canvas's own size, whatever the page scales it to).
func Canvas(ctx context.Context, selector string) (*image.RGBA, error) {
	url, err := chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf(`(() => { const c = document.querySelector(%q); return c ? c.toDataURL("image/png") : "" })()`, selector)))
	if err != nil {
		return nil, err
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(url, "data:image/png;base64,"))
	if err != nil || len(raw) == 0 {
		return nil, fmt.Errorf("no canvas %s (%v)", selector, err)
	}
	img, err := png.Decode(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	rgba := image.NewRGBA(img.Bounds())
	draw.Draw(rgba, rgba.Bounds(), img, img.Bounds().Min, draw.Src)
	return rgba, nil
}

// Available reports ErrNoBrowser when Chromium or certutil is not installed.
func Available() error {
	if _, err := exec.LookPath("certutil"); err != nil {
		return ErrNoBrowser
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if _, err := exec.LookPath(name); err == nil {
			return nil
		}
	}
	return ErrNoBrowser
}

// Options configure a browser that Launch starts.
type Options struct {
	// Dir holds the browser's profile and home directory. Required.
	Dir string
	// Roots are certificate authorities the browser trusts as a user's does after importing
	// them (an NSS database in its home directory, made with certutil); nothing else is
	// trusted.
	Roots []*x509.Certificate
	// Pins are certificates whose public keys the browser trusts for pages (not for
	// WebSockets: Chromium lets a pinned key pass a page's certificate error only).
	Pins []*x509.Certificate
}

// Launch starts a headless Chromium as o says and returns a chromedp context of its first
// tab, which ends with ctx, and the function that stops it.
func Launch(ctx context.Context, o Options) (context.Context, context.CancelFunc, error) {
	exe := ""
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			exe = p
			break
		}
	}
	if exe == "" {
		return nil, nil, ErrNoBrowser
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(exe), chromedp.NoSandbox,
		chromedp.WindowSize(1280, 900), chromedp.UserDataDir(filepath.Join(o.Dir, "profile")))
	if len(o.Pins) > 0 {
		pins := make([]string, len(o.Pins))
		for i, c := range o.Pins {
			spki := sha256.Sum256(c.RawSubjectPublicKeyInfo)
			pins[i] = base64.StdEncoding.EncodeToString(spki[:])
		}
		opts = append(opts, chromedp.Flag("ignore-certificate-errors-spki-list", strings.Join(pins, ",")))
	}
	if len(o.Roots) > 0 {
		home, err := trustingHome(o.Dir, o.Roots)
		if err != nil {
			return nil, nil, err
		}
		opts = append(opts, chromedp.Env("HOME="+home))
	}
	actx, cancelA := chromedp.NewExecAllocator(ctx, opts...)
	bctx, cancelB := chromedp.NewContext(actx)
	stop := func() { cancelB(); cancelA() }
	if err := chromedp.Do(bctx); err != nil {
		stop()
		return nil, nil, fmt.Errorf("starting %s: %w", exe, err)
	}
	return bctx, stop, nil
}

// trustingHome makes a home directory in dir whose NSS database trusts roots.
func trustingHome(dir string, roots []*x509.Certificate) (string, error) {
	if _, err := exec.LookPath("certutil"); err != nil {
		return "", ErrNoBrowser
	}
	home := filepath.Join(dir, "home")
	db := filepath.Join(home, ".pki", "nssdb")
	if err := os.MkdirAll(db, 0o700); err != nil {
		return "", err
	}
	certutil := func(args ...string) error {
		if out, err := exec.Command("certutil", append([]string{"-d", "sql:" + db}, args...)...).CombinedOutput(); err != nil {
			return fmt.Errorf("certutil %v: %w: %s", args, err, out)
		}
		return nil
	}
	if err := certutil("-N", "--empty-password"); err != nil {
		return "", err
	}
	for i, c := range roots {
		f := filepath.Join(home, fmt.Sprintf("root-%d.pem", i))
		if err := os.WriteFile(f, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw}), 0o600); err != nil {
			return "", err
		}
		if err := certutil("-A", "-t", "C,,", "-n", fmt.Sprintf("root-%d", i), "-i", f); err != nil {
			return "", err
		}
	}
	return home, nil
}

// Start starts a headless Chromium that trusts the HTTPS servers whose certificates are
// given (their public keys, pinned; no other certificate is trusted), closed when the test
// ends. The context it returns bounds the whole browser to three minutes.
//
// Chromium lets a pinned key pass a page's certificate error, not a WebSocket's: a page that
// opens WebSockets to other servers needs StartTrusting.
func Start(t testing.TB, trusted ...*x509.Certificate) context.Context {
	t.Helper()
	return start(t, Options{Pins: trusted})
}

// StartTrusting starts a headless Chromium, as Start does, that trusts the certificate
// authorities roots as a user's browser does after importing them (Options.Roots), and
// nothing else.
func StartTrusting(t testing.TB, roots ...*x509.Certificate) context.Context {
	t.Helper()
	return start(t, Options{Roots: roots})
}

func start(t testing.TB, o Options) context.Context {
	t.Helper()
	o.Dir = t.TempDir()
	bctx, stop, err := Launch(context.Background(), o)
	if errors.Is(err, ErrNoBrowser) {
		t.Fatal("the browser tests need Chromium and certutil: apt-get install chromium libnss3-tools (.ci/run installs them)")
	}
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(bctx, 3*time.Minute)
	t.Cleanup(func() { cancel(); stop() })
	return ctx
}
