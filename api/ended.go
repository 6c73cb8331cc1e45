package api

import (
	"net/http"
	"strconv"
	"sync"
	"time"
)

// endedKeep is how many session ends the agent API remembers for agents to read.
const endedKeep = 4096

// endedWait bounds how long GET /v1/agent/ended waits for news (below the listeners' 30 s
// write timeout).
const endedWait = 20 * time.Second

// ended is the feed of sessions that ended (logoff, expiry) and of revocations of a
// session's older tickets (steal), for the machines' agents: a
// bounded ring with sequence numbers and a channel closed at each new entry.
type ended struct {
	mu      sync.Mutex // guards all below
	seq     uint64     // of the last entry
	entries []endedEntry
	news    chan struct{} // closed and replaced when an entry is added
}

type endedEntry struct {
	seq              uint64
	session, machine string
	before           time.Time // a revocation of the tickets issued before; zero: the session ended
}

// Ended tells the agents that session, which ran on machine, has ended: the machine's agent
// cuts its channels and refuses its tickets from then on.
func (a *Agents) Ended(session, machine string) {
	a.add(endedEntry{session: session, machine: machine})
}

// Revoked tells the agents that the tickets of session, which runs on machine, issued before
// before are revoked (a steal): the machine's agent cuts the channels they opened and
// refuses them; the session goes on with newer tickets.
func (a *Agents) Revoked(session, machine string, before time.Time) {
	a.add(endedEntry{session: session, machine: machine, before: before})
}

func (a *Agents) add(en endedEntry) {
	e := &a.ended
	e.mu.Lock()
	defer e.mu.Unlock()
	e.seq++
	en.seq = e.seq
	e.entries = append(e.entries, en)
	if len(e.entries) > endedKeep {
		e.entries = append(e.entries[:0], e.entries[len(e.entries)-endedKeep:]...)
	}
	if e.news != nil {
		close(e.news)
		e.news = nil
	}
}

// since returns the sessions of machine that ended after seq and the revocations of its
// sessions' tickets, the last sequence number, and whether entries after seq were already
// forgotten; wait is closed at the next entry.
func (e *ended) since(machine string, seq uint64) (sessions []string, revoked []RevokedTickets, last uint64, lost bool, wait <-chan struct{}) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, en := range e.entries {
		switch {
		case en.seq <= seq || en.machine != machine:
		case en.before.IsZero():
			sessions = append(sessions, en.session)
		default:
			revoked = append(revoked, RevokedTickets{Session: en.session, Before: en.before})
		}
	}
	lost = len(e.entries) > 0 && e.entries[0].seq > seq+1 && seq < e.seq
	if e.news == nil {
		e.news = make(chan struct{})
	}
	return sessions, revoked, e.seq, lost, e.news
}

// RevokedTickets is a revocation of a session's tickets issued before Before.
type RevokedTickets struct {
	Session string    `json:"session"`
	Before  time.Time `json:"before"`
}

// EndedNews is the answer of GET /v1/agent/ended.
type EndedNews struct {
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
		writeJSON(w, http.StatusOK, EndedNews{Seq: last, Sessions: []string{}})
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
			writeJSON(w, http.StatusOK, EndedNews{Seq: last, Sessions: sessions, Revoked: revoked, Lost: lost})
			return
		}
		seq = last
		select {
		case <-wait:
		case <-t.C:
			writeJSON(w, http.StatusOK, EndedNews{Seq: last, Sessions: []string{}})
			return
		case <-r.Context().Done():
			return
		}
	}
}
