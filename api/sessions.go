package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/frontdoor-vdi/frontdoor/broker"
)

// AdminSession is one session in GET /v1/admin/sessions.
type AdminSession struct {
	ID       string `json:"id"`
	User     string `json:"user"`
	Resource string `json:"resource"`
	Group    string `json:"group"`
	Machine  string `json:"machine"`
	Zone     string `json:"zone"`
	// State is pending, connected or disconnected.
	State string `json:"state"`
	// Mode is gateway or direct, fixed at launch.
	Mode string `json:"mode"`
	// Via is what carries (or last carried) its channels: a gateway's name, "direct" (its
	// machine reported it), or "" before its client connected.
	Via      string `json:"via"`
	Endpoint string `json:"endpoint"`
	// Browser: the session was launched from the portal, to show its desktop in the browser.
	Browser bool      `json:"browser,omitempty"`
	Created time.Time `json:"created"`
	Changed time.Time `json:"changed"`
	// Expires is when a pending or disconnected session ends; absent for a connected one.
	Expires time.Time `json:"expires,omitzero"`
}

// SessionList is the answer to GET /v1/admin/sessions.
type SessionList struct {
	// Sessions are the sessions that match, newest first, at most maxListedSessions.
	Sessions []AdminSession `json:"sessions"`
	// Matched counts every session that matches.
	Matched int `json:"matched"`
	// Truncated: more sessions match than are listed (narrow the search).
	Truncated bool `json:"truncated"`
}

// maxListedSessions bounds a session list.
const maxListedSessions = 500

func adminSession(s broker.Session) AdminSession {
	return AdminSession{ID: s.ID, User: s.User, Resource: s.Resource, Group: s.Group, Machine: s.Machine, Zone: s.Zone,
		State: string(s.State), Mode: s.Mode, Via: s.Via, Endpoint: s.Endpoint, Browser: strings.HasPrefix(s.Endpoint, BrowserEndpoint), Created: s.Created.UTC(),
		Changed: s.Changed.UTC(), Expires: s.Expires.UTC()}
}

// sessionList serves GET /v1/admin/sessions?user=&machine=&state=&mode=&gateway=: the
// site's live sessions, newest first, at most 500. user and machine match a part of the name
// (any case); state (pending, connected, disconnected), mode (gateway, direct) and gateway
// (what carries it: a gateway's name, or direct) match exactly.
func (a *Admin) sessionList(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	user, machine := strings.ToLower(q.Get("user")), strings.ToLower(q.Get("machine"))
	state, mode, via := q.Get("state"), q.Get("mode"), q.Get("gateway")
	if state != "" && !slices.Contains([]string{"pending", "connected", "disconnected"}, state) {
		httpError(w, http.StatusBadRequest, "state must be pending, connected or disconnected")
		return
	}
	if mode != "" && mode != "gateway" && mode != "direct" {
		httpError(w, http.StatusBadRequest, "mode must be gateway or direct")
		return
	}
	ss := a.o.Broker.Sessions() // by Created, oldest first
	out := SessionList{Sessions: []AdminSession{}}
	for i := len(ss) - 1; i >= 0; i-- {
		s := ss[i]
		if !strings.Contains(strings.ToLower(s.User), user) || !strings.Contains(strings.ToLower(s.Machine), machine) ||
			(state != "" && string(s.State) != state) || (mode != "" && s.Mode != mode) || (via != "" && s.Via != via) {
			continue
		}
		out.Matched++
		if len(out.Sessions) < maxListedSessions {
			out.Sessions = append(out.Sessions, adminSession(s))
		}
	}
	out.Truncated = out.Matched > len(out.Sessions)
	writeJSON(w, http.StatusOK, out)
}

// SessionAction is the answer to POST /v1/admin/sessions/{id}/logoff|disconnect.
type SessionAction struct {
	ID      string `json:"id"`
	User    string `json:"user"`
	Machine string `json:"machine"`
	// State is the session's state after the action: ended or disconnected.
	State string `json:"state"`
}

// sessionLogoff serves POST /v1/admin/sessions/{id}/logoff: the session ends as the launch
// API's logoff ends it — its slot is freed, its tickets are revoked site-wide, and its
// channels are cut at every gateway and at its machine.
func (a *Admin) sessionLogoff(w http.ResponseWriter, r *http.Request) {
	s, ok := a.o.Broker.Session(r.PathValue("id"))
	if !ok {
		httpError(w, http.StatusNotFound, "no such session")
		return
	}
	err := logoff(r.Context(), a.o.Broker, a.o.Verifier, a.o.Config.Site.Tickets.ReconnectTTL.D(), a.o.OnLogoff, s)
	if err != nil {
		sessionActionError(w, err)
		return
	}
	a.log.Info("session logged off by an admin", "by", adminOf(r), "session", s.ID, "user", s.User, "machine", s.Machine)
	a.record(r, "session.logoff", s.ID, fmt.Sprintf("%s's %s session of %s on %s (%s) ended", s.User, s.State, s.Resource, s.Machine, s.Mode))
	writeJSON(w, http.StatusOK, SessionAction{ID: s.ID, User: s.User, Machine: s.Machine, State: string(broker.StateEnded)})
}

// sessionDisconnect serves POST /v1/admin/sessions/{id}/disconnect, for a connected session:
// it is marked disconnected (kept for its group's disconnect_timeout, then it ends) and the
// tickets it holds are revoked site-wide, which cuts its channels at every gateway and at its
// machine; its client gets back into it only by launching again (frontdoor connect does so by
// itself), which reconnects it with new tickets.
func (a *Admin) sessionDisconnect(w http.ResponseWriter, r *http.Request) {
	s, ok := a.o.Broker.Session(r.PathValue("id"))
	if !ok {
		httpError(w, http.StatusNotFound, "no such session")
		return
	}
	if s.State != broker.StateConnected {
		httpError(w, http.StatusConflict, fmt.Sprintf("the session is %s, not connected", s.State))
		return
	}
	// Tickets tell their issue to the millisecond: those of the disconnect's own millisecond
	// (a launch that came just after it) are kept.
	at := time.Now().Truncate(time.Millisecond)
	if _, err := a.o.Broker.Disconnected(r.Context(), s.ID, ""); err != nil {
		sessionActionError(w, err)
		return
	}
	if a.o.Verifier != nil {
		if err := a.o.Verifier.RevokeBefore(s.ID, at, a.o.Config.Site.Tickets.ReconnectTTL.D()); err != nil {
			httpError(w, http.StatusServiceUnavailable, "disconnected, but its channels are not cut: its tickets could not be revoked: "+err.Error())
			return
		}
	}
	a.log.Info("session disconnected by an admin", "by", adminOf(r), "session", s.ID, "user", s.User, "machine", s.Machine, "via", s.Via)
	a.record(r, "session.disconnect", s.ID, fmt.Sprintf("%s's session of %s on %s, via %s, disconnected and its channels cut", s.User, s.Resource, s.Machine, s.Via))
	writeJSON(w, http.StatusOK, SessionAction{ID: s.ID, User: s.User, Machine: s.Machine, State: string(broker.StateDisconnected)})
}

func sessionActionError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, context.Canceled):
	case errors.Is(err, broker.ErrNoSession):
		httpError(w, http.StatusNotFound, "no such session")
	case errors.Is(err, broker.ErrBadTransition), errors.Is(err, broker.ErrConflict):
		httpError(w, http.StatusConflict, err.Error())
	default:
		httpError(w, http.StatusServiceUnavailable, err.Error())
	}
}
