package api

import (
	"context"
	"crypto"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/frontdoor-vdi/frontdoor/broker"
	"github.com/frontdoor-vdi/frontdoor/configs"
	"github.com/frontdoor-vdi/frontdoor/internal/siteid"
	"github.com/frontdoor-vdi/frontdoor/pki"
	"github.com/frontdoor-vdi/frontdoor/ticket"
)

// AgentsOptions configure the agent API, served beside the launch API.
type AgentsOptions struct {
	// Config is the site configuration.
	Config *configs.Config
	// Broker takes load reports and direct-mode session events.
	Broker Broker
	// Zone is the zone of this front door: agents of other satellite zones are turned away.
	Zone string
	// Key derives the per-machine agent tokens (AgentToken) until SetTokenKeys gives the
	// keys of the site's ticket keys (a rotation).
	Key []byte
	// SitePublicKey is handed to agents so they can check tickets themselves.
	SitePublicKey ed25519.PublicKey
	// CA issues each machine's agent its certificate (POST /v1/agent/certificate). Required
	// for enrolment; without it the endpoint answers 503.
	CA *pki.CA
	// Verifier checks the enrolment tickets an agent may enrol with instead of its token
	// (Admin's POST /v1/admin/enrolment issues them). Optional.
	Verifier *ticket.Verifier
	// Revoked returns the time before which a machine's credentials are revoked (`frontdoor
	// admin revoke-machine`), zero when none are: a certificate issued before then, the
	// machine's token and an enrolment ticket issued before then are refused; it enrols again
	// with a new enrolment ticket. Optional.
	Revoked func(machine string) time.Time
	// Logger receives agent API logs.
	Logger *slog.Logger
}

// Agents serves the machines' agents: POST /v1/agent/heartbeat,
// POST /v1/agent/sessions/{id}/connected|disconnected, POST /v1/agent/certificate,
// GET /v1/agent/ended (the machine's sessions that ended) and GET /v1/agent/site-key.
type Agents struct {
	o     AgentsOptions
	mach  map[string]configs.Machine
	zones map[string]configs.Zone
	mux   *http.ServeMux

	mu   sync.Mutex // guards load
	load map[string]Heartbeat

	ended     ended // sessions that ended, for the agents (GET /v1/agent/ended)
	siteKeys  atomic.Pointer[SiteKeys]
	tokenKeys atomic.Pointer[[][]byte] // the keys an agent token may be made with
}

// SiteKeys is the answer of GET /v1/agent/site-key: the site's ticket keys, in hex.
type SiteKeys struct {
	// Signing is the key that signs now (all an agent of an older release reads).
	Signing string `json:"ed25519"`
	// Verifying are the keys tickets are checked with: the signing key, a new one rolled in,
	// an old one until it retires.
	Verifying []string `json:"verifying"`
	// CA is the site CA's certificates the agents trust, PEM, the one that issues first (two
	// while the site CA is rotated).
	CA string `json:"ca,omitempty"`
}

// SetSiteKeys sets the ticket keys the agents are told of (a key rotation).
func (a *Agents) SetSiteKeys(signing ed25519.PublicKey, verifying []ed25519.PublicKey) {
	k := SiteKeys{Signing: hex.EncodeToString(signing)}
	for _, p := range verifying {
		k.Verifying = append(k.Verifying, hex.EncodeToString(p))
	}
	a.siteKeys.Store(&k)
}

// SetTokenKeys sets the keys whose agent tokens (AgentToken) are taken: those of the site's
// ticket keys that verify now (AgentKey of each), so that rotate-key rotates the tokens too and
// a key retired takes its tokens with it.
func (a *Agents) SetTokenKeys(keys [][]byte) {
	keys = slices.DeleteFunc(slices.Clone(keys), func(k []byte) bool { return len(k) == 0 }) // no key makes no token
	a.tokenKeys.Store(&keys)
}

// CheckToken reports whether tok is machine's agent token under one of the token keys.
func (a *Agents) CheckToken(machine, tok string) bool {
	keys := a.tokenKeys.Load()
	if keys == nil || tok == "" {
		return false
	}
	ok := false
	for _, k := range *keys {
		if subtle.ConstantTimeCompare([]byte(tok), []byte(AgentToken(k, machine))) == 1 {
			ok = true
		}
	}
	return ok
}

