package node

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/frontdoor-vdi/frontdoor/api"
	"github.com/frontdoor-vdi/frontdoor/configs"
	"github.com/frontdoor-vdi/frontdoor/health"
	"github.com/frontdoor-vdi/frontdoor/store/settings"
)

// onHealth turns machine verdicts into broker availability.
func (r *Node) onHealth(ev health.Event) {
	if !ev.VerdictChanged() {
		return
	}
	st, ok := r.health.Status(ev.Target)
	if !ok || st.Kind != "machine" {
		return
	}
	if err := r.broker.SetDown(context.Background(), ev.Target, ev.To != health.StateUp); err != nil {
		r.log.Warn("marking machine", "machine", ev.Target, "err", err)
	}
}

// ready reports whether the node takes launches: its health checker has a definite verdict
// for every gateway (health.Checker.Definite), so that the gateways it offers are known.
func (r *Node) ready() bool {
	for _, g := range r.cfg.Gateways {
		if _, known := r.health.Definite(g.Name); !known {
			return false
		}
	}
	return true
}

// healthSummary describes each gateway's verdict and ports for the admin status.
func (r *Node) healthSummary() map[string]string {
	out := map[string]string{}
	for _, st := range r.health.Snapshot() {
		if st.Kind != "gateway" {
			continue
		}
		var ports []string
		for _, p := range st.Ports {
			ports = append(ports, fmt.Sprintf("%s %s", p.ID, p.State))
		}
		out[st.Name] = fmt.Sprintf("%s (%s)", st.Verdict, strings.Join(ports, ", "))
		if st.Override != health.OverrideNone {
			out[st.Name] += ", admin override " + st.Override.String()
		}
	}
	return out
}

// override sets an admin override on gateway name's health verdict, asked of this node's
// admin API: "up", "down", "drain" or "auto" to follow the probes again. The override is
// the site's: stored in its settings, and followed by every front door (applyOverrides). The
// node that hosts the gateway also puts it in drain mode (applyOverride).
func (r *Node) override(name, o string) (note string, err error) {
	r.overrideMu.Lock()
	defer r.overrideMu.Unlock()
	r.reloadMu.Lock()
	stopping := r.stopping
	r.reloadMu.Unlock()
	if stopping {
		return "", fmt.Errorf("%w: the front door is stopping", api.ErrRefused)
	}
	i := slices.IndexFunc(r.cfg.Gateways, func(g configs.Gateway) bool { return g.Name == name })
	if i < 0 {
		return "", fmt.Errorf("%w: %q", api.ErrUnknownGateway, name)
	}
	v, err := health.ParseOverride(o)
	if err != nil {
		return "", err
	}
	val := o
	if v == health.OverrideNone {
		val = ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := r.settings.Set(ctx, settings.SectionOverrides, map[string]string{name: val}); err != nil {
		return "", fmt.Errorf("%w: the site database did not take the override: %v", api.ErrRefused, err)
	}
	return r.applyOverride(r.cfg.Gateways[i], v)
}
