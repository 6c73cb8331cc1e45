package node

import (
	"context"
	"path/filepath"
	"sync"
	"time"

	"github.com/frontdoor-vdi/frontdoor/api"
	"github.com/frontdoor-vdi/frontdoor/broker"
	"github.com/frontdoor-vdi/frontdoor/health"
	"github.com/frontdoor-vdi/frontdoor/store/settings"
)

// feeds are what a node tells the console and the admin API of: its audit log and the
// changes its event streams announce.
type feeds struct {
	// audit is the site's audit log as this node writes it (auditLog), the admin API's and
	// the portal's.
	audit     api.AuditLog
	auditOnce sync.Once
	events    *api.Notifier // tells the console's event streams what changed
}

// What the admin API's console reads of the node: the audit log, the views' sources, and
// the events that tell the console's pages what changed.
//
// The audit log is the site's: in etcd (store/etcd's audit.go) on a site of several nodes,
// in the bolt file of a site of one node, in memory (the last maxMemoryAudit entries) on a
// memory store.

// maxMemoryAudit bounds the audit log of a node on a memory store.
const maxMemoryAudit = 10000

// auditLog is the node's audit log, made at the first call.
func (r *Node) auditLog() api.AuditLog {
	r.auditOnce.Do(func() {
		if as, ok := r.store.(api.AuditStore); ok {
			r.audit = api.StoreAudit(as)
		} else {
			r.audit = api.NewMemoryAudit(maxMemoryAudit)
		}
	})
	return r.audit
}

// consoleOptions fills in what the console's endpoints read of the node.
func (r *Node) consoleOptions(o *api.AdminOptions) {
	o.Node, o.Events, o.Checker = r.spec.Name, r.events, r.health
	o.Verifier, o.OnLogoff, o.Locate = r.verifier, r.sessionEnded, r.zones.Lookup
	o.DrillDir = filepath.Join(r.o.DataDir, "drills")
	o.Audit = r.auditLog()
	o.Registrations = r.site.registrations()
}

// followEvents tells the console's event streams what changes: health events, the site
// database's sessions, machines, switches, zone leaders, outage mode and audit log.
func (r *Node) followEvents(ctx context.Context) error {
	ev := r.events
	r.health.Subscribe(func(e health.Event) {
		ev.Notify(api.TopicHealth)
		if st, ok := r.health.Status(e.Target); ok && st.Kind == "machine" {
			ev.Notify(api.TopicMachines)
		}
	})
	r.settings.OnModes(func(map[string]bool) { ev.Notify(api.TopicModes) })
	r.settings.On(settings.SectionOverrides, func(map[string]string) { ev.Notify(api.TopicHealth) })
	return r.site.follow(ctx, ev)
}

// notifyingStore is a broker.Store of one node that tells the event streams of each change
// it stores.
type notifyingStore struct {
	broker.Store
	ev *api.Notifier
}

func (s notifyingStore) told(err error, topics ...string) error {
	if err == nil {
		for _, t := range topics {
			s.ev.Notify(t)
		}
	}
	return err
}

// CreateSession implements broker.Store.
func (s notifyingStore) CreateSession(ctx context.Context, se broker.Session, maxSessions int) error {
	return s.told(s.Store.CreateSession(ctx, se, maxSessions), api.TopicSessions, api.TopicMachines)
}

// UpdateSession implements broker.Store.
func (s notifyingStore) UpdateSession(ctx context.Context, se broker.Session, prevRev uint64) error {
	return s.told(s.Store.UpdateSession(ctx, se, prevRev), api.TopicSessions)
}

// DeleteSession implements broker.Store.
func (s notifyingStore) DeleteSession(ctx context.Context, id string) error {
	return s.told(s.Store.DeleteSession(ctx, id), api.TopicSessions, api.TopicMachines)
}

// PutMachine implements broker.Store.
func (s notifyingStore) PutMachine(ctx context.Context, m broker.MachineState) error {
	return s.told(s.Store.PutMachine(ctx, m), api.TopicMachines)
}

// auditTrimmer is a store whose audit log can be trimmed (store/etcd and store/bolt).
type auditTrimmer interface {
	TrimAudit(ctx context.Context, before time.Time) (int, error)
}

// auditTrimEvery is how often a node deletes the audit entries past the site's retention.
const auditTrimEvery = time.Hour

// trimAudit deletes the audit log's entries older than site.audit_retention, at start and
// every auditTrimEvery, until ctx ends; a store without an audit log of its own (memory)
// keeps its last maxMemoryAudit entries instead. On a site of several nodes every node
// trims: the deletes are idempotent, one ranged delete each.
func (r *Node) trimAudit(ctx context.Context) error {
	st, ok := r.store.(auditTrimmer)
	if !ok {
		return nil
	}
	t := time.NewTicker(auditTrimEvery)
	defer t.Stop()
	for {
		r.reloadMu.Lock()
		keep := r.live.Site.AuditRetention.D()
		r.reloadMu.Unlock()
		n, err := st.TrimAudit(ctx, time.Now().Add(-keep))
		switch {
		case err != nil && ctx.Err() == nil:
			r.log.Warn("trimming the audit log", "err", err)
		case n > 0:
			r.log.Info("audit entries past the retention deleted", "entries", n, "retention", keep)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
