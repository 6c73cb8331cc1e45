package api

import (
	"errors"
	"fmt"
	"net/http"
	"net/netip"

	"github.com/frontdoor-vdi/frontdoor/broker"
	"github.com/frontdoor-vdi/frontdoor/configs"
)

// ExplainRequest is the body of POST /v1/admin/explain: a launch to decide without making it.
// ClientIP (its user-location zone is the zone map's) and LocationZone are exclusive; with
// neither the launch has no location zone.
type ExplainRequest struct {
	User         string `json:"user"`
	Resource     string `json:"resource"`
	ClientIP     string `json:"client_ip"`
	LocationZone string `json:"location_zone"`
	Endpoint     string `json:"endpoint"`
	// Site is the connecting federation site (global resources); "" for the site of the
	// location zone.
	Site string `json:"site"`
	// Factors are the login's factors (password, certificate, totp, oidc, mfa, radius), for
	// access rules that require some. Default: [password], the usual login.
	Factors []string `json:"factors"`
	// Groups are user groups the login vouches for, as an identity provider's ID token names
	// them (after site.auth.oidc.group_map): they count as the user's, and make an unlisted
	// user one of the site's. Default: none.
	Groups []string `json:"groups"`
}

// Explanation is the answer to POST /v1/admin/explain: the broker's decision as `frontdoor
// explain --json` prints it (outcome, step, step_label, preferred_zone,
// preferred_zone_source, group, machine, address, zone, site, session — "" for a new one —,
// mode, stolen, previous_endpoint, reason, trace), the location zone it used, and the text
// `frontdoor explain` prints.
type Explanation struct {
	broker.Decision
	LocationZone string `json:"location_zone"`
	Text         string `json:"text"`
}

const explainUsage = `body must be JSON {"user": U, "resource": R, "client_ip": IP or "location_zone": Z, "endpoint": E, "factors": [F, ...], "groups": [G, ...]}`

// explain serves POST /v1/admin/explain: the decision the broker takes for the launch now,
// against the live sessions and load, as a dry run (no session is made, nothing reserved). It
// changes nothing: monitors may ask too.
func (a *Admin) explain(w http.ResponseWriter, r *http.Request) {
	var req ExplainRequest
	if !readJSON(w, r, &req, 4<<10, explainUsage) {
		return
	}
	if req.User == "" || req.Resource == "" {
		httpError(w, http.StatusBadRequest, explainUsage)
		return
	}
	if req.ClientIP != "" && req.LocationZone != "" {
		httpError(w, http.StatusBadRequest, "client_ip and location_zone are exclusive: the client's address decides its location zone")
		return
	}
	var pre []string
	var client netip.Addr
	loc := req.LocationZone
	if req.ClientIP != "" {
		addr, err := netip.ParseAddr(req.ClientIP)
		if err != nil {
			httpError(w, http.StatusBadRequest, fmt.Sprintf("client_ip %q is not an IP address", req.ClientIP))
			return
		}
		if a.o.Locate == nil {
			httpError(w, http.StatusNotImplemented, "this front door has no zone map: give a location_zone")
			return
		}
		client = addr.Unmap()
		res := a.o.Locate(client)
		loc = res.Zone
		pre = append(pre, res.Describe(addr))
	}
	if req.Factors == nil {
		req.Factors = []string{configs.FactorPassword}
	}
	for _, f := range req.Factors {
		if err := configs.CheckFactor(f); err != nil {
			httpError(w, http.StatusBadRequest, "factors: "+err.Error())
			return
		}
	}
	d := a.o.Broker.Decide(broker.LaunchRequest{User: req.User, Resource: req.Resource, LocationZone: loc, Endpoint: req.Endpoint, Site: req.Site, Client: client, Factors: req.Factors, Groups: req.Groups})
	d.Trace = append(pre, d.Trace...)
	if d.Trace == nil {
		d.Trace = []string{}
	}
	writeJSON(w, http.StatusOK, Explanation{Decision: d, LocationZone: loc, Text: d.Text()})
}

// whyThere says in one line why a launch lands in d's zone.
func whyThere(d broker.Decision, location string) string {
	step := ""
	if d.StepLabel != "" {
		step = " (step " + d.StepLabel + ")"
	}
	if d.Outcome == broker.OutcomeReconnect {
		return fmt.Sprintf("your session in zone %s goes on%s", d.Zone, step)
	}
	var pref string
	switch d.PreferredZoneSource {
	case broker.SourceUserLocation:
		pref = "the zone you connect from"
		if location != "" {
			pref += " (" + location + ")"
		}
	case broker.SourceUserHome:
		pref = "your home zone (" + d.PreferredZone + ")"
	case broker.SourceApplicationHome:
		pref = "the application's home zone (" + d.PreferredZone + ")"
	default:
		return fmt.Sprintf("zone %s: no preferred zone, the first with a free machine%s", d.Zone, step)
	}
	if d.Zone == d.PreferredZone {
		return fmt.Sprintf("zone %s: %s%s", d.Zone, pref, step)
	}
	return fmt.Sprintf("zone %s: %s has no free machine%s", d.Zone, pref, step)
}

// deniedInWords says why a launch is denied, in a user's words.
func deniedInWords(d broker.Decision) string {
	switch {
	case errors.Is(d.Err, broker.ErrAccessDenied):
		return "an access rule denies it now: " + d.Reason
	case errors.Is(d.Err, broker.ErrNoCapacity), errors.Is(d.Err, broker.ErrNoMachines):
		return "no machine is free for it now"
	}
	if d.Reason != "" {
		return d.Reason
	}
	return "it cannot be launched now"
}
