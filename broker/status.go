package broker

import (
	"cmp"
	"slices"
	"time"
)

// MachineStatus is a machine as the broker sees it now, for the admin API.
type MachineStatus struct {
	// Name, Zone, Group and Address are the machine's, from the configuration.
	Name, Zone, Group, Address string
	// MaxSessions is its max_sessions; Sessions its live sessions (launches reserved
	// included), Pending those of them whose logon is in flight.
	MaxSessions, Sessions, Pending int
	// LoadIndex is the index the broker places sessions by, 0..FullLoad, from Evaluators.
	LoadIndex  int
	Evaluators Evaluators
	// Maintenance and Down: the machine takes no new session (health's Down is this node's
	// own verdict).
	Maintenance, Down bool
	// Unavailable says why it takes no new session now; "" when it takes them.
	Unavailable string
	// Reported is when its agent last reported CPU and memory; zero before any.
	Reported time.Time
	// LoadZone is the zone of the node its agent reports to; "" for its own zone.
	LoadZone string
	// LoadHidden: its CPU and memory stay in LoadZone (share_load_across_zones is off), so
	// its index here counts sessions and logons only.
	LoadHidden bool
}

// Machines returns the status of every configured machine, by name.
func (b *Broker) Machines() []MachineStatus {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]MachineStatus, 0, len(b.m.machines))
	for _, m := range b.m.machines {
		out = append(out, MachineStatus{Name: m.name, Zone: m.zone, Group: m.group.name, Address: m.addr,
			MaxSessions: m.max, Sessions: m.sessions, Pending: m.pending, LoadIndex: m.load, Evaluators: m.evaluators(),
			Maintenance: m.maintenance, Down: m.down, Unavailable: m.unavailable(), Reported: m.reportedAt,
			LoadZone: m.loadZone, LoadHidden: m.loadHidden})
	}
	slices.SortFunc(out, func(a, c MachineStatus) int { return cmp.Compare(a.Name, c.Name) })
	return out
}
