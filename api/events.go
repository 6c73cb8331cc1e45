package api

import (
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"
)

// Topics of the admin API's events (GET /v1/admin/events): what changed, for the console to
// read again.
const (
	TopicHealth   = "health"   // a gateway's or machine's health, or an override
	TopicSessions = "sessions" // a session was created, changed or ended
	TopicModes    = "modes"    // a secure-gateway switch
	TopicMachines = "machines" // a machine's load, maintenance or registration
	TopicAudit    = "audit"    // an admin action was recorded
	TopicSite     = "site"     // nodes, zone leaders, the store's state
)

// Notifier fans topics out to the event streams. The zero value is ready; it is safe for
// concurrent use. A burst of notifications of one topic reaches a stream once per
// eventCoalesce.
type Notifier struct {
	mu   sync.Mutex
	subs map[chan string]struct{}
}

// eventCoalesce is the least time between two events of one topic on a stream.
const eventCoalesce = 200 * time.Millisecond

// Notify tells every stream that topic changed; it never blocks.
func (n *Notifier) Notify(topic string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for ch := range n.subs {
		select {
		case ch <- topic:
		default: // the stream has enough to read again already
		}
	}
}

func (n *Notifier) subscribe() (<-chan string, func()) {
	ch := make(chan string, 16)
	n.mu.Lock()
	if n.subs == nil {
		n.subs = map[chan string]struct{}{}
	}
	n.subs[ch] = struct{}{}
	n.mu.Unlock()
	return ch, func() {
		n.mu.Lock()
		delete(n.subs, ch)
		n.mu.Unlock()
	}
}

// maxStreams bounds the event streams open at once at one front door.
const maxStreams = 64

// events streams server-sent events: "event: <topic>" whenever a topic changed (coalesced),
// and a comment every 15 s so that proxies keep the stream open.
func (a *Admin) events(w http.ResponseWriter, r *http.Request) {
	fl, ok := w.(http.Flusher)
	if !ok {
		httpError(w, http.StatusInternalServerError, "streaming unsupported")
		return
	}
	a.streamsMu.Lock()
	if a.streams >= maxStreams {
		a.streamsMu.Unlock()
		w.Header().Set("Retry-After", "5")
		httpError(w, http.StatusServiceUnavailable, "too many event streams")
		return
	}
	a.streams++
	a.streamsMu.Unlock()
	defer func() { a.streamsMu.Lock(); a.streams--; a.streamsMu.Unlock() }()
	ch, stop := a.o.Events.subscribe()
	defer stop()
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, "retry: 2000\n\n")
	fl.Flush()
	keep := time.NewTicker(15 * time.Second)
	defer keep.Stop()
	pending := map[string]bool{}
	var flush <-chan time.Time
	for {
		select {
		case <-r.Context().Done():
			return
		case t := <-ch:
			pending[t] = true
			if flush == nil {
				flush = time.After(eventCoalesce)
			}
		case <-flush:
			flush = nil
			topics := make([]string, 0, len(pending))
			for t := range pending {
				topics = append(topics, t)
			}
			slices.Sort(topics)
			clear(pending)
			for _, t := range topics {
				fmt.Fprintf(w, "event: %s\ndata: {}\n\n", t)
			}
			fl.Flush()
		case <-keep.C:
			fmt.Fprint(w, ": keep-alive\n\n")
			fl.Flush()
		}
	}
}
