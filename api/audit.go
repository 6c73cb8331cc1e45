package api

import (
	"context"
	"net/http"
	"time"
)

// AuditEntry is one admin action: who, when, from where, at which front door, what.
type AuditEntry struct {
	Time   time.Time `json:"time"`
	User   string    `json:"user"`
	From   string    `json:"from"`
	Node   string    `json:"node"`
	Action string    `json:"action"`
	Target string    `json:"target,omitempty"`
	Detail string    `json:"detail,omitempty"`
}

// AuditLog keeps the admin actions of a site, append-only.
type AuditLog interface {
	// Append records an entry; entries are never changed or removed by the API.
	Append(ctx context.Context, e AuditEntry) error
	// List returns up to limit entries older than before (zero: the newest), newest first.
	List(ctx context.Context, limit int, before time.Time) ([]AuditEntry, error)
}

func withAdmin(ctx context.Context, name string) context.Context {
	return context.WithValue(ctx, adminKey{}, name)
}

// record appends an admin action of r's admin to the audit log (when there is one) and
// tells the event streams. A failure to record is logged: the action was done.
func (a *Admin) record(r *http.Request, action, target, detail string) {
	if a.o.Events != nil {
		defer a.o.Events.Notify(TopicAudit)
	}
	if a.o.Audit == nil {
		return
	}
	e := AuditEntry{Time: time.Now().UTC(), User: adminOf(r), From: clientAddr(r).String(), Node: a.o.Node,
		Action: action, Target: target, Detail: detail}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 5*time.Second)
	defer cancel()
	if err := a.o.Audit.Append(ctx, e); err != nil {
		a.log.Error("recording an admin action in the audit log", "action", action, "target", target, "user", e.User, "err", err)
	}
}
