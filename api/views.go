package api

import (
	"net/http"
	"time"

	"github.com/frontdoor-vdi/frontdoor/health"
)

// The admin API's views for the console's pages (the CLI may read them too): JSON documents
// of the site as this front door sees it. Every one is a GET, open to admins and monitors.

// HealthView is what the views read of the health checker (*health.Checker).
type HealthView interface {
	Snapshot() []health.TargetStatus
	History(name string) []health.Event
}

var _ HealthView = (*health.Checker)(nil)

// Registration is where a machine's agent is registered: the node its heartbeats reach, that
// node's zone, and its last load report.
type Registration struct {
	Node     string    `json:"node"`
	Zone     string    `json:"zone"`
	Reported time.Time `json:"reported,omitzero"`
}

// GatewayView is one gateway in GET /v1/admin/gateways.
type GatewayView struct {
	Name string `json:"name"`
	Zone string `json:"zone"`
	// Node is the frontdoor node that runs the gateway; "" for a foreign server.
	Node    string `json:"node"`
	Address string `json:"address"`
	// Verdict is what the front door acts on (Probed after Override): up, draining or down.
	Verdict string `json:"verdict"`
	// Probed is the verdict of the port states alone.
	Probed string `json:"probed"`
	// Override is the admin override in force: none, up, down or drain.
	Override string        `json:"override"`
	Ports    []GatewayPort `json:"ports"`
	// Transitions are the gateway's last health events (health.HistoryLen), newest first.
	Transitions []GatewayTransition `json:"transitions"`
}

// GatewayPort is one probed port of a gateway.
type GatewayPort struct {
	// Port is "443/tcp", "4172/udp"...
	Port string `json:"port"`
	// Kind is the probe: tcp, tls, http, https or udp.
	Kind string `json:"kind"`
	// Optional ports do not count in the verdict (a 503 on one still caps it at draining).
	Optional bool `json:"optional"`
	// State is up, draining or down, since Since.
	State string    `json:"state"`
	Since time.Time `json:"since"`
	// LastCheck is when the last probe (or passive report) was recorded; absent before any.
	LastCheck time.Time `json:"last_check,omitzero"`
	// Error is the last probe's error; absent when it succeeded.
	Error string `json:"error,omitempty"`
	// LatencyMS is the last probe's duration in milliseconds.
	LatencyMS float64 `json:"latency_ms"`
}

// GatewayTransition is one health event of a gateway: a port's state changed (Port set;
// From and To are the port's states), or an admin override was set (Port ""; From and To are
// the gateway's verdicts).
type GatewayTransition struct {
	Time time.Time `json:"time"`
	Port string    `json:"port"`
	From string    `json:"from"`
	To   string    `json:"to"`
	// Verdict is the gateway's verdict after the event.
	Verdict string `json:"verdict"`
	// Reason is probe, passive (a failure a consumer saw), prober (published by the zone
	// leader that probes it) or admin (an override).
	Reason string `json:"reason"`
	Error  string `json:"error,omitempty"`
}

// gateways serves GET /v1/admin/gateways: every gateway of the configuration, in its order,
// with its verdict, its ports and its last transitions. Without a health checker it answers
// 501.
func (a *Admin) gateways(w http.ResponseWriter, _ *http.Request) {
	if a.o.Checker == nil {
		httpError(w, http.StatusNotImplemented, "this front door has no health checker")
		return
	}
	byName := map[string]health.TargetStatus{}
	for _, st := range a.o.Checker.Snapshot() {
		if st.Kind == "gateway" {
			byName[st.Name] = st
		}
	}
	out := []GatewayView{}
	for _, g := range a.o.Config.Gateways {
		st, ok := byName[g.Name]
		if !ok {
			continue
		}
		v := GatewayView{Name: g.Name, Zone: g.Zone, Node: g.Node, Address: g.Address.String(), Verdict: st.Verdict.String(),
			Probed: st.Probed.String(), Override: st.Override.String(), Ports: []GatewayPort{}, Transitions: []GatewayTransition{}}
		for _, p := range st.Ports {
			gp := GatewayPort{Port: p.ID.String(), Kind: string(p.Kind), Optional: p.Optional, State: p.State.String(),
				Since: p.Since.UTC(), LatencyMS: float64(p.Latency.Microseconds()) / 1000}
			if !p.LastCheck.IsZero() {
				gp.LastCheck = p.LastCheck.UTC()
			}
			if p.LastErr != nil {
				gp.Error = p.LastErr.Error()
			}
			v.Ports = append(v.Ports, gp)
		}
		for _, ev := range a.o.Checker.History(g.Name) {
			tr := GatewayTransition{Time: ev.Time.UTC(), Verdict: ev.To.String(), Reason: ev.Reason}
			if ev.Port.Port != 0 {
				tr.Port, tr.From, tr.To = ev.Port.String(), ev.PortFrom.String(), ev.PortTo.String()
			} else {
				tr.From, tr.To = ev.From.String(), ev.To.String()
			}
			if ev.Err != nil {
				tr.Error = ev.Err.Error()
			}
			v.Transitions = append(v.Transitions, tr)
		}
		out = append(out, v)
	}
	writeJSON(w, http.StatusOK, out)
}

