//go:build linux

package main

// The honest clients, in this process, each from a loopback address of its own that no
// abuser uses. Their launches arrive at a fixed rate, whatever the node's answers (open
// loop: a stalled node is charged the launches that wait, not spared those a waiting client
// would not have sent), each as a user of the stream's pool, not under way already: "fresh"
// launches over a new connection each time (as client.Launch and frontdoor connect do),
// "kept" over a pool of two keep-alive connections (as a portal would), both then open the
// session's channel through the gateway (client.Open, an echo) and log it off; "cold" signs
// in as a user not seen before (a bcrypt comparison) once a second. And the standing
// sessions, opened before the abuse, that must live through it.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/frontdoor-vdi/frontdoor/client"
	"github.com/frontdoor-vdi/frontdoor/internal/rfb"
)

// The honest clients' source addresses.
var (
	freshIP = netip.MustParseAddr("127.0.9.1")
	keptIP  = netip.MustParseAddr("127.0.9.2")
	coldIP  = netip.MustParseAddr("127.0.9.3")
)

// sample is one honest try.
type sample struct {
	phase string
	at    time.Duration // since the run's start, when the try began
	took  time.Duration // the launch (or the login) request
	open  time.Duration // opening the channel and echoing through it (0: not reached)
	total time.Duration // the whole try: launch, channel, logoff
	err   string        // "" when the whole try worked; else what failed first
}

// apiClient is an honest client of the launch API, with client.Launch's timeouts (connect
// 2 s, TLS 3 s, 10 s in all): fresh makes a new connection for every request, else it keeps
// two connections at most, and a request waits for one of them.
func apiClient(src netip.Addr, pool *x509.CertPool, fresh bool) *http.Client {
	tr := &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		DialContext:         (&net.Dialer{Timeout: 2 * time.Second, LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(src, 0))}).DialContext,
		TLSHandshakeTimeout: 3 * time.Second,
		DisableKeepAlives:   fresh,
	}
	if !fresh {
		tr.MaxConnsPerHost, tr.MaxIdleConnsPerHost = 2, 2
	}
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

// call sends one request as user; the answer's body, or an error that says what failed
// ("HTTP 429", "TLS handshake timeout", ...).
func call(ctx context.Context, hc *http.Client, method, url, user, body string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.SetBasicAuth(user, password)
	resp, err := hc.Do(req)
	if err != nil {
		return nil, errors.New(errClass(err))
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, errors.New("reading the answer: " + errClass(err))
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error string `json:"error"`
		}
		json.Unmarshal(b, &e)
		if len(e.Error) > 40 {
			e.Error = e.Error[:40] + "…"
		}
		return nil, fmt.Errorf("HTTP %d %s", resp.StatusCode, e.Error)
	}
	return b, nil
}

// errClass names a transport error briefly, for the tables.
func errClass(err error) string {
	s := err.Error()
	for _, k := range []string{"TLS handshake timeout", "i/o timeout", "connection refused", "connection reset", "EOF", "Client.Timeout", "context deadline exceeded"} {
		if strings.Contains(s, k) {
			return k
		}
	}
	if len(s) > 60 {
		s = s[:60]
	}
	return s
}

// honest is the honest side of the run.
type honest struct {
	url   string
	pool  *x509.CertPool
	users siteUsers
	phase *atomic.Pointer[string]
	t0    time.Time
	quiet *slog.Logger

	mu      sync.Mutex // guards samples
	samples map[string][]sample
}

func (h *honest) add(stream string, s sample) {
	h.mu.Lock()
	h.samples[stream] = append(h.samples[stream], s)
	h.mu.Unlock()
}

// signIn logs each user in once (GET /v1/sessions): the node then holds their credentials
// for 5 minutes and compares no password of theirs again.
func (h *honest) signIn(ctx context.Context, hc *http.Client, users ...string) error {
	for _, u := range users {
		if _, err := call(ctx, hc, http.MethodGet, h.url+"/v1/sessions", u, ""); err != nil {
			return fmt.Errorf("signing %s in: %w", u, err)
		}
	}
	return nil
}

// launch asks for a session as user and returns its descriptor.
func (h *honest) launch(ctx context.Context, hc *http.Client, user, endpoint string) (*client.Descriptor, error) {
	b, err := call(ctx, hc, http.MethodPost, h.url+"/v1/launch", user, `{"resource":"benchdesk","endpoint":"`+endpoint+`"}`)
	if err != nil {
		return nil, err
	}
	var d client.Descriptor
	if err := json.Unmarshal(b, &d); err != nil || d.SessionID == "" {
		return nil, fmt.Errorf("bad descriptor: %v", err)
	}
	return &d, nil
}

// open opens d's 8443/tcp channel through the gateway and a viewer's stream on it, up to
// the desktop's VNC greeting and name: the channel reaches the desktop. It reads no frame,
// whose drawing (by the agents in this process) measures the desktop, not the front door.
func (h *honest) open(ctx context.Context, d *client.Descriptor, onEvent func(client.Event)) (*client.Session, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	s, err := client.Open(ctx, client.Options{Descriptor: d, RootCAs: h.pool, Channels: []client.Channel{{Port: 8443, Proto: "tcp"}},
		DialTimeout: 3 * time.Second, Logger: h.quiet, OnEvent: onEvent})
	if err != nil {
		return nil, errors.New(errClass(err))
	}
	c, err := s.Attach(ctx, 8443)
	if err == nil {
		c.SetDeadline(time.Now().Add(5 * time.Second))
		_, err = rfb.NewClient(c)
		c.Close()
	}
	if err != nil {
		s.Close()
		return nil, errors.New(errClass(err))
	}
	return s, nil
}

