//go:build linux

package main

// The abusers, in a process of their own (-role abuse): wrong passwords, slow headers, TLS
// handshakes that never finish and requests whose body never comes, all at the node's
// launch listener, each kind from its
// own block of loopback source addresses. Every kind is bounded in count, in connections
// held at once and, through the context, in time.

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// abuseConfig is what the orchestrator asks of the abuse process.
type abuseConfig struct {
	Target     netip.AddrPort
	Sources    int      // source addresses per kind
	Wrong      int      // wrong-password requests
	WrongRate  int      // of them per second
	Workers    int      // wrong-password connections (keep-alive), one request at a time each
	Users      []string // real user names the guesses name, besides unknown ones
	Slow       int      // slow-header connections, all held at once
	Handshakes int      // stalled TLS handshakes
	HSAtOnce   int      // of them held at once
	OpenRate   int      // new abusive connections per second, per kind
	// Bodyless requests (a POST's headers with a right password, and never its body), from
	// BodylessSources addresses, BodylessAtOnce held at once.
	Bodyless, BodylessAtOnce, BodylessSources int
	Insider                                   string // the user they log in as
	Limit                                     time.Duration
}

// The source blocks: kind k's i-th address is 127.0.k.(i+1).
const (
	wrongBlock = 1
	slowBlock  = 2
	hsBlock    = 3
	bodyBlock  = 4
)

func source(block, i int) netip.Addr {
	return netip.AddrFrom4([4]byte{127, 0, byte(block), byte(1 + i)})
}

// abuseResult is what the abuse process reports.
type abuseResult struct {
	Seconds float64 `json:"seconds"`
	Wrong   struct {
		Sent    int64            `json:"sent"`
		Status  map[string]int64 `json:"status"` // by HTTP status and error
		Cut     int64            `json:"cut"`    // no answer: the connection failed or was closed
		Seconds float64          `json:"seconds"`
	} `json:"wrong"`
	Slow  connStats `json:"slow"`
	HS    connStats `json:"hs"`
	Body  connStats `json:"body"`
	Peak  int64     `json:"peak"` // abusive connections open at once, all kinds
	Notes []string  `json:"notes,omitempty"`
}

// connStats counts one kind of held connection.
type connStats struct {
	Started     int64    `json:"started"`
	Failed      int64    `json:"failed"`   // connect or TLS failed or timed out
	CutByServer int64    `json:"cut"`      // the node closed it
	Answered    int64    `json:"answered"` // the node answered something (an HTTP error) first
	OpenAtEnd   int64    `json:"open_end"` // still open when the time limit closed it
	Peak        int64    `json:"peak"`     // open at once
	WaitP50     float64  `json:"wait_p50"` // seconds from dial to established (TLS for slow)
	WaitMax     float64  `json:"wait_max"` //
	HoldP50     float64  `json:"hold_p50"` // seconds from established to the node's close
	HoldMax     float64  `json:"hold_max"` //
	FailReasons []string `json:"fail_why,omitempty"`
}

// tally gathers a kind's counts while it runs.
type tally struct {
	started, failed, cut, answered, openEnd, open, peak atomic.Int64
	mu                                                  sync.Mutex // guards waits, holds, reasons
	waits, holds                                        []float64
	reasons                                             map[string]int
}

func (t *tally) opened(total *atomic.Int64, totalPeak *atomic.Int64) {
	n := t.open.Add(1)
	for p := t.peak.Load(); n > p && !t.peak.CompareAndSwap(p, n); p = t.peak.Load() {
	}
	m := total.Add(1)
	for p := totalPeak.Load(); m > p && !totalPeak.CompareAndSwap(p, m); p = totalPeak.Load() {
	}
}

func (t *tally) fail(err error) {
	t.failed.Add(1)
	why := "other"
	var ne net.Error
	switch {
	case errors.As(err, &ne) && ne.Timeout():
		why = "timeout"
	case strings.Contains(err.Error(), "refused"):
		why = "refused"
	case strings.Contains(err.Error(), "reset"):
		why = "reset"
	case errors.Is(err, io.EOF):
		why = "EOF"
	}
	t.mu.Lock()
	if t.reasons == nil {
		t.reasons = map[string]int{}
	}
	t.reasons[why]++
	t.mu.Unlock()
}

