package api

import (
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/frontdoor-vdi/frontdoor/configs"
	"github.com/frontdoor-vdi/frontdoor/ticket"
)

// EnrolmentTicket is the answer to POST /v1/admin/enrolment {"machine": NAME}: a ticket the
// machine's agent enrols with once (frontdoor agent --token), within EnrolmentTTL.
type EnrolmentTicket struct {
	Machine string    `json:"machine"`
	Token   string    `json:"token"`
	Expires time.Time `json:"expires"`
}

func (a *Admin) enrolment(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Machine string `json:"machine"`
	}
	if !readJSON(w, r, &req, 4<<10, "body must be JSON {\"machine\": NAME}") {
		return
	}
	if !slices.ContainsFunc(a.o.Config.Machines, func(m configs.Machine) bool { return m.Name == req.Machine }) {
		httpError(w, http.StatusNotFound, fmt.Sprintf("no machine %q in the site", req.Machine))
		return
	}
	if a.o.Signer == nil {
		httpError(w, http.StatusNotImplemented, "this front door issues no tickets")
		return
	}
	tok, c, err := a.o.Signer.Issue(ticket.Claims{Kind: ticket.Enrol, Machine: req.Machine}, EnrolmentTTL)
	if err != nil {
		httpError(w, http.StatusInternalServerError, err.Error())
		return
	}
	a.log.Info("enrolment ticket issued", "by", adminOf(r), "machine", req.Machine, "expires", c.Expires)
	a.record(r, "machine.enrol", req.Machine, "enrolment ticket good until "+c.Expires.UTC().Format(time.RFC3339))
	writeJSON(w, http.StatusOK, EnrolmentTicket{Machine: req.Machine, Token: tok, Expires: c.Expires})
}

// MachineRevocation is the answer to POST /v1/admin/machines/{name}/revoke.
type MachineRevocation struct {
	Machine string `json:"machine"`
	// Before: credentials issued before then are refused.
	Before time.Time `json:"revoked_before"`
	// Ended are the machine's sessions, logged off.
	Ended []string `json:"ended_sessions"`
	// Maintenance: the machine takes no new session until an operator takes it out.
	Maintenance bool   `json:"maintenance"`
	Note        string `json:"note"`
}

func (a *Admin) revokeMachine(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if !slices.ContainsFunc(a.o.Config.Machines, func(m configs.Machine) bool { return m.Name == name }) {
		httpError(w, http.StatusNotFound, fmt.Sprintf("no machine %q in the site", name))
		return
	}
	if a.o.RevokeMachine == nil {
		httpError(w, http.StatusNotImplemented, "this front door cannot revoke machines")
		return
	}
	rev, err := a.o.RevokeMachine(r.Context(), name)
	if err != nil {
		actionError(w, err)
		return
	}
	a.log.Warn("machine revoked", "by", adminOf(r), "machine", name, "before", rev.Before, "ended_sessions", len(rev.Ended))
	a.record(r, "machine.revoke", name, fmt.Sprintf("credentials issued before %s refused; %d sessions logged off; maintenance on",
		rev.Before.UTC().Format(time.RFC3339Nano), len(rev.Ended)))
	writeJSON(w, http.StatusOK, rev)
}

// maintenance puts a machine in maintenance ({"on": true}: it takes no new session, its
// sessions carry on and reconnect) or takes it out, site-wide.
func (a *Admin) maintenance(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	var req struct {
		On *bool `json:"on"`
	}
	if !readJSON(w, r, &req, 4<<10, "body must be JSON {\"on\": true|false}") {
		return
	}
	if req.On == nil {
		httpError(w, http.StatusBadRequest, "body must be JSON {\"on\": true|false}")
		return
	}
	if !slices.ContainsFunc(a.o.Config.Machines, func(m configs.Machine) bool { return m.Name == name }) {
		httpError(w, http.StatusNotFound, fmt.Sprintf("no machine %q in the site", name))
		return
	}
	if err := a.o.Broker.SetMaintenance(r.Context(), name, *req.On); err != nil {
		httpError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	a.log.Info("machine maintenance", "by", adminOf(r), "machine", name, "on", *req.On)
	a.record(r, "machine.maintenance", name, onOff(*req.On))
	writeJSON(w, http.StatusOK, map[string]any{"machine": name, "maintenance": *req.On})
}

func onOff(on bool) string {
	if on {
		return "on"
	}
	return "off"
}

// Rotation is the answer to POST /v1/admin/rotate-key: the new key, when it starts to sign,
// and the key it replaces, which verifies until it retires.
type Rotation struct {
	Key       string    `json:"key"`
	SignsFrom time.Time `json:"signs_from"`
	Retiring  string    `json:"retiring"`
	RetiresAt time.Time `json:"retires_at"`
}

func (a *Admin) rotateKey(w http.ResponseWriter, r *http.Request) {
	if a.o.RotateKey == nil {
		httpError(w, http.StatusNotImplemented, "this front door holds no ticket keys")
		return
	}
	var req struct {
		// RetireNow: the older keys retire the moment the new one signs, as soon as every
		// front door has it — their tickets open nothing from then on (their sessions'
		// clients launch again).
		RetireNow bool `json:"retire_now"`
	}
	if r.ContentLength != 0 && !readJSON(w, r, &req, 1<<10, `body must be JSON {"retire_now": BOOL}, or none`) {
		return
	}
	rot, err := a.o.RotateKey(r.Context(), req.RetireNow)
	if err != nil {
		actionError(w, err)
		return
	}
	a.log.Info("ticket key rotated", "by", adminOf(r), "key", rot.Key, "signs_from", rot.SignsFrom, "retiring", rot.Retiring)
	detail := fmt.Sprintf("signs from %s; key %s verifies until %s", rot.SignsFrom.UTC().Format(time.RFC3339),
		rot.Retiring, rot.RetiresAt.UTC().Format(time.RFC3339))
	if req.RetireNow {
		detail += " (retired when the new key signs: its tickets open nothing)"
	}
	a.record(r, "key.rotate", rot.Key, detail)
	writeJSON(w, http.StatusOK, rot)
}
