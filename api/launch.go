package api

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/frontdoor-vdi/frontdoor/broker"
	"github.com/frontdoor-vdi/frontdoor/configs"
	"github.com/frontdoor-vdi/frontdoor/internal/ratemap"
	"github.com/frontdoor-vdi/frontdoor/logins"
	"github.com/frontdoor-vdi/frontdoor/pki"
	"github.com/frontdoor-vdi/frontdoor/ticket"
	"github.com/frontdoor-vdi/frontdoor/wire"
	"golang.org/x/crypto/bcrypt"
	"golang.org/x/time/rate"
)

// Broker is what the APIs need of the session broker.
type Broker interface {
	Launch(ctx context.Context, req broker.LaunchRequest) (broker.Decision, error)
	Sessions() []broker.Session
	SessionsOn(machine string) []broker.Session
	Session(id string) (broker.Session, bool)
	Connected(ctx context.Context, id, via string) (broker.Session, error)
	Disconnected(ctx context.Context, id, via string) (broker.Session, error)
	Logoff(ctx context.Context, id string) (broker.Session, error)
	ReportLoad(ctx context.Context, machine string, cpu, memory int) error
	SetSecureGateway(group string, on bool) error
	SetMaintenance(ctx context.Context, machine string, on bool) error
	// Decide is a launch's dry run (the admin API's explain).
	Decide(req broker.LaunchRequest) broker.Decision
	// Machines tells every machine's load and flags (the admin API's machines).
	Machines() []broker.MachineStatus
}

var _ Broker = (*broker.Broker)(nil)

// The launch API's descriptor and its parts, declared once for both ends in package wire.
type (
	// Descriptor is the launch API's answer: where and how the client connects.
	Descriptor = wire.Descriptor
	// DesktopInfo is a descriptor's desktop.
	DesktopInfo = wire.DesktopInfo
	// Channel is one display channel of a session (port and protocol).
	Channel = wire.Channel
	// GatewayEndpoint is one gateway a client may use, as the descriptor lists it.
	GatewayEndpoint = wire.GatewayEndpoint
)

// LaunchOptions configure the launch API.
type LaunchOptions struct {
	// Config is the site configuration (users, machines, gateways, ticket lifetimes).
	Config *configs.Config
	// Logins is the login throttle shared with the process's other APIs. Default: one of
	// this API's own.
	Logins *logins.Throttle
	// Broker answers launches.
	Broker Broker
	// Locate maps a client address to its user-location zone ("" when none).
	Locate func(netip.Addr) string
	// Gateways returns the usable gateways of a zone, best first (health-aware).
	Gateways func(zone string) []GatewayEndpoint
	// Signer issues tickets; Verifier revokes them on logoff.
	Signer   *ticket.Signer
	Verifier *ticket.Verifier
	// OnLogoff is called after a logoff with the session as it was, to cut its channels.
	// Optional.
	OnLogoff func(broker.Session)
	// Ready reports whether the node may take launches: GET /v1/ready answers 200 when it
	// does, 503 while it starts (its first health probes have not decided every gateway
	// yet), for load balancers in front of the front doors and for the lab. Default: always.
	Ready func() bool
	// Logger receives API logs.
	Logger *slog.Logger
	// Now is the clock of logins: one-time codes, the login time sealed into tickets, the
	// login cache. Default: time.Now.
	Now func() time.Time
	// ClientCAs are the CAs whose client certificates log users in (LoadClientCAs), as
	// the listener's ServerTLS trusts them. Default: nil, the site CA alone.
	ClientCAs *pki.ClientCAs
	// Audit receives the portal's sign-ins, launches and logoffs (the admin API's log).
	// Optional.
	Audit AuditLog
	// Events is told when the audit log changes. Optional.
	Events *Notifier
	// Node names this front door in the audit log.
	Node string
}

// Launch serves POST /v1/launch, GET /v1/sessions, POST /v1/sessions/{id}/disconnect|logoff
// and, without a login, GET /v1/ready.
type Launch struct {
	o      LaunchOptions
	mach   map[string]configs.Machine
	desk   map[string]*DesktopInfo // each machine's desktop, as descriptors name it
	log    *slog.Logger
	mux    *http.ServeMux
	authn  *logins.Authenticator
	portal consoleStore // the portal's sessions
	// csp is the portal's Content-Security-Policy, its connect-src the gateways' wss://
	// origins.
	csp     string
	filesMu sync.Mutex // guards files
	files   *ratemap.Map[string]
}

