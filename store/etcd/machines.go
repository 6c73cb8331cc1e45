package etcd

// Machines: the machines/ family (an agent's load, an operator's maintenance flag) and
// PutMachine.

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/frontdoor-vdi/frontdoor/broker"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// machinesView is the view's part of the machines family.
type machinesView struct {
	loads map[string]machineLoad
	flags map[string]machineFlags
}

type machineLoad struct {
	CPU      int       `json:"cpu"`
	Memory   int       `json:"memory"`
	Reported time.Time `json:"reported"`
	Zone     string    `json:"zone,omitempty"` // of the node the agent reports to
	Node     string    `json:"node,omitempty"` // the node the agent reports to
}

type machineFlags struct {
	Maintenance *bool `json:"maintenance,omitempty"`
	Down        bool  `json:"down"`
}

// applyMachine applies machines/<name>/load and machines/<name>/flags.
func (st *Store) applyMachine(parts []string, x kv, deleted bool) broker.Change {
	name := parts[1]
	switch parts[2] {
	case "load":
		if deleted {
			delete(st.loads, name)
		} else {
			var l machineLoad
			if json.Unmarshal(x.value, &l) != nil {
				return broker.Change{}
			}
			st.loads[name] = l
		}
	case "flags":
		if deleted {
			delete(st.flags, name)
		} else {
			var f machineFlags
			if json.Unmarshal(x.value, &f) != nil {
				return broker.Change{}
			}
			st.flags[name] = f
		}
	default:
		return broker.Change{}
	}
	ms := st.machineLocked(name)
	return broker.Change{Machine: &ms}
}

func (st *Store) machineLocked(name string) broker.MachineState {
	l, f := st.loads[name], st.flags[name]
	return broker.MachineState{Name: name, CPU: l.CPU, Memory: l.Memory, Reported: l.Reported, LoadZone: l.Zone,
		Maintenance: f.Maintenance, Down: f.Down}
}

func sameMachine(a, b broker.MachineState) bool {
	return sameMaintenance(a.Maintenance, b.Maintenance) && a.CPU == b.CPU && a.Memory == b.Memory &&
		a.Down == b.Down && a.Reported.Equal(b.Reported)
}

// sameMaintenance reports whether two maintenance overrides are the same (nil: none).
func sameMaintenance(a, b *bool) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

// PutMachine implements broker.Store: the load on the node's lease and the flags, each
// written only when it differs from the view.
func (st *Store) PutMachine(ctx context.Context, m broker.MachineState) error {
	return st.failoverErr(func() error { return st.putMachineRemote(ctx, m) }, func() error { st.putMachineLocal(m); return nil })
}

func (st *Store) putMachineRemote(ctx context.Context, m broker.MachineState) error {
	ctx, cancel := st.opContext(ctx)
	defer cancel()
	l := machineLoad{CPU: m.CPU, Memory: m.Memory, Reported: m.Reported, Zone: m.LoadZone, Node: st.o.Node}
	// Down is health's verdict, which every node takes from the published verdicts (P
	// health/): it is not written for the site (Down stays false).
	f := machineFlags{Maintenance: m.Maintenance}
	st.mu.Lock()
	ol, hasL := st.loads[m.Name]
	of, hasF := st.flags[m.Name]
	st.mu.Unlock()
	var ops []clientv3.Op
	// Only a newer load report is written: a maintenance or health change carries the
	// last report's time, and a node that does not see a machine's load (it reports in
	// another zone) must not overwrite it.
	newer := !l.Reported.IsZero() && (!hasL || l.Reported.After(ol.Reported))
	if newer && (!hasL || ol.CPU != l.CPU || ol.Memory != l.Memory || ol.Zone != l.Zone || ol.Node != l.Node || l.Reported.Sub(ol.Reported) > 30*time.Second) {
		b, _ := json.Marshal(l)
		ops = append(ops, clientv3.OpPut(st.key("machines", m.Name, "load"), string(b), clientv3.WithLease(st.nodeLease())))
	}
	if !hasF || !sameMaintenance(of.Maintenance, f.Maintenance) {
		b, _ := json.Marshal(f)
		ops = append(ops, clientv3.OpPut(st.key("machines", m.Name, "flags"), string(b)))
	}
	if len(ops) == 0 {
		return nil
	}
	if _, err := st.cli.Txn(ctx).Then(ops...).Commit(); err != nil {
		return fmt.Errorf("storing machine %s: %w", m.Name, err)
	}
	return nil
}