// NewAgents builds the agent API handler.
func NewAgents(o AgentsOptions) *Agents {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	a := &Agents{o: o, mach: map[string]configs.Machine{}, zones: map[string]configs.Zone{}, mux: http.NewServeMux(), load: map[string]Heartbeat{}}
	a.SetTokenKeys([][]byte{o.Key})
	for _, m := range o.Config.Machines {
		a.mach[m.Name] = m
	}
	for _, z := range o.Config.Zones {
		a.zones[z.Name] = z
	}
	a.mux.HandleFunc("POST /v1/agent/heartbeat", a.heartbeat)
	a.mux.HandleFunc("POST /v1/agent/sessions/{id}/{event}", a.session)
	a.mux.HandleFunc("POST /v1/agent/certificate", a.certificate)
	a.mux.HandleFunc("GET /v1/agent/ended", a.endedFeed)
	a.mux.HandleFunc("GET /v1/agent/live", a.liveSessions)
	a.ended.id = newFeedID()
	a.SetSiteKeys(o.SitePublicKey, []ed25519.PublicKey{o.SitePublicKey})
	a.mux.HandleFunc("GET /v1/agent/site-key", func(w http.ResponseWriter, _ *http.Request) {
		k := *a.siteKeys.Load()
		if a.o.CA != nil {
			k.CA = string(a.o.CA.CertPEM())
		}
		writeJSON(w, http.StatusOK, k)
	})
	return a
}

// ServeHTTP implements http.Handler.
func (a *Agents) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	a.mux.ServeHTTP(w, r)
}

// Heartbeats returns the last heartbeat of every machine that sent one.
func (a *Agents) Heartbeats() map[string]Heartbeat {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make(map[string]Heartbeat, len(a.load))
	for k, v := range a.load {
		out[k] = v
	}
	return out
}

// AgentKey derives the key of the agent tokens from the site's signing key.
func AgentKey(site ed25519.PrivateKey) []byte {
	sum := sha256.Sum256(append([]byte("frontdoor-agent-key:"), site.Seed()...))
	return sum[:]
}

// AgentToken is the bearer token of a machine's agent: HMAC-SHA256 of the machine name under
// the site's agent key.
func AgentToken(key []byte, machine string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("frontdoor-agent:" + machine))
	return hex.EncodeToString(m.Sum(nil))
}

// Heartbeat is what an agent reports.
type Heartbeat struct {
	Machine  string `json:"machine"`
	Sessions int    `json:"sessions"`
	CPU      int    `json:"cpu"`
	Memory   int    `json:"memory"`
	// Connected are the sessions with a channel open at the machine, when the agent tells
	// (nil: an agent that does not): a session the site holds connected on the machine for
	// longer than reconcileGrace without one is marked disconnected, so that it expires and
	// frees its slot (the node that carried it may have died without a word).
	Connected *[]string `json:"connected,omitempty"`
}

// reconcileGrace is how long a session may be connected in the site without a channel at
// its machine (a channel opens at the gateway a moment before the machine, and the machine
// tells at its next heartbeat).
const reconcileGrace = 30 * time.Second

// ErrWrongZone is answered to an agent that must register with another zone's front door.
var ErrWrongZone = errors.New("register with a front door of your own zone or of the primary zone")

// auth checks that the request comes from machine's agent — its certificate of the site CA
// names the machine, or it presents the machine's token (AgentToken) — and that this front
// door may take its registration: same zone, or the primary zone (never another satellite
// zone).
func (a *Agents) auth(w http.ResponseWriter, r *http.Request, machine string) bool {
	return a.authAs(w, r, machine, false)
}

// authAs is auth that, with enrol, also takes an enrolment ticket of the machine (used up).
func (a *Agents) authAs(w http.ResponseWriter, r *http.Request, machine string, enrol bool) bool {
	m, ok := a.mach[machine]
	tok := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	var revoked time.Time
	if ok && a.o.Revoked != nil {
		revoked = a.o.Revoked(machine)
	}
	switch {
	case !ok:
	case r.TLS != nil && len(r.TLS.VerifiedChains) > 0 && siteid.Is(r.TLS.VerifiedChains[0][0], siteid.RoleMachine, machine):
		if pki.PartyIssued(r.TLS.VerifiedChains[0][0]).Before(revoked) {
			a.o.Logger.Warn("a revoked machine certificate was refused", "machine", machine, "client", r.RemoteAddr)
			ok = false
		}
	case revoked.IsZero() && a.CheckToken(machine, tok):
	case enrol && a.o.Verifier != nil && tok != "":
		key, _ := r.Context().Value(enrolKey{}).(string)
		c, err := a.o.Verifier.CheckEnrolment(tok, machine, key)
		if err == nil && c.Issued.Before(revoked) {
			err = errors.New("the enrolment ticket was issued before the machine was revoked")
		}
		if err != nil {
			a.o.Logger.Warn("enrolment refused", "machine", machine, "client", r.RemoteAddr, "reason", err)
			ok = false
		}
	default:
		ok = false
	}
	if !ok {
		httpError(w, http.StatusUnauthorized, "agent authentication failed")
		return false
	}
	if a.o.Zone != "" && m.Zone != a.o.Zone && !a.zones[a.o.Zone].Primary {
		httpError(w, http.StatusMisdirectedRequest, fmt.Sprintf("%v: machine zone %s, this front door serves %s", ErrWrongZone, m.Zone, a.o.Zone))
		return false
	}
	return true
}