func (t *tally) record(wait, hold float64) {
	t.mu.Lock()
	t.waits = append(t.waits, wait)
	if hold >= 0 {
		t.holds = append(t.holds, hold)
	}
	t.mu.Unlock()
}

func (t *tally) stats() connStats {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := connStats{Started: t.started.Load(), Failed: t.failed.Load(), CutByServer: t.cut.Load(), Answered: t.answered.Load(),
		OpenAtEnd: t.openEnd.Load(), Peak: t.peak.Load()}
	s.WaitP50, s.WaitMax = median(t.waits), maxOf(t.waits)
	s.HoldP50, s.HoldMax = median(t.holds), maxOf(t.holds)
	for k, v := range t.reasons {
		s.FailReasons = append(s.FailReasons, fmt.Sprintf("%s %d", k, v))
	}
	slices.Sort(s.FailReasons)
	return s
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	c := slices.Clone(v)
	slices.Sort(c)
	return c[len(c)/2]
}

func maxOf(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	return slices.Max(v)
}

// runAbuse runs the four kinds at once until each is done or cfg.Limit passes, printing
// "HELD {json}" every second and "RESULT {json}" at the end.
func runAbuse(cfg abuseConfig) abuseResult {
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Limit)
	defer cancel()
	var res abuseResult
	var total, peak atomic.Int64
	var slow, hs, body tally
	start := time.Now()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				printLine("HELD", map[string]int64{"slow": slow.open.Load(), "hs": hs.open.Load(), "body": body.open.Load(), "total": total.Load()})
			}
		}
	}()
	var wg sync.WaitGroup
	wg.Go(func() { wrongPasswords(ctx, cfg, &res) })
	wg.Go(func() { slowHeaders(ctx, cfg, &slow, &total, &peak) })
	wg.Go(func() { stalledHandshakes(ctx, cfg, &hs, &total, &peak) })
	wg.Go(func() { bodyless(ctx, cfg, &body, &total, &peak) })
	wg.Wait()
	close(done)
	res.Seconds = time.Since(start).Seconds()
	res.Slow, res.HS, res.Body, res.Peak = slow.stats(), hs.stats(), body.stats(), peak.Load()
	if ctx.Err() != nil {
		res.Notes = append(res.Notes, fmt.Sprintf("stopped by the time limit (%s)", cfg.Limit))
	}
	return res
}

// pace returns a channel that yields n times, rate a second at most, until ctx ends.
func pace(ctx context.Context, n, rate int) <-chan int {
	out := make(chan int)
	go func() {
		defer close(out)
		t := time.NewTicker(time.Second / time.Duration(max(rate, 1)))
		defer t.Stop()
		for i := 0; i < n; i++ {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			select {
			case <-ctx.Done():
				return
			case out <- i:
			}
		}
	}()
	return out
}

func dialer(src netip.Addr, timeout time.Duration) *net.Dialer {
	return &net.Dialer{Timeout: timeout, LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(src, 0))}
}

