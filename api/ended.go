package api

import (
	"crypto/rand"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/frontdoor-vdi/frontdoor/broker"
)

// newFeedID names a feed.
func newFeedID() string { return rand.Text() }

// endedKeep is how many ends of one machine's sessions the agent API remembers for its
// agent to read (it reads them within moments; more is kept while it is away).
const endedKeep = 256

// endedWait bounds how long GET /v1/agent/ended waits for news (below the listeners' 30 s
// write timeout).
const endedWait = 20 * time.Second

// ended is the feed of sessions that ended (logoff, expiry) and of revocations of a
// session's older tickets (steal), for the machines' agents: one bounded list per machine
// under one sequence, and per machine a channel closed at its next entry, so that an end
// wakes only its machine's agent.
type ended struct {
	id    string     // names this feed: a sequence number means nothing in another's
	mu    sync.Mutex // guards all below
	seq   uint64     // of the last entry of any machine
	feeds map[string]*machineFeed
}

// machineFeed is one machine's part of the feed.
type machineFeed struct {
	entries []endedEntry  // oldest first, at most 2 × endedKeep
	forgot  uint64        // the sequence number of the newest entry dropped
	news    chan struct{} // closed and replaced at the machine's next entry
}

type endedEntry struct {
	seq     uint64
	session string
	before  time.Time // a revocation of the tickets issued before; zero: the session ended
}

// Ended tells the agents that session, which ran on machine, has ended: the machine's agent
// cuts its channels and refuses its tickets from then on.
func (a *Agents) Ended(session, machine string) { a.add(machine, endedEntry{session: session}) }

// Revoked tells the agents that the tickets of session, which runs on machine, issued before
// before are revoked (a steal): the machine's agent cuts the channels they opened and
// refuses them; the session goes on with newer tickets.
func (a *Agents) Revoked(session, machine string, before time.Time) {
	a.add(machine, endedEntry{session: session, before: before})
}

// feedLocked returns machine's feed, made on first use.
func (e *ended) feedLocked(machine string) *machineFeed {
	if e.feeds == nil {
		e.feeds = map[string]*machineFeed{}
	}
	f := e.feeds[machine]
	if f == nil {
		f = &machineFeed{}
		e.feeds[machine] = f
	}
	return f
}

func (a *Agents) add(machine string, en endedEntry) {
	e := &a.ended
	e.mu.Lock()
	defer e.mu.Unlock()
	e.seq++
	en.seq = e.seq
	f := e.feedLocked(machine)
	f.entries = append(f.entries, en)
	if len(f.entries) >= 2*endedKeep {
		f.forgot = f.entries[endedKeep-1].seq
		f.entries = append(f.entries[:0], f.entries[endedKeep:]...)
	}
	if f.news != nil {
		close(f.news)
		f.news = nil
	}
}

// since returns the sessions of machine that ended after seq and the revocations of its
// sessions' tickets, the last sequence number, and whether entries after seq were already
// forgotten; wait is closed at the machine's next entry.
func (e *ended) since(machine string, seq uint64) (sessions []string, revoked []RevokedTickets, last uint64, lost bool, wait <-chan struct{}) {
	e.mu.Lock()
	defer e.mu.Unlock()
	f := e.feedLocked(machine)
	for _, en := range f.entries {
		switch {
		case en.seq <= seq:
		case en.before.IsZero():
			sessions = append(sessions, en.session)
		default:
			revoked = append(revoked, RevokedTickets{Session: en.session, Before: en.before})
		}
	}
	lost = seq < f.forgot
	if f.news == nil {
		f.news = make(chan struct{})
	}
	return sessions, revoked, e.seq, lost, f.news
}

// liveSessions serves GET /v1/agent/live?machine=M: the sessions of M the site holds, for an
// agent to end those it still carries that the site no longer knows.
func (a *Agents) liveSessions(w http.ResponseWriter, r *http.Request) {
	machine := r.URL.Query().Get("machine")
	if !a.auth(w, r, machine) {
		return
	}
	out := LiveSessions{Sessions: []string{}}
	for _, s := range a.o.Broker.SessionsOn(machine) {
		if s.State == broker.StateEnded {
			continue
		}
		out.Sessions = append(out.Sessions, s.ID)
		if a.o.Verifier == nil {
			continue
		}
		if before, err := a.o.Verifier.RevokedBefore(s.ID); err == nil && !before.IsZero() {
			out.Revoked = append(out.Revoked, RevokedTickets{Session: s.ID, Before: before})
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// LiveSessions is the answer of GET /v1/agent/live: the machine's sessions the site holds
// (not ended), and the revocations of their older tickets (a steal gave the session to
// another endpoint), which an agent that restarted has forgotten.
type LiveSessions struct {
	Sessions []string         `json:"sessions"`
	Revoked  []RevokedTickets `json:"revoked,omitempty"`
}

// RevokedTickets is a revocation of a session's tickets issued before Before.
type RevokedTickets struct {
	Session string    `json:"session"`
	Before  time.Time `json:"before"`
}

// EndedNews is the answer of GET /v1/agent/ended.
type EndedNews struct {
	// Feed names the front door's feed: positions (Seq) are its own, so an agent that finds
	// another feed than it read last reconciles instead (GET /v1/agent/live).
	Feed string `json:"feed"`
	// Seq is the feed's position: the next request asks for what came after it.
	Seq uint64 `json:"seq"`
	// Sessions are the machine's sessions that ended since the position asked for.
	Sessions []string `json:"sessions"`
	// Revoked are the revocations of tickets of the machine's sessions since then (steals).
	Revoked []RevokedTickets `json:"revoked,omitempty"`
	// Lost says that some ends since then were forgotten: the agent should end every session
	// the front door no longer knows of.
	Lost bool `json:"lost,omitempty"`
}

// endedFeed serves GET /v1/agent/ended?machine=M&after=SEQ: the sessions of M that ended
// after SEQ, waiting up to endedWait for one when there is none yet. Without after it
// answers the current position at once.
func (a *Agents) endedFeed(w http.ResponseWriter, r *http.Request) {
	machine := r.URL.Query().Get("machine")
	if !a.auth(w, r, machine) {
		return
	}
	after := r.URL.Query().Get("after")
	if after == "" {
		_, _, last, _, _ := a.ended.since(machine, ^uint64(0))
		writeJSON(w, http.StatusOK, EndedNews{Feed: a.ended.id, Seq: last, Sessions: []string{}})
		return
	}
	seq, err := strconv.ParseUint(after, 10, 64)
	if err != nil {
		httpError(w, http.StatusBadRequest, "after must be a sequence number")
		return
	}
	t := time.NewTimer(endedWait)
	defer t.Stop()
	for {
		sessions, revoked, last, lost, wait := a.ended.since(machine, seq)
		if seq > last {
			lost, seq = true, last // the front door restarted: its feed began again
		}
		if len(sessions) > 0 || len(revoked) > 0 || lost {
			if sessions == nil {
				sessions = []string{}
			}
			writeJSON(w, http.StatusOK, EndedNews{Feed: a.ended.id, Seq: last, Sessions: sessions, Revoked: revoked, Lost: lost})
			return
		}
		seq = last
		select {
		case <-wait:
		case <-t.C:
			writeJSON(w, http.StatusOK, EndedNews{Feed: a.ended.id, Seq: last, Sessions: []string{}})
			return
		case <-r.Context().Done():
			return
		}
	}
}
