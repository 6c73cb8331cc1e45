package api

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/frontdoor-vdi/frontdoor/broker"
	"github.com/frontdoor-vdi/frontdoor/configs"
	"github.com/frontdoor-vdi/frontdoor/health"
	"github.com/frontdoor-vdi/frontdoor/logins"
	"github.com/frontdoor-vdi/frontdoor/pki"
	"github.com/frontdoor-vdi/frontdoor/ticket"
	"github.com/frontdoor-vdi/frontdoor/wire"
	"github.com/frontdoor-vdi/frontdoor/zonemap"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// AdminOptions configure the admin API.
type AdminOptions struct {
	// Config is the site configuration.
	Config *configs.Config
	// Broker is switched by the secure-gateway toggle and reports sessions.
	Broker Broker
	// Zone is the zone of this front door.
	Zone string
	// Modes keeps the secure-gateway toggles, in the site's settings: a toggle at any front
	// door reaches every node, which calls ApplyModes. Default: none, the toggles are kept
	// in memory.
	Modes ModeStore
	// Override sets an admin override on a gateway's health at this front door: "up",
	// "down", "drain" or "auto" (follow the probes again), and returns a note for the
	// operator, if any. An unknown gateway is an error wrapping ErrUnknownGateway, one the
	// front door refuses now wraps ErrRefused. Optional: without it POST /v1/admin/health
	// answers 501.
	Override func(gateway, override string) (note string, err error)
	// Registry is served on /metrics, to admins and monitors (read-only operators: the
	// metrics name machines and gateways and show the site's load, as the console does).
	// Optional.
	Registry *prometheus.Registry
	// Logger receives admin logs (every toggle is logged).
	Logger *slog.Logger
	// Logins is the login throttle shared with the process's other APIs. Default: one of
	// this API's own.
	Logins *logins.Throttle
	// Node names this front door in the audit log.
	Node string
	// Audit keeps every admin action (who, when, from where, what). Optional: without it
	// actions are only logged.
	Audit AuditLog
	// Events tells the console's event streams what changed. Optional: without it
	// GET /v1/admin/events is not served.
	Events *Notifier
	// Verifier revokes the tickets of the sessions an admin logs off or disconnects, which
	// cuts their channels at every gateway and machine of the site. Optional.
	Verifier *ticket.Verifier
	// OnLogoff is called after an admin's logoff with the session as it was, to cut its
	// channels here (the launch API's OnLogoff). Optional.
	OnLogoff func(broker.Session)
	// Locate maps a client address to its user-location zone, for POST /v1/admin/explain.
	// Optional: without it an explain takes a location_zone only.
	Locate func(netip.Addr) zonemap.Result
	// DrillDir keeps the drill reports uploaded to this front door (POST /v1/admin/drills).
	// Optional: without it the drill endpoints answer 501.
	DrillDir string
	// ClientCAs are the CAs whose client certificates log users in (LaunchOptions.ClientCAs).
	// Default: nil, the site CA alone.
	ClientCAs *pki.ClientCAs

	AdminKeys  // the site's keys and credentials, for the endpoints that change them
	AdminViews // what the status page and the console read
}

// AdminKeys are the admin API's hands on the site's keys and credentials: the ticket signing
// key, the site CA, the DNSSEC keys and machines' credentials. Each is optional: without it
// its endpoints answer 501.
type AdminKeys struct {
	// Signer issues the machines' enrolment tickets (POST /v1/admin/enrolment). Optional:
	// without it the endpoint answers 501.
	Signer *ticket.Signer
	// RotateKey rolls a new ticket signing key into the site (POST /v1/admin/rotate-key);
	// with now, every older key retires the moment it signs (a leaked key).
	// Optional: without it the endpoint answers 501.
	RotateKey func(ctx context.Context, now bool) (Rotation, error)
	// CA describes the site CA (GET /v1/admin/ca); RotateCA takes a step of a rotation of it
	// (POST /v1/admin/rotate-ca): a step that does not fit the rotation wraps ErrRefused.
	// Optional: without them the endpoints answer 501.
	CA       func(ctx context.Context) (pki.CAStatus, error)
	RotateCA func(ctx context.Context, step string) (pki.CAStatus, error)
	// DNSSEC holds the signed GSLB domains' keys (GET /v1/admin/dnssec) and rolls them over
	// (POST /v1/admin/dnssec/rollover). Optional: without it the endpoints answer 501.
	DNSSEC DNSSECKeys
	// RevokeMachine revokes a machine's credentials site-wide (POST
	// /v1/admin/machines/{name}/revoke): every certificate and enrolment ticket issued to it
	// until now, and its token; it ends the machine's sessions and puts it in maintenance.
	// Optional: without it the endpoint answers 501.
	RevokeMachine func(ctx context.Context, machine string) (MachineRevocation, error)
}