// wrongPasswords sends cfg.Wrong launches with a wrong password, paced at cfg.WrongRate,
// over cfg.Workers keep-alive connections spread over the sources; the names cycle over the
// real users and unknown ones.
func wrongPasswords(ctx context.Context, cfg abuseConfig, res *abuseResult) {
	start := time.Now()
	var mu sync.Mutex // guards res.Wrong.Status
	res.Wrong.Status = map[string]int64{}
	var sent, cut atomic.Int64
	jobs := pace(ctx, cfg.Wrong, cfg.WrongRate)
	var wg sync.WaitGroup
	for w := 0; w < cfg.Workers; w++ {
		src := source(wrongBlock, w%cfg.Sources)
		tr := &http.Transport{DialContext: dialer(src, 10*time.Second).DialContext, TLSClientConfig: &tls.Config{InsecureSkipVerify: true},
			TLSHandshakeTimeout: 10 * time.Second, MaxIdleConnsPerHost: 1}
		hc := &http.Client{Transport: tr, Timeout: 15 * time.Second}
		wg.Go(func() {
			defer tr.CloseIdleConnections()
			for i := range jobs {
				user := fmt.Sprintf("guess-%d", i)
				if i%2 == 0 && len(cfg.Users) > 0 {
					user = cfg.Users[(i/2)%len(cfg.Users)]
				}
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "https://"+cfg.Target.String()+"/v1/launch",
					strings.NewReader(`{"resource":"benchdesk","endpoint":"guess"}`))
				req.Header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(user+":wrong-"+fmt.Sprint(i))))
				sent.Add(1)
				resp, err := hc.Do(req)
				if err != nil {
					cut.Add(1)
					continue
				}
				b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
				resp.Body.Close()
				var e struct {
					Error string `json:"error"`
				}
				json.Unmarshal(b, &e)
				if i := strings.IndexAny(e.Error, ";:"); i >= 0 {
					e.Error = e.Error[:i]
				}
				mu.Lock()
				res.Wrong.Status[fmt.Sprintf("%d %s", resp.StatusCode, e.Error)]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	res.Wrong.Sent, res.Wrong.Cut, res.Wrong.Seconds = sent.Load(), cut.Load(), time.Since(start).Seconds()
}

// slowHeaders opens cfg.Slow connections (TCP, then a whole TLS handshake), starts a
// request's headers and sends one more byte of them every second, never ending them, until
// the node closes the connection or ctx ends.
func slowHeaders(ctx context.Context, cfg abuseConfig, t *tally, total, peak *atomic.Int64) {
	var wg sync.WaitGroup
	for i := range pace(ctx, cfg.Slow, cfg.OpenRate) {
		t.started.Add(1)
		wg.Go(func() {
			src := source(slowBlock, i%cfg.Sources)
			t0 := time.Now()
			raw, err := dialer(src, 10*time.Second).DialContext(ctx, "tcp", cfg.Target.String())
			if err != nil {
				t.fail(err)
				return
			}
			t.opened(total, peak)
			defer total.Add(-1)
			defer t.open.Add(-1)
			c := tls.Client(raw, &tls.Config{InsecureSkipVerify: true, ServerName: "frontdoor"})
			stop := context.AfterFunc(ctx, func() { raw.SetDeadline(time.Unix(1, 0)) })
			defer stop()
			c.SetDeadline(time.Now().Add(30 * time.Second))
			if err := c.Handshake(); err != nil {
				raw.Close()
				if ctx.Err() != nil {
					t.openEnd.Add(1)
					return
				}
				t.fail(err)
				return
			}
			established := time.Now()
			held := func() float64 { return time.Since(established).Seconds() }
			defer c.Close()
			c.SetDeadline(time.Time{})
			if _, err := io.WriteString(c, "POST /v1/launch HTTP/1.1\r\nHost: frontdoor\r\nX-Slow: "); err != nil {
				t.cut.Add(1)
				t.record(established.Sub(t0).Seconds(), held())
				return
			}
			buf := make([]byte, 512)
			for {
				c.SetReadDeadline(time.Now().Add(time.Second))
				n, err := c.Read(buf)
				var ne net.Error
				switch {
				case n > 0:
					t.answered.Add(1) // an HTTP error answer: the node is done with it
					t.cut.Add(1)
					t.record(established.Sub(t0).Seconds(), held())
					return
				case err != nil && errors.As(err, &ne) && ne.Timeout() && ctx.Err() == nil:
					c.SetWriteDeadline(time.Now().Add(time.Second))
					if _, err := c.Write([]byte{'a'}); err != nil {
						t.cut.Add(1)
						t.record(established.Sub(t0).Seconds(), held())
						return
					}
				case ctx.Err() != nil:
					t.openEnd.Add(1)
					t.record(established.Sub(t0).Seconds(), -1)
					return
				default:
					t.cut.Add(1)
					t.record(established.Sub(t0).Seconds(), held())
					return
				}
			}
		})
	}
	wg.Wait()
}

// partialHello is the start of a TLS ClientHello record: its header announces 512 bytes,
// of which the handshake header, the version and part of the random follow.
var partialHello = append([]byte{0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03}, make([]byte, 16)...)

// each runs fn for n connections, paced at rate a second and atOnce at most at once, each on
// a goroutine of its own counted as started in t, until they are done or ctx ends.
func each(ctx context.Context, n, atOnce, rate int, t *tally, fn func(i int)) {
	slots := make(chan struct{}, atOnce)
	var wg sync.WaitGroup
	for i := range pace(ctx, n, rate) {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		t.started.Add(1)
		wg.Go(func() {
			defer func() { <-slots }()
			fn(i)
		})
	}
	wg.Wait()
}

// stalledHandshakes opens cfg.Handshakes TCP connections, cfg.HSAtOnce at most at once,
// each sending partialHello and then nothing, until the node closes it or ctx ends.
func stalledHandshakes(ctx context.Context, cfg abuseConfig, t *tally, total, peak *atomic.Int64) {
	each(ctx, cfg.Handshakes, cfg.HSAtOnce, cfg.OpenRate, t, func(i int) {
		src := source(hsBlock, i%cfg.Sources)
		t0 := time.Now()
		c, err := dialer(src, 10*time.Second).DialContext(ctx, "tcp", cfg.Target.String())
		if err != nil {
			t.fail(err)
			return
		}
		defer c.Close()
		t.opened(total, peak)
		defer total.Add(-1)
		defer t.open.Add(-1)
		established := time.Now()
		stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Unix(1, 0)) })
		defer stop()
		if _, err := c.Write(partialHello); err != nil {
			t.cut.Add(1)
			t.record(established.Sub(t0).Seconds(), 0)
			return
		}
		// The node answers nothing until the rest of the hello comes: whatever it sends
		// (an alert) or the close ends the wait.
		_, err = c.Read(make([]byte, 64))
		if ctx.Err() != nil {
			t.openEnd.Add(1)
			t.record(established.Sub(t0).Seconds(), -1)
			return
		}
		if err == nil {
			t.answered.Add(1)
		}
		t.cut.Add(1)
		t.record(established.Sub(t0).Seconds(), time.Since(established).Seconds())
	})
}

