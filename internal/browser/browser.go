// Package browser starts a headless Chromium driven by github.com/chromedp/chromedp, as the
// failure drills' browser rows and the tests of web pages (internal/testbrowser) use it, and
// reads what a page drew.
package browser

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
	_, err := executable()
	return err
}

// executable returns the path of the Chromium on PATH, or ErrNoBrowser.
func executable() (string, error) {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", ErrNoBrowser
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
	exe, err := executable()
	if err != nil {
		return nil, nil, err
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

// ClickNow clicks the element sel selects, found and clicked by one script in the page: a
// page that redraws a list between chromedp's query and its click would leave it clicking a
// node that is gone.
func ClickNow(sel string) chromedp.Action[chromedp.Void] {
	js := fmt.Sprintf(`(() => { const e = document.querySelector(%q); if (!e) return false; e.click(); return true })()`, sel)
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		ok, err := chromedp.Evaluate[bool](js)(ctx, t)
		if err == nil && !ok {
			err = fmt.Errorf("no element %s to click", sel)
		}
		return chromedp.Void{}, err
	}
}
