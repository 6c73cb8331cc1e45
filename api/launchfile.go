package api

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/frontdoor-vdi/frontdoor/broker"
	"github.com/frontdoor-vdi/frontdoor/logins"
	"github.com/frontdoor-vdi/frontdoor/ticket"
)

// launchFileKey holds, in a request's context, the resource of the launch file that logged it
// in.
type launchFileKey struct{}

// launchFile serves POST /v1/launch-file {"resource": R} to the portal's page: a launch file
// (ticket.LaunchFileDoc) that `frontdoor connect --file` opens once, within
// ticket.LaunchFileTTL, as the portal's login. The page downloads it.
func (l *Launch) launchFile(w http.ResponseWriter, r *http.Request, li logins.Login) {
	if !fromPortal(r) {
		httpError(w, http.StatusForbidden, "launch files are made for the portal's sign-ins")
		return
	}
	if len(li.Groups) > 0 {
		// A ticket seals no groups: a login that an identity provider's groups vouch for
		// would lose them.
		httpError(w, http.StatusForbidden, "a single sign-on login opens its desktops in the browser: launch files carry no identity provider's groups")
		return
	}
	var req LaunchRequest
	if !readJSON(w, r, &req, 4<<10, `body must be JSON {"resource": NAME}`) {
		return
	}
	if req.Resource == "" || len(req.Resource) > 255 {
		httpError(w, http.StatusBadRequest, `body must be JSON {"resource": NAME}`)
		return
	}
	l.filesMu.Lock()
	ok := l.files.Get(li.User.Name, time.Now()).Allow()
	l.filesMu.Unlock()
	if !ok {
		w.Header().Set("Retry-After", "10")
		httpError(w, http.StatusTooManyRequests, fmt.Sprintf("at most %d launch files a minute", launchFilesPerMinute))
		return
	}
	// Entitled, and not denied now: a file for anything else would only be refused later.
	client, zone := l.locate(r)
	d := l.o.Broker.Decide(broker.LaunchRequest{User: li.User.Name, Resource: req.Resource, LocationZone: zone, Client: client,
		Factors: li.FactorNames(), Groups: li.Groups})
	if d.Outcome == broker.OutcomeDenied {
		writeJSON(w, http.StatusForbidden, map[string]any{"error": "denied", "reason": deniedInWords(d)})
		return
	}
	c := ticket.Claims{Kind: ticket.LaunchFile, Session: req.Resource, User: li.User.Name, Factors: li.Factors, AuthTime: li.At}
	if life := l.o.Config.Site.Auth.FactorLifetime.D(); life > 0 {
		c.LoginExpires = li.At.Add(life)
	}
	tok, c, err := l.o.Signer.Issue(c, ticket.LaunchFileTTL)
	if err != nil {
		httpError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	doc := ticket.LaunchFileDoc{Version: ticket.LaunchFileVersion, Site: l.o.Config.Site.Name, LaunchURLs: []string{"https://" + r.Host},
		Resource: req.Resource, User: li.User.Name, Ticket: tok, Expires: c.Expires.UTC()}
	l.audit(r, li.User.Name, "portal.launch-file", req.Resource, "valid until "+c.Expires.UTC().Format(time.RFC3339))
	w.Header().Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", req.Resource+".fdlaunch"))
	writeJSON(w, http.StatusOK, doc)
}

// launchFileLogin checks a launch file's ticket (using it up) and returns its login and
// resource.
func (l *Launch) launchFileLogin(tok string) (logins.Login, string, error) {
	if l.o.Verifier == nil {
		return logins.Login{}, "", errors.New("this front door checks no tickets")
	}
	c, err := l.o.Verifier.CheckLaunchFile(tok)
	if err != nil {
		return logins.Login{}, "", err
	}
	u, ok := l.authn.User(c.User)
	if !ok {
		return logins.Login{}, "", fmt.Errorf("the launch file's user %q is not the site's", c.User)
	}
	return logins.Login{User: u, Factors: c.Factors, At: c.AuthTime}, c.Session, nil
}