// NewLaunch builds the launch API handler.
func NewLaunch(o LaunchOptions) *Launch {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	l := &Launch{o: o, mach: map[string]configs.Machine{}, desk: map[string]*DesktopInfo{}, log: o.Logger, mux: http.NewServeMux(),
		authn: logins.New(o.Config, logins.Options{Throttle: o.Logins, ClientCAs: o.ClientCAs, Verifier: o.Verifier, Now: o.Now, Logger: o.Logger})}
	l.portal.now, l.portal.limit = o.Now, portalSessions
	l.csp = portalCSP(gatewayWebSockets(o.Config))
	l.files = ratemap.New[string](rate.Every(time.Minute/launchFilesPerMinute), launchFilesPerMinute, portalSessions)
	for _, m := range o.Config.Machines {
		l.mach[m.Name] = m
		if dk := o.Config.DesktopOf(m); dk.Channel != "" {
			if port, proto, err := configs.ParsePortSpec(dk.Channel); err == nil {
				di := &DesktopInfo{Protocol: dk.Protocol, Channel: Channel{Port: uint16(port), Proto: proto},
					ReliabilitySeconds: int(o.Config.Site.Sessions.ReliabilityTimeout.D() / time.Second)}
				if u, uproto, err := configs.ParsePortSpec(dk.UDPChannel(m.DisplayPorts)); err == nil {
					di.UDPChannel = &Channel{Port: uint16(u), Proto: uproto}
				}
				l.desk[m.Name] = di
			}
		}
	}
	if c := o.Config.Site.Auth.MinPasswordCost; c > 0 && c < bcrypt.DefaultCost {
		// (0 is a configuration built in code, without configs.SetDefaults.)
		l.log.Warn("users' password hashes below bcrypt's default cost are accepted (site.auth.min_password_cost): a copy of the configuration gives them up to quick guessing",
			"min_password_cost", c, "default", bcrypt.DefaultCost)
	}
	l.mux.HandleFunc("POST /v1/launch", l.auth(l.launch))
	l.mux.HandleFunc("GET /v1/sessions", l.auth(l.sessions))
	l.mux.HandleFunc("POST /v1/sessions/{id}/disconnect", l.auth(l.sessionAction))
	l.mux.HandleFunc("POST /v1/sessions/{id}/logoff", l.auth(l.sessionAction))
	l.mux.HandleFunc("GET /v1/ready", l.ready)
	l.mux.HandleFunc("GET "+logins.OIDCPath, l.oidcInfo)
	l.routePortal()
	return l
}

// ready answers whether the node takes launches; it says nothing else to the unauthenticated.
func (l *Launch) ready(w http.ResponseWriter, _ *http.Request) {
	if l.o.Ready != nil && !l.o.Ready() {
		writeJSON(w, http.StatusServiceUnavailable, map[string]bool{"ready": false})
		return
	}
	writeJSON(w, http.StatusOK, map[string]bool{"ready": true})
}

// oidcInfo answers which provider and client `frontdoor connect --sso` signs in with; 404
// when the site has no OpenID Connect login.
func (l *Launch) oidcInfo(w http.ResponseWriter, _ *http.Request) {
	o := l.o.Config.Site.Auth.OIDC
	if !o.Enabled() {
		httpError(w, http.StatusNotFound, "this site has no single sign-on (site.auth.oidc)")
		return
	}
	writeJSON(w, http.StatusOK, logins.OIDCInfo{Issuer: o.Issuer, ClientID: o.Native(), Scopes: append([]string{"openid"}, o.Scopes...)})
}

// ServeHTTP implements http.Handler.
func (l *Launch) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	l.mux.ServeHTTP(w, r)
}