// arrivals starts a try every interval until ctx ends, each as a user of the pool that no
// try is under way for; with none free the arrival fails at once.
func (h *honest) arrivals(ctx context.Context, stream string, hc *http.Client, users []string, interval time.Duration) {
	free := make(chan string, len(users))
	for _, u := range users {
		free <- u
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		s := sample{phase: *h.phase.Load(), at: time.Since(h.t0)}
		select {
		case u := <-free:
			wg.Go(func() {
				defer func() { free <- u }()
				h.try(ctx, stream, hc, u, s)
			})
		default:
			s.err = fmt.Sprintf("launch: not sent, %d tries under way", len(users))
			h.add(stream, s)
		}
	}
}

// try launches as user over hc, opens the channel and logs the session off.
func (h *honest) try(ctx context.Context, stream string, hc *http.Client, user string, s sample) {
	start := time.Now()
	d, err := h.launch(ctx, hc, user, stream)
	s.took = time.Since(start)
	switch {
	case ctx.Err() != nil:
		return
	case err != nil:
		s.err = "launch: " + err.Error()
	default:
		t := time.Now()
		sess, err := h.open(ctx, d, nil)
		s.open = time.Since(t)
		if err != nil {
			s.err = "channel: " + err.Error()
		} else {
			sess.Close()
		}
		if _, err := call(ctx, hc, http.MethodPost, h.url+"/v1/sessions/"+d.SessionID+"/logoff", user, ""); err != nil && s.err == "" && ctx.Err() == nil {
			s.err = "logoff: " + err.Error()
		}
	}
	if ctx.Err() != nil {
		return
	}
	s.total = time.Since(start)
	h.add(stream, s)
}

// coldLogins signs in, once every interval, as the next user of users, over a new
// connection: each is a bcrypt comparison.
func (h *honest) coldLogins(ctx context.Context, hc *http.Client, users []string, interval time.Duration) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	for _, u := range users {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		wg.Go(func() {
			start := time.Now()
			s := sample{phase: *h.phase.Load(), at: start.Sub(h.t0)}
			_, err := call(ctx, hc, http.MethodGet, h.url+"/v1/sessions", u, "")
			s.took = time.Since(start)
			if ctx.Err() != nil {
				return
			}
			if err != nil {
				s.err = "login: " + err.Error()
			}
			s.total = s.took
			h.add("cold", s)
		})
	}
}

// standing is a session opened before the abuse, kept open through it.
type standing struct {
	user string
	id   string
	s    *client.Session
	cuts atomic.Int64 // cut and lost events

	mu       sync.Mutex // guards echoFail
	echoFail map[string]int
	echoes   atomic.Int64
}

// openStanding launches and opens a session for each user, over hc.
func (h *honest) openStanding(ctx context.Context, hc *http.Client, users []string) ([]*standing, error) {
	var out []*standing
	for _, u := range users {
		d, err := h.launch(ctx, hc, u, "standing")
		if err != nil {
			return out, fmt.Errorf("standing session of %s: %w", u, err)
		}
		st := &standing{user: u, id: d.SessionID, echoFail: map[string]int{}}
		if st.s, err = h.open(ctx, d, func(e client.Event) {
			if e.Kind == client.EventCut || e.Kind == client.EventLost {
				st.cuts.Add(1)
			}
		}); err != nil {
			return out, fmt.Errorf("standing session of %s: %w", u, err)
		}
		out = append(out, st)
	}
	return out, nil
}

// keepEchoing echoes 256 bytes through st's channel every interval until ctx ends, and
// counts the echoes that fail, by phase.
func (h *honest) keepEchoing(ctx context.Context, st *standing, interval time.Duration) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		phase := *h.phase.Load()
		ectx, cancel := context.WithTimeout(ctx, 3*time.Second)
		err := st.s.EchoUDP(ectx, 4172, 1, 64)
		cancel()
		if ctx.Err() != nil {
			return
		}
		st.echoes.Add(1)
		if err != nil {
			st.mu.Lock()
			st.echoFail[phase]++
			st.mu.Unlock()
		}
	}
}

// check says whether st came through: its session still up and echoing, and still the
// node's (GET /v1/sessions as its user lists it).
func (h *honest) check(ctx context.Context, hc *http.Client, st *standing) error {
	if !st.s.Up() {
		return errors.New("its channel is down")
	}
	ectx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := st.s.CheckDesktop(ectx); err != nil {
		return fmt.Errorf("echo: %w", err)
	}
	b, err := call(ctx, hc, http.MethodGet, h.url+"/v1/sessions", st.user, "")
	if err != nil {
		return err
	}
	var views []struct {
		ID    string `json:"id"`
		State string `json:"state"`
	}
	if err := json.Unmarshal(b, &views); err != nil {
		return err
	}
	for _, v := range views {
		if v.ID == st.id {
			if v.State != "connected" {
				return fmt.Errorf("the node has it %s", v.State)
			}
			return nil
		}
	}
	return errors.New("the node no longer has it")
}
