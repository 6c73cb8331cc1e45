package node

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/frontdoor-vdi/frontdoor/health"
	"github.com/frontdoor-vdi/frontdoor/store/etcd"
)

// A node of a site on etcd probes only what its role asks (seed 003: one data collector per
// zone): the leader of its zone probes the zone's gateways and machines and publishes the
// verdicts (etcd.Election.PutHealth, fenced on its leadership); every other node holds those targets
// as remote in its Checker and follows the published records, and the failures its proxy
// sees on them go to the prober (etcd.Election.ReportPassive). Zones without a live node are probed
// by the leader of the first zone, primary first, that has one. N nodes never probe N×M
// times. A site of one node holds an election of one (electionOfOne): the node leads its
// zone and, no other zone having a node, probes everything.

// zoneRole is this node's part in its zone's election and in the site's health.
type zoneRole struct {
	election election
	elector  elector
	kick     chan struct{} // something to publish

	passive chan passiveReport // failures seen here on remote targets, for ReportPassive
	mu      sync.Mutex         // guards published, fence, zones
	// published is what this node wrote of each target it probes under its leadership
	// fence (0: not leading).
	published map[string]health.Report
	fence     int64
	zones     map[string]bool // the zones probed here
}

// passiveQueue bounds the failures waiting to be told to the probers; more are dropped (the
// prober needs a few within its passive window, not every one).
const passiveQueue = 256

// buildRole sets up the node's part in the site's election.
func (r *Node) buildRole() {
	el := r.site.election()
	r.role = &zoneRole{election: el, kick: make(chan struct{}, 1), passive: make(chan passiveReport, passiveQueue)}
	r.role.elector = el.Elector(etcd.Candidate{Node: r.spec.Name, Zone: r.spec.Zone, Version: r.o.Version,
		Preference: r.spec.ElectionPreference}, etcd.ElectorOptions{OnChange: r.onLead})
	r.role.election.OnElection(r.setProbing)
	r.role.election.OnHealth(r.observeHealth)
	r.role.election.OnPassive(r.passiveSeen)
	r.site.outage().On(func(on bool) {
		if on {
			r.log.Error("outage mode: the site database is out of reach; this node brokers its share of its zone's machines from its local host cache and probes its zone itself", "zone", r.spec.Zone)
		} else {
			r.log.Warn("outage mode ended: the site database is back and the outage's changes are written back")
		}
		r.setProbing()
	})
	r.setProbing()
	for name, b := range r.role.election.HealthRecords() {
		r.observeHealth(name, b)
	}
}

// onLead is told when this node starts or stops leading its zone.
func (r *Node) onLead(rev int64) {
	if rev > 0 {
		r.log.Info("leading the zone: probing its targets", "zone", r.spec.Zone, "fence", rev)
	} else {
		r.log.Info("no longer leading the zone: following its leader's verdicts", "zone", r.spec.Zone)
	}
	r.setProbing()
}

// probedZones returns the zones whose targets this node probes.
//
// While the site database is out of reach every node probes its own zone for itself.
func (r *Node) probedZones() map[string]bool {
	out := map[string]bool{}
	if r.site.outage().Active() {
		return map[string]bool{r.spec.Zone: true, "": true}
	}
	if _, leading := r.role.elector.Leading(); !leading {
		return out
	}
	out[r.spec.Zone] = true
	leaders, cands := r.role.election.Leaders(), r.role.election.Candidates()
	if r.orphanProber(leaders) != r.spec.Name {
		return out // another zone's leader probes the zones without a node
	}
	for _, z := range r.cfg.Zones {
		if len(cands[z.Name]) == 0 {
			out[z.Name] = true
		}
	}
	out[""] = true // targets without a zone
	return out
}

// orphanProber names the node that probes the zones without a live node: the leader of the
// primary zone, else of the first zone in configuration order that has one.
func (r *Node) orphanProber(leaders map[string]etcd.Leader) string {
	for _, z := range r.cfg.Zones {
		if l, ok := leaders[z.Name]; ok && z.Primary {
			return l.Node
		}
	}
	for _, z := range r.cfg.Zones {
		if l, ok := leaders[z.Name]; ok {
			return l.Node
		}
	}
	return ""
}

// setProbing makes the Checker probe the targets of the zones this node probes now, and
// follow the published records of the others.
func (r *Node) setProbing() {
	zones := r.probedZones()
	rev, _ := r.role.elector.Leading()
	r.role.mu.Lock()
	if rev != r.role.fence {
		// A new leadership publishes every target it probes once, then what changes: the
		// records the site holds are an older leadership's, which the other nodes may have
		// parted from (they probed for themselves in an outage).
		r.role.fence = rev
		r.role.published = map[string]health.Report{}
	}
	same := r.role.zones != nil && maps.Equal(zones, r.role.zones)
	r.role.zones = zones
	r.role.mu.Unlock()
	if same {
		return
	}
	// A target that becomes remote takes the site's record only if a live leadership wrote
	// it; else it keeps the states this node last probed until its prober publishes (a new
	// leadership publishes every target at once).
	changed := r.health.SetProbed(func(t health.Target) bool { return zones[t.Zone] })
	live := map[int64]bool{}
	for _, l := range r.role.election.Leaders() {
		live[l.Rev] = true
	}
	recs := r.role.election.HealthRecords()
	for _, name := range changed {
		var rec healthRecord
		if !r.health.Probed(name) && json.Unmarshal(recs[name], &rec) == nil && live[rec.Fence] {
			r.observeHealth(name, recs[name])
		}
	}
	r.kickPublish()
}

