package broker

import (
	"context"
	"fmt"
	"time"

	"github.com/frontdoor-vdi/frontdoor/configs"
)

// StateSession is an existing session to decide against, as `frontdoor explain`'s state file
// names it: the rest (group, zone, mode, lifetimes) follows from the configuration.
type StateSession struct {
	ID, User, Resource, Machine, Endpoint string
	State                                 State // pending, connected or disconnected
}

// StateMachine is a machine's load and flags.
type StateMachine struct {
	Name        string
	CPU, Memory int // percent
	Maintenance *bool
	Down        bool
}

// FromState returns a broker over st, clocked at now, holding the sessions and machine
// states given, each as this broker would have made it: a session gets its machine's group
// and zone, its group's secure-gateway mode and its state's lifetime (pending_timeout for a
// pending one, the group's disconnect timeout for a disconnected one); sessions are created
// a minute apart, the last a minute before now. Errors name the session or machine by its
// index (sessions[i], machines[i]).
func FromState(ctx context.Context, cfg *configs.Config, st Store, now time.Time, sessions []StateSession, machines []StateMachine) (*Broker, error) {
	m, err := newModel(cfg)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for i, s := range sessions {
		where := fmt.Sprintf("sessions[%d]", i)
		mx := m.machines[s.Machine]
		switch {
		case s.ID == "":
			return nil, fmt.Errorf("%s: a session needs an id", where)
		case seen[s.ID]:
			return nil, fmt.Errorf("%s: session id %q is used twice", where, s.ID)
		case mx == nil:
			return nil, fmt.Errorf("%s: machine %q is not in the configuration", where, s.Machine)
		case s.State != StatePending && s.State != StateConnected && s.State != StateDisconnected:
			return nil, fmt.Errorf("%s: state %q is not one of pending, connected, disconnected", where, s.State)
		}
		seen[s.ID] = true
		g := mx.group
		bs := Session{ID: s.ID, User: s.User, Resource: s.Resource, Group: g.name, Machine: mx.name,
			Zone: mx.zone, State: s.State, Endpoint: s.Endpoint, Mode: modeOf(g),
			Created: now.Add(time.Duration(i-len(sessions)) * time.Minute)}
		bs.Changed = bs.Created
		switch bs.State {
		case StatePending:
			bs.Expires = now.Add(m.pendingTimeout.D())
		case StateDisconnected:
			bs.Expires = now.Add(g.disconnectTimeout.D())
		}
		if err := st.CreateSession(ctx, bs, 1<<30); err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
	}
	for i, ms := range machines {
		if m.machines[ms.Name] == nil {
			return nil, fmt.Errorf("machines[%d]: machine %q is not in the configuration", i, ms.Name)
		}
		if ms.CPU < 0 || ms.CPU > 100 || ms.Memory < 0 || ms.Memory > 100 {
			return nil, fmt.Errorf("machines[%d]: cpu and memory are percentages, 0..100", i)
		}
		if err := st.PutMachine(ctx, MachineState{Name: ms.Name, CPU: ms.CPU, Memory: ms.Memory, Maintenance: ms.Maintenance,
			Down: ms.Down, Reported: now}); err != nil {
			return nil, fmt.Errorf("machines[%d]: %w", i, err)
		}
	}
	return New(ctx, cfg, st, func() time.Time { return now })
}