func (l *Launch) auth(h func(http.ResponseWriter, *http.Request, logins.Login)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if code, err := crossSiteWrite(r); err != nil {
			httpError(w, code, err.Error())
			return
		}
		if li, ok, err := l.portalLoginOf(r); ok {
			// The portal's page: no Basic challenge, which would open the browser's dialog.
			if err != nil {
				httpError(w, http.StatusUnauthorized, err.Error())
				return
			}
			h(w, r.WithContext(context.WithValue(r.Context(), portalKey{}, true)), li)
			return
		}
		if scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " "); ok && scheme == ticket.LaunchFileScheme {
			if r.Method != http.MethodPost || r.URL.Path != "/v1/launch" {
				httpError(w, http.StatusUnauthorized, "a launch file launches its resource, nothing else")
				return
			}
			li, resource, err := l.launchFileLogin(tok)
			if err != nil {
				l.log.Warn("launch file refused", "from", logins.ClientAddr(r), "err", err)
				httpError(w, http.StatusUnauthorized, "the launch file is not good (opened already, too old, or not this site's): open the resource again at the portal")
				return
			}
			h(w, r.WithContext(context.WithValue(r.Context(), launchFileKey{}, resource)), li)
			return
		}
		li, err := l.authn.Authenticate(r)
		if err != nil {
			loginRefused(w, err, "frontdoor")
			return
		}
		h(w, r, li)
	}
}

// locate returns r's client address and its user-location zone ("" when none).
func (l *Launch) locate(r *http.Request) (netip.Addr, string) {
	client := logins.ClientAddr(r)
	if l.o.Locate == nil || !client.IsValid() {
		return client, ""
	}
	return client, l.o.Locate(client)
}

// LaunchRequest is the body of POST /v1/launch.
type LaunchRequest struct {
	Resource string `json:"resource"`
	Endpoint string `json:"endpoint"`
}

