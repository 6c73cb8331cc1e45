package api

import (
	"context"
	"errors"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/frontdoor-vdi/frontdoor/broker"
	"github.com/frontdoor-vdi/frontdoor/logins"
	"github.com/frontdoor-vdi/frontdoor/ticket"
)

// SessionView is a session as GET /v1/sessions shows it.
type SessionView struct {
	ID       string    `json:"id"`
	Resource string    `json:"resource"`
	Machine  string    `json:"machine"`
	Zone     string    `json:"zone"`
	State    string    `json:"state"`
	Mode     string    `json:"mode"`
	Endpoint string    `json:"endpoint,omitempty"`
	Created  time.Time `json:"created"`
}

func (l *Launch) sessions(w http.ResponseWriter, _ *http.Request, li logins.Login) {
	out := []SessionView{}
	for _, s := range l.o.Broker.Sessions() {
		if s.User == li.User.Name {
			out = append(out, SessionView{ID: s.ID, Resource: s.Resource, Machine: s.Machine, Zone: s.Zone, State: string(s.State), Mode: s.Mode, Endpoint: s.Endpoint, Created: s.Created})
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func (l *Launch) sessionAction(w http.ResponseWriter, r *http.Request, li logins.Login) {
	id := r.PathValue("id")
	s, ok := l.o.Broker.Session(id)
	if !ok || s.User != li.User.Name {
		httpError(w, http.StatusNotFound, "no such session")
		return
	}
	var err error
	if strings.HasSuffix(r.URL.Path, "/logoff") {
		err = logoff(r.Context(), l.o.Broker, l.o.Verifier, l.o.Config.Site.Tickets.ReconnectTTL.D(), l.o.OnLogoff, s)
	} else {
		_, err = l.o.Broker.Disconnected(r.Context(), id, "") // the user asks: whatever carries it
	}
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return
		}
		httpError(w, http.StatusConflict, err.Error())
		return
	}
	if fromPortal(r) {
		l.audit(r, li.User.Name, "portal."+path.Base(r.URL.Path), id, s.Resource+" on "+s.Machine)
	}
	s, _ = l.o.Broker.Session(id)
	writeJSON(w, http.StatusOK, map[string]string{"id": id, "state": string(s.State)})
}

// logoff ends session s, the one way the launch and admin APIs log a session off: the broker
// ends it and frees its slot, its tickets are revoked site-wide for ttl (the longest one of
// them lives), and onLogoff (the node: optional) cuts its channels at the gateways here and
// tells its machine's agent; the other nodes cut theirs when the site database tells them.
func logoff(ctx context.Context, b Broker, v *ticket.Verifier, ttl time.Duration, onLogoff func(broker.Session), s broker.Session) error {
	if _, err := b.Logoff(ctx, s.ID); err != nil {
		return err
	}
	if v != nil {
		if err := v.Revoke(s.ID, ttl); err != nil {
			return err
		}
	}
	if onLogoff != nil {
		onLogoff(s)
	}
	return nil
}