// bodyless opens cfg.Bodyless connections, cfg.BodylessAtOnce at most at once, from
// cfg.BodylessSources addresses: each completes its TLS handshake and sends a launch's
// headers with the insider's right password and a Content-Length, and then never the body,
// until the node answers or closes it, or ctx ends (finding H1 of the security review).
func bodyless(ctx context.Context, cfg abuseConfig, t *tally, total, peak *atomic.Int64) {
	if cfg.Bodyless == 0 {
		return
	}
	auth := base64.StdEncoding.EncodeToString([]byte(cfg.Insider + ":" + password))
	head := "POST /v1/launch HTTP/1.1\r\nHost: frontdoor\r\nAuthorization: Basic " + auth + "\r\nContent-Type: application/json\r\nContent-Length: 64\r\n\r\n"
	each(ctx, cfg.Bodyless, cfg.BodylessAtOnce, cfg.OpenRate, t, func(i int) {
		src := source(bodyBlock, i%max(cfg.BodylessSources, 1))
		t0 := time.Now()
		raw, err := dialer(src, 10*time.Second).DialContext(ctx, "tcp", cfg.Target.String())
		if err != nil {
			t.fail(err)
			return
		}
		t.opened(total, peak)
		defer total.Add(-1)
		defer t.open.Add(-1)
		c := tls.Client(raw, &tls.Config{InsecureSkipVerify: true, ServerName: "frontdoor"})
		defer c.Close()
		stop := context.AfterFunc(ctx, func() { raw.SetDeadline(time.Unix(1, 0)) })
		defer stop()
		if err := c.Handshake(); err != nil {
			if ctx.Err() != nil {
				t.openEnd.Add(1)
				return
			}
			t.fail(err)
			return
		}
		established := time.Now()
		if _, err := io.WriteString(c, head); err != nil {
			t.cut.Add(1)
			t.record(established.Sub(t0).Seconds(), 0)
			return
		}
		n, _ := c.Read(make([]byte, 512))
		if ctx.Err() != nil {
			t.openEnd.Add(1)
			t.record(established.Sub(t0).Seconds(), -1)
			return
		}
		if n > 0 {
			t.answered.Add(1)
		}
		t.cut.Add(1)
		t.record(established.Sub(t0).Seconds(), time.Since(established).Seconds())
	})
}

// parseAbuseConfig reads the abuse process's configuration from its -abuse flag (JSON).
func parseAbuseConfig(s string) (abuseConfig, error) {
	var c abuseConfig
	err := json.Unmarshal([]byte(s), &c)
	return c, err
}