// MachineView is one machine in GET /v1/admin/machines.
type MachineView struct {
	Name        string `json:"name"`
	Zone        string `json:"zone"`
	Group       string `json:"group"`
	Address     string `json:"address"`
	MaxSessions int    `json:"max_sessions"`
	// Sessions are its live sessions, logons in flight included.
	Sessions int `json:"sessions"`
	// LoadIndex is the broker's load index, 0..10000 (10000: full), from Evaluators.
	LoadIndex  int               `json:"load_index"`
	Evaluators MachineEvaluators `json:"evaluators"`
	// Maintenance: it takes no new session; its sessions carry on and reconnect.
	Maintenance bool `json:"maintenance"`
	// Health is health's verdict on it here: up, draining or down; "" when it is not probed.
	Health string `json:"health"`
	// Unavailable says why it takes no new session ("down", "maintenance", "full (2/2
	// sessions)", "load index 10000"); "" when it takes them.
	Unavailable string `json:"unavailable"`
	// Registered is where its agent reports; null when no agent reports.
	Registered *Registration `json:"registered"`
	// LoadHidden: its CPU and memory stay in the zone its agent reports in
	// (share_load_across_zones is off); its index here counts sessions and logons only.
	LoadHidden bool `json:"load_hidden"`
}

// MachineEvaluators are a machine's load evaluators, each 0..10000 as the broker computes
// them; null for one its delivery group does not use (load.cpu or load.memory false,
// max_logons 0).
type MachineEvaluators struct {
	Sessions int  `json:"sessions"`
	CPU      *int `json:"cpu"`
	Memory   *int `json:"memory"`
	Logons   *int `json:"logons"`
}

func evaluator(v int) *int {
	if v < 0 {
		return nil
	}
	return &v
}

// machines serves GET /v1/admin/machines: every machine of the configuration, by name.
func (a *Admin) machines(w http.ResponseWriter, _ *http.Request) {
	verdicts := map[string]string{}
	if a.o.Checker != nil {
		for _, st := range a.o.Checker.Snapshot() {
			if st.Kind == "machine" {
				verdicts[st.Name] = st.Verdict.String()
			}
		}
	}
	regs := a.registrations()
	out := []MachineView{}
	for _, m := range a.o.Broker.Machines() {
		v := MachineView{Name: m.Name, Zone: m.Zone, Group: m.Group, Address: m.Address, MaxSessions: m.MaxSessions,
			Sessions: m.Sessions, LoadIndex: m.LoadIndex, Maintenance: m.Maintenance, Health: verdicts[m.Name],
			Unavailable: m.Unavailable, LoadHidden: m.LoadHidden,
			Evaluators: MachineEvaluators{Sessions: m.Evaluators.Sessions, CPU: evaluator(m.Evaluators.CPU),
				Memory: evaluator(m.Evaluators.Memory), Logons: evaluator(m.Evaluators.Logons)}}
		if reg, ok := regs[m.Name]; ok {
			v.Registered = &reg
		}
		out = append(out, v)
	}
	writeJSON(w, http.StatusOK, out)
}

// registrations are where the machines' agents report: the site's (Registrations), else
// those that send this front door heartbeats, with their last load report.
func (a *Admin) registrations() map[string]Registration {
	if a.o.Registrations != nil {
		return a.o.Registrations()
	}
	out := map[string]Registration{}
	if a.o.Agents == nil {
		return out
	}
	beats := a.o.Agents.Heartbeats()
	for _, m := range a.o.Broker.Machines() {
		if _, ok := beats[m.Name]; ok {
			out[m.Name] = Registration{Node: a.o.Node, Zone: a.o.Zone, Reported: m.Reported.UTC()}
		}
	}
	return out
}