func (a *Agents) heartbeat(w http.ResponseWriter, r *http.Request) {
	var hb Heartbeat
	if !readJSON(w, r, &hb, 1<<20, "body must be a JSON heartbeat") {
		return
	}
	if !a.auth(w, r, hb.Machine) {
		return
	}
	hb.CPU, hb.Memory = clamp(hb.CPU), clamp(hb.Memory)
	if err := a.o.Broker.ReportLoad(r.Context(), hb.Machine, hb.CPU, hb.Memory); err != nil {
		httpError(w, http.StatusInternalServerError, err.Error())
		return
	}
	if hb.Connected != nil {
		a.reconcile(r.Context(), hb.Machine, *hb.Connected)
	}
	hb.Connected = nil
	a.mu.Lock()
	a.load[hb.Machine] = hb
	a.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// reconcile marks disconnected the sessions the site holds connected on machine, for longer
// than reconcileGrace, that the machine says have no channel.
func (a *Agents) reconcile(ctx context.Context, machine string, connected []string) {
	has := make(map[string]bool, len(connected))
	for _, id := range connected {
		has[id] = true
	}
	for _, s := range a.o.Broker.SessionsOn(machine) {
		if s.State != broker.StateConnected || has[s.ID] || time.Since(s.Changed) < reconcileGrace {
			continue
		}
		if _, err := a.o.Broker.Disconnected(ctx, s.ID, ""); err != nil {
			a.o.Logger.Warn("marking a session without a channel disconnected", "session", s.ID, "machine", machine, "err", err)
			continue
		}
		a.o.Logger.Info("a session connected in the site had no channel at its machine: marked disconnected", "session", s.ID, "machine", machine, "since", s.Changed)
	}
}

// agentSession takes direct-mode connect and disconnect reports from a machine's agent.
func (a *Agents) session(w http.ResponseWriter, r *http.Request) {
	id, ev := r.PathValue("id"), r.PathValue("event")
	s, ok := a.o.Broker.Session(id)
	if !ok {
		httpError(w, http.StatusNotFound, "no such session")
		return
	}
	if !a.auth(w, r, s.Machine) {
		return
	}
	var err error
	switch ev {
	case "connected":
		_, err = a.o.Broker.Connected(r.Context(), id, "direct")
	case "disconnected":
		_, err = a.o.Broker.Disconnected(r.Context(), id, "direct")
	default:
		httpError(w, http.StatusNotFound, "event must be connected or disconnected")
		return
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		httpError(w, http.StatusConflict, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// enrolKey keys, in an enrolment request's context, the id of the key it asks a certificate
// for: the same request again (a retry at another front door) is not a replay.
type enrolKey struct{}

// keyIDOf names a public key: hex of the first 8 bytes of SHA-256 of its PKIX form.
func keyIDOf(pub crypto.PublicKey) string {
	der, _ := x509.MarshalPKIXPublicKey(pub)
	sum := sha256.Sum256(der)
	return hex.EncodeToString(sum[:8])
}

// Enrolment is a machine agent's certificate request and the answer to it.
type Enrolment struct {
	// Machine names the machine; its token authenticates the request.
	Machine string `json:"machine"`
	// CSR is the agent's PEM certificate request: only its public key is used.
	CSR string `json:"csr,omitempty"`
	// Certificate is the issued PEM certificate (role machine, the machine's name and address).
	Certificate string `json:"certificate,omitempty"`
	// CA is the site CA's PEM certificate, which the agent trusts for gateways' certificates.
	CA string `json:"ca,omitempty"`
}

// certificate issues a machine's agent its certificate from the site CA: it names the
// machine (package siteid) and its configured address, whatever the request asks.
func (a *Agents) certificate(w http.ResponseWriter, r *http.Request) {
	var req Enrolment
	if !readJSON(w, r, &req, 16<<10, "body must be a JSON enrolment") {
		return
	}
	if a.o.CA == nil {
		httpError(w, http.StatusServiceUnavailable, "this front door issues no certificates")
		return
	}
	// The request is checked whole before an enrolment ticket is used up (authAs).
	pub, err := pki.PublicKeyFromCSR([]byte(req.CSR))
	if err != nil {
		httpError(w, http.StatusBadRequest, err.Error())
		return
	}
	addr := a.mach[req.Machine].Address
	if _, known := a.mach[req.Machine]; known && !addr.IsValid() {
		httpError(w, http.StatusInternalServerError, "the machine has no address in the config")
		return
	}
	if !a.authAs(w, r.WithContext(context.WithValue(r.Context(), enrolKey{}, keyIDOf(pub))), req.Machine, true) {
		return
	}
	der, err := a.o.CA.IssueParty(siteid.RoleMachine, req.Machine, []netip.Addr{addr}, pub, pki.PartyTTL)
	if err != nil {
		httpError(w, http.StatusInternalServerError, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, Enrolment{Machine: req.Machine,
		Certificate: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})), CA: string(a.o.CA.CertPEM())})
}

func clamp(p int) int { return min(max(p, 0), 100) }

// Handler serves the launch API and the agent API on one listener.
func Handler(l *Launch, a *Agents) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/v1/agent/", a)
	mux.Handle("/", l)
	return mux
}