// AdminViews are what the admin API's status page and the console read of the site.
type AdminViews struct {
	// Store describes the store for the status page (backend, members, nodes). Optional.
	Store func(ctx context.Context) any
	// Agents supplies the machines' last heartbeats for the status page. Optional.
	Agents *Agents
	// Health returns each gateway's eligibility and per-port detail for the status page.
	Health func() map[string]string
	// Checker is the health checker the views read (GET /v1/admin/gateways, machines'
	// health). Optional: without it GET /v1/admin/gateways answers 501.
	Checker HealthView
	// Registrations returns where the machines' agents are registered, site-wide. Optional:
	// without it the machines that send heartbeats to Agents are registered here.
	Registrations func() map[string]Registration
}

// Admin serves the admin API: status, the secure-gateway toggle, agent heartbeats and
// /metrics.
type Admin struct {
	o     AdminOptions
	users map[string]configs.User
	mux   *http.ServeMux
	log   *slog.Logger

	authn *logins.Authenticator

	console   consoleStore
	streamsMu sync.Mutex // guards streams
	streams   int        // event streams open

	mu    sync.Mutex // guards modes
	modes map[string]bool

	drills drillCache
}

// NewAdmin builds the admin handler and shows the toggles kept in Modes.
func NewAdmin(o AdminOptions) (*Admin, error) {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	a := &Admin{o: o, users: map[string]configs.User{}, mux: http.NewServeMux(), log: o.Logger, modes: map[string]bool{},
		authn: logins.New(o.Config, logins.Options{Throttle: o.Logins, ClientCAs: o.ClientCAs, Verifier: o.Verifier, Logger: o.Logger})}
	for _, u := range o.Config.Users {
		a.users[u.Name] = u
	}
	for _, g := range o.Config.Groups {
		a.modes[g.Name] = *g.SecureGateway
	}
	if o.Modes != nil {
		a.ApplyModes(o.Modes.Modes())
	}
	a.mux.HandleFunc("GET /v1/admin/status", a.admin(a.status))
	a.mux.HandleFunc("POST /v1/admin/gateway", a.admin(a.toggle))
	a.mux.HandleFunc("POST /v1/admin/health", a.admin(a.override))
	a.mux.HandleFunc("POST /v1/admin/rotate-key", a.admin(a.rotateKey))
	a.mux.HandleFunc("POST /v1/admin/enrolment", a.admin(a.enrolment))
	a.mux.HandleFunc("GET /v1/admin/ca", a.admin(a.caShow))
	a.mux.HandleFunc("POST /v1/admin/rotate-ca", a.admin(a.rotateCA))
	a.mux.HandleFunc("GET /v1/admin/dnssec", a.admin(a.dnssecList))
	a.mux.HandleFunc("POST /v1/admin/dnssec/rollover", a.admin(a.dnssecRollover))
	a.mux.HandleFunc("POST /v1/admin/machines/{name}/revoke", a.admin(a.revokeMachine))
	a.mux.HandleFunc("POST /v1/admin/machines/{name}/maintenance", a.admin(a.maintenance))
	a.mux.HandleFunc("GET /v1/admin/audit", a.admin(a.auditList))
	a.mux.HandleFunc("GET /v1/admin/gateways", a.admin(a.gateways))
	a.mux.HandleFunc("GET /v1/admin/machines", a.admin(a.machines))
	a.mux.HandleFunc("GET /v1/admin/sessions", a.admin(a.sessionList))
	a.mux.HandleFunc("POST /v1/admin/sessions/{id}/logoff", a.admin(a.sessionLogoff))
	a.mux.HandleFunc("POST /v1/admin/sessions/{id}/disconnect", a.admin(a.sessionDisconnect))
	a.mux.HandleFunc("POST /v1/admin/explain", a.reader(a.explain))
	a.mux.HandleFunc("GET /v1/admin/drills", a.admin(a.drillList))
	a.mux.HandleFunc("GET /v1/admin/drills/{id}", a.admin(a.drillGet))
	a.mux.HandleFunc("POST /v1/admin/drills", a.admin(a.drillUpload))
	if o.Events != nil {
		a.mux.HandleFunc("GET /v1/admin/events", a.admin(a.events))
	}
	a.routeConsole()
	if o.Registry != nil {
		// Behind the admins' login like the rest: the metrics name sessions' machines and
		// gateways and show the site's load (a scraper sends Basic auth or a client certificate).
		a.mux.HandleFunc("GET /metrics", a.admin(promhttp.HandlerFor(o.Registry, promhttp.HandlerOpts{}).ServeHTTP))
	}
	return a, nil
}

// ServeHTTP implements http.Handler.
func (a *Admin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	limit := int64(64 << 10)
	if r.Method == http.MethodPost && r.URL.Path == "/v1/admin/drills" {
		limit = maxDrillReport // a drill report, checked by its handler
	}
	r.Body = http.MaxBytesReader(w, r.Body, limit)
	a.mux.ServeHTTP(w, r)
}

// admin wraps a handler of the admin API. The caller is a console session (with its CSRF
// token for writes) or presents the password or client certificate of an admin or a monitor:
// a read (GET or HEAD) takes either, a write (any other method) an admin only — a monitor's
// write is answered 403 before its body is read.
func (a *Admin) admin(h http.HandlerFunc) http.HandlerFunc { return a.wrap(h, false) }

