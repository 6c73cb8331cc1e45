package agent

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/frontdoor-vdi/frontdoor/configs"
)

// FrontDoor is a front door an agent may report to.
type FrontDoor struct {
	Node string
	Zone string
	URL  string // https://host:port of the node's launch listener
}

// ErrNoFrontDoor is returned when no front door of the machine's zone or the primary zone
// has a launch listener.
var ErrNoFrontDoor = errors.New("no front door in the machine's zone or the primary zone")

// Candidates returns the front doors machine may register with, in order: those of its own
// zone, then those of the primary zone — never those of another satellite zone (seed 001).
func Candidates(cfg *configs.Config, machine string) ([]FrontDoor, error) {
	var zone string
	for _, m := range cfg.Machines {
		if m.Name == machine {
			zone = m.Zone
		}
	}
	if zone == "" {
		return nil, fmt.Errorf("machine %q is not in the config", machine)
	}
	primary := ""
	for _, z := range cfg.Zones {
		if z.Primary {
			primary = z.Name
		}
	}
	var own, prim []FrontDoor
	for _, n := range cfg.Nodes {
		for _, l := range n.Listeners {
			if l.Kind != "launch" {
				continue
			}
			fd := FrontDoor{Node: n.Name, Zone: n.Zone, URL: "https://" + l.Address.String()}
			switch n.Zone {
			case zone:
				own = append(own, fd)
			case primary:
				prim = append(prim, fd)
			}
		}
	}
	out := append(own, prim...)
	if len(out) == 0 {
		return nil, ErrNoFrontDoor
	}
	return out, nil
}

// Reporter sends a machine's heartbeats and direct-mode session events to the first front
// door that takes them, keeping to it until it fails.
type Reporter struct {
	machine string
	token   string
	doors   []FrontDoor
	tlsc    *tls.Config
	log     *slog.Logger

	mu        sync.Mutex // guards current, client, follow, connected, id
	current   int
	id        *Identity       // UseIdentity's
	connected func() []string // TellConnected
	client    *http.Client
	follow    *http.Client // for the long polls of Follow
}

// NewReporter returns a Reporter for machine with its agent token; tlsc trusts the site CA.
func NewReporter(machine, token string, doors []FrontDoor, tlsc *tls.Config, log *slog.Logger) *Reporter {
	r := &Reporter{machine: machine, token: token, doors: doors, tlsc: tlsc, log: log.With("machine", machine)}
	r.clients(tlsc)
	return r
}

// clients makes the HTTP clients of the reporter, with tlsc.
func (r *Reporter) clients(tlsc *tls.Config) {
	tr := &http.Transport{TLSClientConfig: tlsc, MaxIdleConnsPerHost: 2}
	r.mu.Lock()
	old := r.client
	r.client, r.follow = &http.Client{Timeout: 2 * time.Second, Transport: tr}, &http.Client{Timeout: 30 * time.Second, Transport: tr}
	r.mu.Unlock()
	if old != nil {
		old.CloseIdleConnections()
	}
}

// UseIdentity makes every later request present the machine's certificate, which the agent
// API takes instead of the token (an enrolment ticket is good once).
// It also trusts, beside what the reporter's config trusts, the site CA's certificates the
// identity holds (two while the site CA is rotated, which the front doors' certificates may
// come from).
func (r *Reporter) UseIdentity(id *Identity) {
	tc := r.tlsc.Clone()
	tc.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		id.mu.Lock()
		defer id.mu.Unlock()
		return id.cert, nil
	}
	id.mu.Lock()
	siteCAs := id.caPEM
	id.mu.Unlock()
	roots := tc.RootCAs
	if roots == nil {
		roots, _ = x509.SystemCertPool()
	}
	if roots != nil {
		roots = roots.Clone()
	} else {
		roots = x509.NewCertPool()
	}
	roots.AppendCertsFromPEM(siteCAs)
	tc.RootCAs = roots
	r.mu.Lock()
	r.id = id
	r.mu.Unlock()
	r.clients(tc)
}

// Current returns the front door in use.
func (r *Reporter) Current() FrontDoor {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.doors[r.current]
}

// post sends body to path on the current front door, moving on to the next on failure.
func (r *Reporter) post(ctx context.Context, path string, body any) error {
	return r.postFor(ctx, path, body, nil)
}

// postFor is post that decodes the JSON answer into answer, when not nil.
func (r *Reporter) postFor(ctx context.Context, path string, body, answer any) error {
	return r.request(ctx, false, http.MethodPost, path, body, answer)
}