func (l *Launch) launch(w http.ResponseWriter, r *http.Request, li logins.Login) {
	u := li.User
	var req LaunchRequest
	if !readJSON(w, r, &req, 4<<10, "body must be JSON {\"resource\": NAME, \"endpoint\": ID}") {
		return
	}
	if req.Resource == "" {
		httpError(w, http.StatusBadRequest, "body must be JSON {\"resource\": NAME, \"endpoint\": ID}")
		return
	}
	if fromPortal(r) {
		req.Endpoint = BrowserEndpoint + strings.TrimPrefix(req.Endpoint, BrowserEndpoint)
	} else if strings.HasPrefix(req.Endpoint, BrowserEndpoint) {
		httpError(w, http.StatusBadRequest, "endpoints that begin "+BrowserEndpoint+" are the portal's")
		return
	}
	if len(req.Endpoint) > 128 {
		httpError(w, http.StatusBadRequest, "endpoint is longer than 128 bytes")
		return
	}
	if res, ok := r.Context().Value(launchFileKey{}).(string); ok && res != req.Resource {
		httpError(w, http.StatusForbidden, fmt.Sprintf("the launch file opens %s, not %s", res, req.Resource))
		return
	}
	client, zone := l.locate(r)
	d, err := l.o.Broker.Launch(r.Context(), broker.LaunchRequest{User: u.Name, Resource: req.Resource, LocationZone: zone, Endpoint: req.Endpoint, Client: client,
		Factors: li.FactorNames(), Groups: li.Groups})
	if err != nil {
		l.log.Error("launch failed", "user", u.Name, "resource", req.Resource, "err", err)
		httpError(w, http.StatusServiceUnavailable, "launch failed")
		return
	}
	l.log.Info("launch", "user", u.Name, "factors", li.Factors.String(), "resource", req.Resource, "client", client, "location_zone", zone,
		"outcome", d.Outcome, "step", d.Step, "machine", d.Machine, "session", d.Session, "mode", d.Mode, "reason", d.Reason)
	if !u.Admin {
		// The broker's trace names other machines, their load and the site's zones: an
		// admin's to read (frontdoor explain), not every user's.
		d.Trace = nil
	}
	if d.Outcome == broker.OutcomeDenied {
		writeJSON(w, http.StatusForbidden, map[string]any{"error": "denied", "reason": d.Reason, "trace": d.Trace})
		return
	}
	desc, issued, err := l.describe(d, zone, li)
	if err != nil {
		l.log.Error("building descriptor", "session", d.Session, "err", err)
		httpError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	if fromPortal(r) {
		what := "new session"
		if d.Outcome == broker.OutcomeReconnect {
			what = "reconnect"
		}
		l.audit(r, u.Name, "portal.launch", d.Session, fmt.Sprintf("%s: %s on %s in zone %s (%s)", req.Resource, what, d.Machine, d.Zone, d.Mode))
	}
	if d.PreviousEndpoint != "" && l.o.Verifier != nil {
		// The session moves to this endpoint: the old one's tickets stop working site-wide
		// and the channels they opened are cut (the ledger's followers); the new ones work.
		l.revokeOlder(d.Session, d.PreviousEndpoint, req.Endpoint, issued)
	}
	writeJSON(w, http.StatusOK, desc)
}

// revokeOlder revokes the tickets of session issued before issued (its old endpoint's).
// The move is committed already, so a revocation the ledger refuses is tried again, five
// times over half a minute, rather than failing the launch: a client that launched again
// would not move the session a second time, and the old endpoint would keep its tickets.
func (l *Launch) revokeOlder(session, from, to string, issued time.Time) {
	ttl := l.o.Config.Site.Tickets.ReconnectTTL.D()
	err := l.o.Verifier.RevokeBefore(session, issued, ttl)
	if err == nil {
		l.log.Info("session moved to another endpoint: the old one's tickets revoked", "session", session, "from", from, "to", to)
		return
	}
	l.log.Error("revoking the tickets of the endpoint a session moved from; trying again", "session", session, "err", err)
	go func() {
		for wait := time.Second; wait <= 16*time.Second; wait *= 2 {
			time.Sleep(wait)
			if err := l.o.Verifier.RevokeBefore(session, issued, ttl); err == nil {
				l.log.Info("the old endpoint's tickets revoked", "session", session, "from", from)
				return
			}
		}
		l.log.Error("the old endpoint's tickets could not be revoked: its channels stay until they end", "session", session, "from", from)
	}()
}

// describe turns a decision into the connection descriptor with its tickets, which seal the
// login li (user, factors, its time and the end of its factor lifetime), and returns when
// the first of them was issued.
func (l *Launch) describe(d broker.Decision, zone string, li logins.Login) (Descriptor, time.Time, error) {
	desc := Descriptor{SessionID: d.Session, Outcome: string(d.Outcome), Mode: d.Mode, Machine: d.Machine, Zone: d.Zone,
		Step: d.Step, StepLabel: d.StepLabel, PreferredZone: d.PreferredZone, PreferredSource: d.PreferredZoneSource, LocationZone: zone,
		Why: whyThere(d, zone), Trace: d.Trace}
	m := l.mach[d.Machine]
	var chans []ticket.Channel
	for _, p := range m.DisplayPorts {
		port, proto, err := configs.ParsePortSpec(p)
		if err != nil {
			return desc, time.Time{}, err
		}
		desc.Channels = append(desc.Channels, Channel{Port: uint16(port), Proto: proto})
		chans = append(chans, ticket.Channel{Port: uint16(port), Proto: proto})
	}
	desc.Desktop = l.desk[d.Machine]
	if d.Mode != "gateway" {
		// Direct: the client talks to the machine, whose agent checks the same tickets.
		desc.Address = m.Address.String()
	} else {
		if l.o.Gateways != nil {
			desc.Gateways = l.o.Gateways(d.Zone)
		}
		if len(desc.Gateways) == 0 {
			return desc, time.Time{}, fmt.Errorf("no healthy gateway for zone %s", d.Zone)
		}
	}
	t := l.o.Config.Site.Tickets
	c := ticket.Claims{Session: d.Session, Machine: d.Machine, Mode: d.Mode, Channels: chans, User: li.User.Name, Factors: li.Factors, AuthTime: li.At}
	if life := l.o.Config.Site.Auth.FactorLifetime.D(); life > 0 {
		c.LoginExpires = li.At.Add(life)
	}
	lt, rt, lc, err := l.o.Signer.IssueLaunch(c, t.LaunchTTL.D(), t.ReconnectTTL.D())
	if err != nil {
		return desc, time.Time{}, err
	}
	desc.LaunchTicket, desc.ReconnectTicket = lt, rt
	return desc, lc.Issued, nil
}
