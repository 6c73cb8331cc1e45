package api

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"

	"github.com/frontdoor-vdi/frontdoor/wire"
)

// ModeStore keeps the secure-gateway toggles of a site, by delivery group.
type ModeStore interface {
	// Modes returns the stored toggles (groups never toggled are absent).
	Modes() map[string]bool
	// SetModes stores toggles.
	SetModes(ctx context.Context, modes map[string]bool) error
}

// ApplyModes shows toggles stored site-wide (Modes) in the status; the broker's own switch
// is the node's to set. Groups the configuration does not have are ignored.
func (a *Admin) ApplyModes(modes map[string]bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for g, on := range modes {
		if _, ok := a.modes[g]; ok {
			a.modes[g] = on
		}
	}
}

func (a *Admin) toggle(w http.ResponseWriter, r *http.Request) {
	var req wire.ToggleRequest
	if !readJSON(w, r, &req, 4<<10, "body must be JSON {\"on\": true|false, \"group\": NAME}") {
		return
	}
	groups, changed, code, err := a.setModes(r.Context(), req)
	if err != nil {
		httpError(w, code, err.Error())
		return
	}
	a.log.Info("secure gateway toggled", "by", adminOf(r), "on", req.On, "groups", groups)
	target, detail := req.Group, onOff(req.On)+" for new launches"
	switch {
	case len(changed) == 0:
		detail += "; it was already"
	case req.Group == "":
		detail += "; changed: " + strings.Join(changed, ", ")
	default:
		detail += "; was " + onOff(!req.On)
	}
	if target == "" {
		target = "every group"
	}
	a.record(r, "secure-gateway", target, detail)
	if a.o.Events != nil {
		a.o.Events.Notify(TopicModes)
	}
	writeJSON(w, http.StatusOK, map[string]any{"secure_gateway": req.On, "groups": groups})
}

// setModes applies a toggle: it returns the groups it switched and those of them whose mode
// changed, or the HTTP status and the error.
func (a *Admin) setModes(ctx context.Context, req wire.ToggleRequest) (groups, changed []string, code int, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if req.Group == "" {
		for g := range a.modes {
			groups = append(groups, g)
		}
		sort.Strings(groups)
	} else if _, ok := a.modes[req.Group]; ok {
		groups = []string{req.Group}
	} else {
		return nil, nil, http.StatusNotFound, fmt.Errorf("group %q is not defined", req.Group)
	}
	for _, g := range groups {
		if a.modes[g] != req.On {
			changed = append(changed, g)
		}
	}
	if a.o.Modes != nil {
		set := map[string]bool{}
		for _, g := range groups {
			set[g] = req.On
		}
		if err := a.o.Modes.SetModes(ctx, set); err != nil {
			return nil, nil, http.StatusServiceUnavailable, fmt.Errorf("storing modes: %w", err)
		}
	}
	for _, g := range groups {
		if err := a.o.Broker.SetSecureGateway(g, req.On); err != nil {
			return nil, nil, http.StatusInternalServerError, err
		}
		a.modes[g] = req.On
	}
	return groups, changed, 0, nil
}