// request sends a request to the current front door, moving on to the next on failure, and
// decodes the JSON answer into answer, when not nil; body is sent as JSON unless nil. A long
// request (a long poll) may take 30 s, the others 2 s.
func (r *Reporter) request(ctx context.Context, long bool, method, path string, body, answer any) error {
	var b []byte
	if body != nil {
		b, _ = json.Marshal(body)
	}
	var errs []error
	r.mu.Lock()
	start := r.current
	hc := r.client
	if long {
		hc = r.follow
	}
	r.mu.Unlock()
	for i := range r.doors {
		k := (start + i) % len(r.doors)
		fd := r.doors[k]
		req, err := http.NewRequestWithContext(ctx, method, fd.URL+path, bytes.NewReader(b))
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+r.token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", fd.Node, err))
			continue
		}
		if resp.StatusCode != http.StatusOK {
			resp.Body.Close()
			errs = append(errs, fmt.Errorf("%s: %s", fd.Node, resp.Status))
			continue
		}
		if answer != nil {
			err = json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(answer)
		}
		resp.Body.Close()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: the answer: %w", fd.Node, err))
			continue
		}
		r.mu.Lock()
		if r.current != k {
			r.log.Info("reporting to front door", "node", fd.Node, "zone", fd.Zone)
		}
		r.current = k
		r.mu.Unlock()
		return nil
	}
	return errors.Join(errs...)
}

// Heartbeat reports the machine's load.
func (r *Reporter) Heartbeat(ctx context.Context, sessions, cpu, memory int) error {
	hb := map[string]any{"machine": r.machine, "sessions": sessions, "cpu": cpu, "memory": memory}
	r.mu.Lock()
	connected := r.connected
	r.mu.Unlock()
	if connected != nil {
		hb["connected"] = connected()
	}
	return r.post(ctx, "/v1/agent/heartbeat", hb)
}

// TellConnected makes every heartbeat tell the sessions connected lists (those with a channel
// open at the machine), so that the site marks disconnected what it holds connected and the
// machine does not carry (Display.Connected).
func (r *Reporter) TellConnected(connected func() []string) {
	r.mu.Lock()
	r.connected = connected
	r.mu.Unlock()
}

// Event reports a direct-mode session event ("connected" or "disconnected").
func (r *Reporter) Event(ctx context.Context, session, event string) {
	if err := r.post(ctx, "/v1/agent/sessions/"+session+"/"+event, map[string]string{}); err != nil {
		r.log.Warn("reporting session event", "session", session, "event", event, "err", err)
	}
}

// endedNews is the agent API's answer to GET /v1/agent/ended (api.EndedNews).
type endedNews struct {
	Feed     string   `json:"feed"`
	Seq      uint64   `json:"seq"`
	Sessions []string `json:"sessions"`
	Revoked  []struct {
		Session string    `json:"session"`
		Before  time.Time `json:"before"`
	} `json:"revoked"`
	Lost bool `json:"lost"`
}

// Ends is what Follow tells of the machine's sessions (Display implements it).
type Ends interface {
	// End ends a session the front door ended.
	End(session string)
	// RevokeBefore revokes a session's tickets issued before before.
	RevokeBefore(session string, before time.Time)
	// Held returns the sessions the machine holds.
	Held() []string
}

// Follow tells m of every session of the machine that ends (logged off, expired) and of
// every revocation of a session's older tickets (taken by another endpoint), from the front
// door's agent API, within moments, until ctx ends: a long poll, tried again a second after a
// failure. When it cannot know what it missed — another front door's feed, or one that forgot
// — it asks the front door which sessions live (GET /v1/agent/live) and ends the others.
func (r *Reporter) Follow(ctx context.Context, m Ends) error {
	path := "/v1/agent/ended?machine=" + url.QueryEscape(r.machine)
	var seq uint64
	feed := ""
	for ctx.Err() == nil {
		var news endedNews
		p := path
		if feed != "" {
			p += "&after=" + strconv.FormatUint(seq, 10)
		}
		if err := r.request(ctx, true, http.MethodGet, p, nil, &news); err != nil {
			if ctx.Err() == nil {
				r.log.Warn("following session ends", "err", err)
			}
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
			continue
		}
		for _, s := range news.Sessions {
			m.End(s)
		}
		for _, rv := range news.Revoked {
			m.RevokeBefore(rv.Session, rv.Before)
		}
		if (feed != "" && news.Feed != feed) || news.Lost {
			if err := r.reconcile(ctx, m); err != nil {
				r.log.Warn("reconciling the machine's sessions with the front door", "err", err)
				feed = "" // ask again from a fresh position
				continue
			}
		}
		seq, feed = news.Seq, news.Feed
	}
	return nil
}

// SiteSessions are the sessions the site holds live (not ended) on a machine, and for those
// whose older tickets were revoked (a steal), the time before which they were.
type SiteSessions struct {
	Sessions      []string
	RevokedBefore map[string]time.Time
}

// Live asks the front door which sessions the site holds live on the machine, and which of
// their tickets it revoked (GET /v1/agent/live).
func (r *Reporter) Live(ctx context.Context) (SiteSessions, error) {
	var live struct {
		Sessions []string `json:"sessions"`
		Revoked  []struct {
			Session string    `json:"session"`
			Before  time.Time `json:"before"`
		} `json:"revoked"`
	}
	if err := r.request(ctx, false, http.MethodGet, "/v1/agent/live?machine="+url.QueryEscape(r.machine), nil, &live); err != nil {
		return SiteSessions{}, err
	}
	out := SiteSessions{Sessions: live.Sessions, RevokedBefore: map[string]time.Time{}}
	for _, rv := range live.Revoked {
		out.RevokedBefore[rv.Session] = rv.Before
	}
	return out, nil
}

