package api

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/frontdoor-vdi/frontdoor/logins"
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
	appendAudit(a.o.Audit, a.o.Events, a.o.Node, a.log, r, adminOf(r), action, target, detail)
}

// appendAudit appends user's action, from r's client at node, to log (when there is one)
// and tells events' streams (when there are some). A failure to record is logged: the
// action was done.
func appendAudit(log AuditLog, events *Notifier, node string, logger *slog.Logger, r *http.Request, user, action, target, detail string) {
	if events != nil {
		defer events.Notify(TopicAudit)
	}
	if log == nil {
		return
	}
	e := AuditEntry{Time: time.Now().UTC(), User: user, From: logins.ClientAddr(r).String(), Node: node,
		Action: action, Target: target, Detail: detail}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 5*time.Second)
	defer cancel()
	if err := log.Append(ctx, e); err != nil {
		logger.Error("recording an action in the audit log", "action", action, "target", target, "user", e.User, "err", err)
	}
}

// AuditStore is a store's raw audit log (store/etcd and store/bolt have one): entries as
// bytes, keyed by their time and node.
type AuditStore interface {
	AppendAudit(ctx context.Context, at time.Time, node string, value []byte) error
	// ListAudit returns values newest first; with an error it may still return what it
	// could read (entries held in an outage).
	ListAudit(ctx context.Context, limit int, before time.Time) ([][]byte, error)
}

// StoreAudit keeps the audit log in a store's raw log, as JSON AuditEntry values.
func StoreAudit(s AuditStore) AuditLog { return storeAudit{s} }

type storeAudit struct{ s AuditStore }

// Append implements AuditLog.
func (l storeAudit) Append(ctx context.Context, e AuditEntry) error {
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	return l.s.AppendAudit(ctx, e.Time, e.Node, b)
}

// List implements AuditLog; with an error it returns what the store could read.
func (l storeAudit) List(ctx context.Context, limit int, before time.Time) ([]AuditEntry, error) {
	vs, err := l.s.ListAudit(ctx, limit, before)
	out := make([]AuditEntry, 0, len(vs))
	for _, v := range vs {
		var e AuditEntry
		if json.Unmarshal(v, &e) == nil {
			out = append(out, e)
		}
	}
	return out, err
}

// MemoryAudit is an AuditLog in memory (a store of memory, tests): the last entries.
type MemoryAudit struct {
	keep    int
	mu      sync.Mutex // guards entries
	entries []AuditEntry
}

// NewMemoryAudit returns an AuditLog that keeps the last keep entries in memory.
func NewMemoryAudit(keep int) *MemoryAudit { return &MemoryAudit{keep: keep} }

// Append implements AuditLog.
func (m *MemoryAudit) Append(_ context.Context, e AuditEntry) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	i, _ := slices.BinarySearchFunc(m.entries, e, func(a, b AuditEntry) int { return a.Time.Compare(b.Time) })
	for i < len(m.entries) && m.entries[i].Time.Equal(e.Time) {
		i++ // after the entries of the same instant
	}
	m.entries = slices.Insert(m.entries, i, e)
	if len(m.entries) > m.keep {
		m.entries = slices.Delete(m.entries, 0, len(m.entries)-m.keep)
	}
	return nil
}

// List implements AuditLog.
func (m *MemoryAudit) List(_ context.Context, limit int, before time.Time) ([]AuditEntry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := []AuditEntry{}
	for i := len(m.entries) - 1; i >= 0 && len(out) < limit; i-- {
		if before.IsZero() || m.entries[i].Time.Before(before) {
			out = append(out, m.entries[i])
		}
	}
	return out, nil
}

// Audit list bounds (GET /v1/admin/audit).
const (
	auditDefaultLimit = 100
	auditMaxLimit     = 1000
)

// AuditList is the answer to GET /v1/admin/audit.
type AuditList struct {
	// Entries are the entries asked for, newest first.
	Entries []AuditEntry `json:"entries"`
	// More is true when older entries remain: ask again with before = the last entry's time.
	More bool `json:"more"`
	// Error says why the list may be incomplete (the site database is out of reach: only
	// the entries this front door holds are listed).
	Error string `json:"error,omitempty"`
}

// auditList serves GET /v1/admin/audit?limit=N&before=RFC3339: up to limit entries (default
// 100, at most 1000) older than before (default: the newest), newest first. It answers 503
// when the log cannot be read at all.
func (a *Admin) auditList(w http.ResponseWriter, r *http.Request) {
	if a.o.Audit == nil {
		httpError(w, http.StatusNotImplemented, "this front door keeps no audit log")
		return
	}
	q := r.URL.Query()
	limit := auditDefaultLimit
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			httpError(w, http.StatusBadRequest, "limit must be a positive number")
			return
		}
		limit = min(n, auditMaxLimit)
	}
	var before time.Time
	if s := q.Get("before"); s != "" {
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			httpError(w, http.StatusBadRequest, "before must be a time in RFC 3339 (2026-12-01T17:00:00Z)")
			return
		}
		before = t
	}
	es, err := a.o.Audit.List(r.Context(), limit+1, before)
	if err != nil && len(es) == 0 {
		httpError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	out := AuditList{Entries: es, More: len(es) > limit}
	if out.More {
		out.Entries = es[:limit]
	}
	if out.Entries == nil {
		out.Entries = []AuditEntry{}
	}
	if err != nil {
		out.Error = err.Error()
	}
	writeJSON(w, http.StatusOK, out)
}