// healthRecord is what a prober publishes of a target: its report, and the leadership it
// was written under.
type healthRecord struct {
	health.Report
	// Fence is the prober's leadership (its leader key's revision); Prober is the node.
	Fence  int64  `json:"fence"`
	Prober string `json:"prober"`
}

// observeHealth follows a record published by a target's prober.
func (r *Node) observeHealth(name string, b []byte) {
	if len(b) == 0 || r.health.Probed(name) {
		return
	}
	var rec healthRecord
	if err := json.Unmarshal(b, &rec); err != nil {
		r.log.Warn("unreadable health record", "target", name, "err", err)
		return
	}
	rep := rec.Report
	rep.Target = name
	if err := r.health.Observe(rep); err != nil && !errors.Is(err, health.ErrProbedHere) {
		r.log.Debug("health record", "target", name, "err", err)
	}
}

// passiveReport is a failure seen here on a remote target.
type passiveReport struct {
	target string
	p      etcd.Passive
}

// forwardPassive queues a failure seen here on a remote target for its prober.
func (r *Node) forwardPassive(target string, port health.PortID, err error) {
	select {
	case r.role.passive <- passiveReport{target, etcd.Passive{Port: port.String(), Err: err.Error()}}:
	default: // the prober gets enough of them to act
	}
}

// passiveSeen applies a failure another node saw on a target probed here.
func (r *Node) passiveSeen(target string, p etcd.Passive) {
	if p.Node == r.spec.Name || !r.health.Probed(target) {
		return
	}
	port, err := health.ParsePortID(p.Port)
	if err != nil {
		return
	}
	r.health.ReportFailure(target, port, errors.New(p.Node+": "+p.Err))
}

func (r *Node) kickPublish() {
	select {
	case r.role.kick <- struct{}{}:
	default:
	}
}

// maxHealthOps bounds the records of one fenced transaction, below etcd's default
// --max-txn-ops (128).
const maxHealthOps = 100

// runRole stands for election and, while leading, publishes the verdicts of the targets
// probed here when they change (at once on a health event, else within 250 ms: a verdict's
// first definite answer is no event); it also tells the probers of the failures seen here.
// It resigns when ctx ends.
func (r *Node) runRole(ctx context.Context) error {
	stop := r.health.Subscribe(func(ev health.Event) {
		if r.health.Probed(ev.Target) {
			r.kickPublish()
		}
	})
	defer stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { r.role.elector.Run(ctx) })
	wg.Go(func() {
		for {
			select {
			case <-ctx.Done():
				return
			case f := <-r.role.passive:
				if err := r.role.election.ReportPassive(ctx, f.target, f.p); err != nil && ctx.Err() == nil {
					r.log.Debug("telling the prober of a failure", "target", f.target, "err", err)
				}
			}
		}
	})
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		case <-r.role.kick:
		}
		r.publish(ctx)
	}
}

// publish writes the reports of the targets probed here that differ from what the site holds.
func (r *Node) publish(ctx context.Context) {
	rev, leading := r.role.elector.Leading()
	if !leading || r.site.outage().Active() {
		return
	}
	r.role.mu.Lock()
	if rev != r.role.fence {
		r.role.mu.Unlock()
		return // setProbing has not yet seen this leadership
	}
	var names []string
	reps := map[string]health.Report{}
	for _, st := range r.health.Snapshot() {
		if !r.health.Probed(st.Name) {
			continue
		}
		rep, _ := r.health.Report(st.Name)
		if old, ok := r.role.published[st.Name]; ok && old.Same(rep) {
			continue
		}
		names = append(names, st.Name)
		reps[st.Name] = rep
	}
	r.role.mu.Unlock()
	for chunk := range slices.Chunk(names, maxHealthOps) {
		recs := map[string][]byte{}
		for _, n := range chunk {
			recs[n], _ = json.Marshal(healthRecord{Report: reps[n], Fence: rev, Prober: r.spec.Name})
		}
		if err := r.role.election.PutHealth(ctx, r.spec.Zone, rev, recs); err != nil {
			switch {
			case ctx.Err() != nil:
			case errors.Is(err, etcd.ErrNotLeader):
				// The fence at work: another node leads the zone now (a run-off at start),
				// and its verdicts are the zone's.
				r.log.Info("health verdicts not published: another node leads the zone now", "zone", r.spec.Zone)
			default:
				r.log.Warn("publishing health verdicts", "err", err)
			}
			return
		}
		r.role.mu.Lock()
		if r.role.fence == rev {
			for _, n := range chunk {
				r.role.published[n] = reps[n]
			}
		}
		r.role.mu.Unlock()
	}
}

// Probes returns the names of the targets this node probes itself, in configuration order.
func (r *Node) Probes() []string {
	var out []string
	for _, st := range r.health.Snapshot() {
		if r.health.Probed(st.Name) {
			out = append(out, st.Name)
		}
	}
	return out
}

// Outage returns the outage mode of the node's site database (never active on a site of one
// node).
func (r *Node) Outage() etcd.OutageStatus { return r.site.outage().Status() }