// reconcile ends the sessions the machine holds that the front door no longer knows.
func (r *Reporter) reconcile(ctx context.Context, m Ends) error {
	live, err := r.Live(ctx)
	if err != nil {
		return err
	}
	known := map[string]bool{}
	for _, s := range live.Sessions {
		known[s] = true
	}
	for _, s := range m.Held() {
		if !known[s] {
			r.log.Info("a session the site no longer holds: ending it", "session", s)
			m.End(s)
		}
	}
	return nil
}

// siteKeys is the agent API's answer to GET /v1/agent/site-key (api.SiteKeys).
type siteKeys struct {
	Signing   string   `json:"ed25519"`
	Verifying []string `json:"verifying"`
	CA        string   `json:"ca"`
}

// SiteKeys asks the front door for the site's ticket keys: every key tickets are checked
// with (a new one rolled in, an old one until it retires).
func (r *Reporter) SiteKeys(ctx context.Context) ([]ed25519.PublicKey, error) {
	keys, _, err := r.siteKeys(ctx)
	return keys, err
}

// siteKeys is SiteKeys, with the site CA's certificates (PEM, the issuing one first; nil from
// a front door of an older release).
func (r *Reporter) siteKeys(ctx context.Context) ([]ed25519.PublicKey, []byte, error) {
	var k siteKeys
	if err := r.request(ctx, false, http.MethodGet, "/v1/agent/site-key", nil, &k); err != nil {
		return nil, nil, fmt.Errorf("reading the site keys: %w", err)
	}
	list := k.Verifying
	if len(list) == 0 {
		list = []string{k.Signing}
	}
	var out []ed25519.PublicKey
	for _, h := range list {
		b, err := hex.DecodeString(h)
		if err != nil || len(b) != ed25519.PublicKeySize {
			return nil, nil, errors.New("reading the site keys: not an Ed25519 public key")
		}
		out = append(out, ed25519.PublicKey(b))
	}
	var ca []byte
	if k.CA != "" {
		ca = []byte(k.CA)
	}
	return out, ca, nil
}

// FollowKeys rereads the site's ticket keys every interval and hands them to set, until ctx
// ends; a failure is logged and the keys held are kept. It follows the site CA as well
// (followCA).
func (r *Reporter) FollowKeys(ctx context.Context, interval time.Duration, set func([]ed25519.PublicKey)) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		keys, ca, err := r.siteKeys(ctx)
		if err != nil {
			if ctx.Err() == nil {
				r.log.Warn("following the site keys", "err", err)
			}
			continue
		}
		set(keys)
		if ca != nil {
			r.followCA(ctx, ca)
		}
	}
}

// followCA makes the identity in use trust the site CA's certificates ca (PEM, the issuing
// one first), as the agent API gives them, and renews its certificate when the CA that
// issues is not the one that issued it: a rotation of the site CA reaches the agent within
// one FollowKeys interval, without waiting for the certificate's half-life.
func (r *Reporter) followCA(ctx context.Context, ca []byte) {
	r.mu.Lock()
	id := r.id
	r.mu.Unlock()
	if id == nil {
		return
	}
	changed, err := id.trust(ca)
	if err != nil {
		r.log.Warn("the site CA's certificates from the front door cannot be used", "err", err)
		return
	}
	if changed {
		r.log.Info("the site CA's certificates changed: trusting them")
		r.UseIdentity(id)
	}
	if id.issuedByCurrent() {
		return
	}
	if err := r.renew(ctx, id); err != nil {
		r.log.Warn("renewing the machine certificate from the site's new CA", "err", err)
		return
	}
	r.log.Info("renewed the machine certificate from the site's new CA", "not_after", id.NotAfter())
}

// LoadFunc returns a machine's session count, CPU and memory use (percent).
type LoadFunc func() (sessions, cpu, memory int)

// Run sends a heartbeat every interval until ctx ends, with the load that load returns.
func (r *Reporter) Run(ctx context.Context, interval time.Duration, load LoadFunc) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		n, cpu, mem := load()
		if err := r.Heartbeat(ctx, n, cpu, mem); err != nil && ctx.Err() == nil {
			r.log.Warn("heartbeat", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// HostLoad returns the host's CPU load (1-minute load average per core, percent) and memory
// use (percent), from /proc; zeros where /proc is not there.
func HostLoad() (cpu, memory int) {
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(b)); len(f) > 0 {
			if la, err := strconv.ParseFloat(f[0], 64); err == nil {
				cpu = int(la / float64(max(1, runtime.NumCPU())) * 100)
			}
		}
	}
	if f, err := os.Open("/proc/meminfo"); err == nil {
		defer f.Close()
		var total, avail float64
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fs := strings.Fields(sc.Text())
			if len(fs) < 2 {
				continue
			}
			v, _ := strconv.ParseFloat(fs[1], 64)
			switch fs[0] {
			case "MemTotal:":
				total = v
			case "MemAvailable:":
				avail = v
			}
		}
		if total > 0 {
			memory = int((total - avail) / total * 100)
		}
	}
	return min(max(cpu, 0), 100), min(max(memory, 0), 100)
}
