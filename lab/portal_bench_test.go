package lab

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// BenchmarkPortalSignInToFirstFrame times a user's way from the portal's sign-in form to the
// desktop's first frame in Chromium, on the lab, split by step: sign-in (the form posted to
// the resources listed), then from the click on Open: the launch API's answer (zone, machine
// and ticket come together), the channel admitted through a gateway over a WebSocket, the
// first frame drawn. Each launch is a new session: the one before is logged off and its user
// signed out. Run it with -benchtime 20x:
//
//	go test ./lab -run '^$' -bench PortalSignInToFirstFrame -benchtime 20x
func BenchmarkPortalSignInToFirstFrame(b *testing.B) {
	l, _ := startLab(b)
	ctx := portalBrowser(b, l)
	users := []string{"alice", "bob", "carol", "dave"}
	var signin, api, channel, frame, total []time.Duration
	b.ResetTimer()
	for i := range b.N {
		user := users[i%len(users)]
		err := do(ctx,
			chromedp.Navigate(portalURL+"/"),
			chromedp.WaitVisible(chromedp.CSS(`input[name="user"]`)),
			chromedp.SendKeys(chromedp.CSS(`input[name="user"]`), user),
			chromedp.SendKeys(chromedp.CSS(`input[name="password"]`), "lab"))
		if err != nil {
			b.Fatalf("the sign-in form: %v", err)
		}
		t0 := time.Now()
		if err := do(ctx, chromedp.Submit(chromedp.ID("login")),
			chromedp.WaitVisible(chromedp.CSS(`li[data-resource="desktop"] button:not([disabled])`))); err != nil {
			b.Fatalf("signing in as %s: %v", user, err)
		}
		in := time.Since(t0)
		if err := do(ctx, clickNow(`li[data-resource="desktop"] button`), chromedp.WaitVisible(chromedp.ID("screen"))); err != nil {
			b.Fatalf("opening the desktop: %v", err)
		}
		ms, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll("#steps li .ms"), e => e.textContent)`))
		if err != nil || len(ms) < 6 {
			b.Fatalf("the launch's steps: %q (%v)", ms, err)
		}
		step := func(i int) time.Duration {
			n, _ := strconv.Atoi(strings.TrimSuffix(ms[i], " ms"))
			return time.Duration(n) * time.Millisecond
		}
		signin, api, channel, frame = append(signin, in), append(api, step(3)), append(channel, step(4)), append(frame, step(5))
		total = append(total, in+step(5))
		// Log the session off and sign out, for a new session next time.
		session, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.dataset.session`))
		if err := do(ctx, clickNow("#desk-back"), chromedp.WaitVisible(chromedp.CSS(`li[data-session="`+session+`"] button.secondary`)),
			clickNow(`li[data-session="`+session+`"] button.secondary`),
			chromedp.WaitNotPresent(chromedp.CSS(`li[data-session="`+session+`"]`)),
			clickNow(`header form button`), chromedp.WaitVisible(chromedp.CSS(`input[name="user"]`))); err != nil {
			b.Fatalf("logging off and signing out: %v", err)
		}
	}
	b.StopTimer()
	for _, m := range []struct {
		name string
		xs   []time.Duration
	}{{"signin", signin}, {"launch-api", api}, {"channel", channel}, {"first-frame", frame}, {"total", total}} {
		p50, p99 := pct(m.xs, 50), pct(m.xs, 99)
		b.ReportMetric(float64(p50)/1e6, m.name+"-p50-ms")
		b.ReportMetric(float64(p99)/1e6, m.name+"-p99-ms")
	}
	b.ReportMetric(0, "ns/op")
}

// pct is the p-th percentile of xs (nearest rank).
func pct(xs []time.Duration, p int) time.Duration {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	i := (p*len(s)+99)/100 - 1
	return s[min(max(i, 0), len(s)-1)]
}