// reader wraps a POST that changes nothing (an explain's dry run): monitors may call it too.
func (a *Admin) reader(h http.HandlerFunc) http.HandlerFunc { return a.wrap(h, true) }

// errMonitor refuses a monitor's write.
var errMonitor = errors.New("read-only: a monitor may read the admin API but not change anything; this needs an admin")

func (a *Admin) wrap(h http.HandlerFunc, read bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		u, viaConsole, err := a.consoleUser(r)
		if !viaConsole {
			// A console session's writes carry its CSRF token; any other credential
			// rides with whatever a browser sends, so a write from another site is refused.
			if code, cerr := crossSiteWrite(r); cerr != nil {
				httpError(w, code, cerr.Error())
				return
			}
			var li logins.Login
			li, err = a.authn.Authenticate(r)
			u = li.User
		}
		if err == nil && !u.Admin && !u.Monitor {
			err = logins.ErrNoLogin
		}
		if err != nil {
			if viaConsole && (errors.Is(err, errCSRF) || errors.Is(err, errOrigin)) {
				httpError(w, http.StatusForbidden, err.Error())
				return
			}
			loginRefused(w, err, "frontdoor admin")
			return
		}
		if !u.Admin && !read && r.Method != http.MethodGet && r.Method != http.MethodHead {
			a.log.Warn("a monitor's write refused", "user", u.Name, "method", r.Method, "path", r.URL.Path, "from", logins.ClientAddr(r))
			httpError(w, http.StatusForbidden, errMonitor.Error())
			return
		}
		h(w, r.WithContext(withAdmin(r.Context(), u.Name)))
	}
}

// adminKey keys the authenticated admin's name in a request's context.
type adminKey struct{}

// adminOf returns the name of the admin who made r (by password or client certificate).
func adminOf(r *http.Request) string {
	name, _ := r.Context().Value(adminKey{}).(string)
	return name
}

// ErrUnknownGateway is an override of a gateway the site does not have.
var ErrUnknownGateway = errors.New("unknown gateway")

// ErrRefused is an admin request the front door cannot take now (it is stopping, say).
var ErrRefused = errors.New("refused")

// actionError answers an admin action that failed with err: 404 for what the site does not
// have (ErrUnknownGateway, ErrNotSigned), 409 for what it cannot take now (ErrRefused), else
// 500.
func actionError(w http.ResponseWriter, err error) {
	code := http.StatusInternalServerError
	switch {
	case errors.Is(err, ErrUnknownGateway), errors.Is(err, ErrNotSigned):
		code = http.StatusNotFound
	case errors.Is(err, ErrRefused):
		code = http.StatusConflict
	}
	httpError(w, code, err.Error())
}

func (a *Admin) override(w http.ResponseWriter, r *http.Request) {
	var req wire.OverrideRequest
	if !readJSON(w, r, &req, 4<<10, "body must be JSON {\"gateway\": NAME, \"override\": \"up\"|\"down\"|\"drain\"|\"auto\"}") {
		return
	}
	if _, err := health.ParseOverride(req.Override); err != nil {
		httpError(w, http.StatusBadRequest, err.Error())
		return
	}
	if a.o.Override == nil {
		httpError(w, http.StatusNotImplemented, "this front door has no health checker")
		return
	}
	note, err := a.o.Override(req.Gateway, req.Override)
	if err != nil {
		actionError(w, err)
		return
	}
	a.log.Info("gateway health overridden", "by", adminOf(r), "gateway", req.Gateway, "override", req.Override, "note", note)
	detail := req.Override
	if note != "" {
		detail += "; " + note
	}
	a.record(r, "health.override", req.Gateway, detail)
	out := map[string]any{"gateway": req.Gateway, "override": req.Override}
	if note != "" {
		out["note"] = note
	}
	writeJSON(w, http.StatusOK, out)
}

// EnrolmentTTL is how long an enrolment ticket may be used.
const EnrolmentTTL = time.Hour

// Status is the admin status document.
type Status struct {
	Site          string               `json:"site"`
	Zone          string               `json:"zone"`
	SecureGateway map[string]bool      `json:"secure_gateway"`
	Sessions      map[string]int       `json:"sessions"`
	Gateways      map[string]string    `json:"gateways,omitempty"`
	Machines      map[string]Heartbeat `json:"machines,omitempty"`
	Store         any                  `json:"store,omitempty"`
}

func (a *Admin) status(w http.ResponseWriter, r *http.Request) {
	st := Status{Site: a.o.Config.Site.Name, Zone: a.o.Zone, SecureGateway: map[string]bool{}, Sessions: map[string]int{}, Machines: map[string]Heartbeat{}}
	a.mu.Lock()
	for g, on := range a.modes {
		st.SecureGateway[g] = on
	}
	a.mu.Unlock()
	if a.o.Agents != nil {
		st.Machines = a.o.Agents.Heartbeats()
	}
	st.Sessions = a.sessionCounts()
	if a.o.Health != nil {
		st.Gateways = a.o.Health()
	}
	if a.o.Store != nil {
		st.Store = a.o.Store(r.Context())
	}
	writeJSON(w, http.StatusOK, st)
}
