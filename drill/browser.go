package drill

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/frontdoor-vdi/frontdoor/client"
	"github.com/frontdoor-vdi/frontdoor/internal/browser"
	"github.com/frontdoor-vdi/frontdoor/internal/desktop"
)

// A browser row's client: a user's desktop in Chromium, opened through the portal of a front
// door (the page's own session reliability over WebSocket channels, api/portal/static), watched
// as a user would watch it: a key typed every 100 ms, the canvas's pixels read back (the
// builtin desktop's text) to see the keys show, the session drawn and the path.

// browserUser is the user whose desktop is in the browser; the native clients are the others.
const browserUser = "alice"

// typeEvery is how often the watcher types a key into the page.
const typeEvery = 100 * time.Millisecond

// browserClient is one user's desktop in a headless Chromium.
type browserClient struct {
	user    string
	ctx     context.Context
	stop    func()
	dir     string
	session string
	via     string // the gateway the canvas said before the failure

	mu        sync.Mutex // guards what the watcher saw
	typed     string     // every key typed
	lastKeys  string     // the canvas's keys row last read
	changedAt time.Time  // when that row last changed
	stall     time.Duration
	outOfOrd  int
	lines     []string
}

// openBrowser signs user in at the first front door's portal in a new Chromium that trusts the
// site's CA, opens the desktop in the page and waits for its first frame.
func (r *run) openBrowser(ctx context.Context, user string) (*browserClient, error) {
	portal := strings.TrimSuffix(r.lab.PortalURL(), "/")
	if portal == "" {
		return nil, errors.New("the drill site has no launch listener")
	}
	dir, err := os.MkdirTemp("", "frontdoor-drill-browser-")
	if err != nil {
		return nil, err
	}
	bctx, stop, err := browser.Launch(ctx, browser.Options{Dir: dir, Roots: []*x509.Certificate{r.lab.CA().Cert()}})
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	b := &browserClient{user: user, ctx: bctx, stop: stop, dir: dir}
	step := func(what string, actions ...chromedp.Action[chromedp.Void]) error {
		sctx, cancel := context.WithTimeout(bctx, 20*time.Second)
		defer cancel()
		if err := chromedp.Do(sctx, actions...); err != nil {
			page, _ := chromedp.Run(bctx, chromedp.Evaluate[string](`document.body.innerText`))
			return fmt.Errorf("%s: %w; the page reads %q", what, err, oneLine(page, 300))
		}
		return nil
	}
	err = step("signing in at "+portal,
		chromedp.Navigate(portal+"/"),
		chromedp.WaitVisible(chromedp.CSS(`input[name="user"]`)),
		chromedp.SendKeys(chromedp.CSS(`input[name="user"]`), user),
		chromedp.SendKeys(chromedp.CSS(`input[name="password"]`), password),
		chromedp.Submit(chromedp.ID("login")),
		chromedp.WaitVisible(chromedp.CSS(`li[data-resource="desktop"] button:not([disabled])`)))
	if err == nil {
		err = step("opening the desktop in the page",
			browser.ClickNow(`li[data-resource="desktop"] button`),
			chromedp.WaitVisible(chromedp.ID("screen")))
	}
	if err != nil {
		b.close()
		return nil, err
	}
	b.session, _ = chromedp.Run(bctx, chromedp.Evaluate[string](`document.body.dataset.session`))
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		lines, _ := b.screen()
		drawn := client.WatchStats{Lines: lines}
		if path := drawn.Line("path "); path != "" && drawn.Line("session ") == b.session {
			b.via, b.lines = path, lines
			return b, nil
		}
	}
	b.close()
	return nil, fmt.Errorf("the page's desktop does not show session %q", b.session)
}

// screen reads the builtin desktop's text off the page's canvas.
func (b *browserClient) screen() ([]string, error) {
	img, err := browser.Canvas(b.ctx, "#screen canvas")
	if err != nil {
		return nil, err
	}
	return desktop.ReadText(img), nil
}

// watch types a key every typeEvery and reads the canvas until ctx ends: the longest time the
// keys row stood still (from reset on), and every read whose keys are not the end of what was
// typed (a key lost, doubled or reordered).
func (b *browserClient) watch(ctx context.Context) {
	b.mu.Lock()
	b.changedAt = time.Now()
	b.mu.Unlock()
	t := time.NewTicker(typeEvery)
	defer t.Stop()
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		key := string(rune('0' + n%10))
		if _, err := chromedp.Run(b.ctx, chromedp.KeyEvent(key)); err == nil {
			b.mu.Lock()
			b.typed += key
			b.mu.Unlock()
		}
		lines, err := b.screen()
		if err != nil {
			continue
		}
		keys := client.WatchStats{Lines: lines}.Line("keys: ")
		now := time.Now()
		b.mu.Lock()
		b.lines = lines
		if keys != b.lastKeys {
			b.stall = max(b.stall, now.Sub(b.changedAt))
			b.lastKeys, b.changedAt = keys, now
			// The row shows the last 40 keys the desktop took: the end of what was typed,
			// short of the keys still on their way.
			if keys != "" && !strings.Contains(b.typed, keys) {
				b.outOfOrd++
			}
		}
		b.mu.Unlock()
	}
}

// resetStall starts the longest stall afresh (the failure's, not the page's start).
func (b *browserClient) resetStall() {
	b.mu.Lock()
	b.stall, b.changedAt = 0, time.Now()
	b.mu.Unlock()
}

// pageEvent is one event of the page's channel (window.frontdoorEvents).
type pageEvent struct {
	Kind    string `json:"kind"`
	At      int64  `json:"at"` // ms since the epoch
	Gateway string `json:"gateway"`
	Error   string `json:"error"`
}

// result sums up what the browser's user saw from fault on.
func (b *browserClient) result(fault time.Time, target *frontDoor) ClientResult {
	cr := ClientResult{User: b.user + " (browser)", Session: b.session, ViaBefore: b.via, Affected: b.via == target.gateway}
	evs, _ := chromedp.Run(b.ctx, chromedp.Evaluate[[]pageEvent](`window.frontdoorEvents || []`))
	var cutAt time.Time
	ended := false
	for _, e := range evs {
		at := time.UnixMilli(e.At)
		if at.Before(fault) {
			continue
		}
		switch e.Kind {
		case "break":
			cr.Cuts++
			if !cr.Cut {
				cr.Cut, cutAt, cr.CutAfter = true, at, at.Sub(fault)
			}
		case "resumed":
			if cr.Cut && !cr.Back {
				cr.Back, cr.BackAfter, cr.Gap, cr.SameSession = true, at.Sub(fault), at.Sub(cutAt), true
			}
		case "end":
			ended = true
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	cr.ViewerKept, cr.LongestStall, cr.KeysOutOfOrder = !ended, max(b.stall, time.Since(b.changedAt)), b.outOfOrd
	drawn := client.WatchStats{Lines: b.lines}
	cr.SameDrawn, cr.DrawnPath = drawn.Line("session ") == b.session, drawn.Line("path ")
	cr.ViaAfter = cr.DrawnPath
	cr.SameSession = cr.SameSession && cr.SameDrawn
	return cr
}

func (b *browserClient) close() {
	b.stop()
	os.RemoveAll(b.dir)
}

// oneLine is s on one line, cut to n bytes.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		s = s[:n] + "…"
	}
	return s
}
