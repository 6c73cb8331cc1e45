package api

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"sync"
	"time"

	"github.com/frontdoor-vdi/frontdoor/configs"
	"github.com/frontdoor-vdi/frontdoor/logins"
)

// consoleSession is one login to the console (or to the portal, which keeps its sessions the
// same way).
type consoleSession struct {
	user    configs.User
	li      logins.Login // the login that made it (the portal's: its factors go into tickets)
	csrf    string
	created time.Time
	last    time.Time
}

// consoleStore holds the console sessions of one Admin.
type consoleStore struct {
	mu   sync.Mutex // guards byID and audited
	byID map[string]*consoleSession
	// audited holds, per user and address, when a console login was last audited and how
	// many came since.
	audited map[string]auditedLogin
	now     func() time.Time
	// limit bounds the sessions at once; 0: consoleSessions.
	limit int
}

// max is the most sessions the store keeps at once.
func (cs *consoleStore) max() int {
	if cs.limit > 0 {
		return cs.limit
	}
	return consoleSessions
}

// auditedLogin is the audit log's last word on a user's console logins from one address.
type auditedLogin struct {
	at    time.Time
	since int
}

// audit reports whether a console login of user from src goes in the audit log, and how
// many logins of theirs from there since the last that did (consoleLoginAudit).
func (cs *consoleStore) audit(user, src string) (record bool, since int) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	now := cs.clock()
	if cs.audited == nil {
		cs.audited = map[string]auditedLogin{}
	}
	k := user + "\x00" + src
	if a, ok := cs.audited[k]; ok && now.Sub(a.at) < consoleLoginAudit {
		a.since++
		cs.audited[k] = a
		return false, a.since
	}
	since = cs.audited[k].since
	if len(cs.audited) >= cs.max() {
		for k, a := range cs.audited {
			if now.Sub(a.at) >= consoleLoginAudit {
				delete(cs.audited, k)
			}
		}
	}
	cs.audited[k] = auditedLogin{at: now}
	return true, since
}

func randomToken() string {
	var b [32]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func (cs *consoleStore) clock() time.Time {
	if cs.now != nil {
		return cs.now()
	}
	return time.Now()
}

// start makes a session for u and returns its id.
func (cs *consoleStore) start(u configs.User) (string, *consoleSession) {
	return cs.startLogin(logins.Login{User: u})
}

// startLogin makes a session for the login li and returns its id.
func (cs *consoleStore) startLogin(li logins.Login) (string, *consoleSession) {
	u := li.User
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.byID == nil {
		cs.byID = map[string]*consoleSession{}
	}
	now := cs.clock()
	mine, oldestMine, oldest := 0, "", ""
	for id, s := range cs.byID {
		if s.user.Name == u.Name {
			mine++
			if oldestMine == "" || s.last.Before(cs.byID[oldestMine].last) {
				oldestMine = id
			}
		}
		if oldest == "" || s.last.Before(cs.byID[oldest].last) {
			oldest = id
		}
	}
	switch {
	case mine >= consolePerUser:
		delete(cs.byID, oldestMine)
	case len(cs.byID) >= cs.max():
		delete(cs.byID, oldest)
	}
	id := randomToken()
	s := &consoleSession{user: u, li: li, csrf: randomToken(), created: now, last: now}
	cs.byID[id] = s
	return id, s
}

// get returns the live session id names and marks it used.
func (cs *consoleStore) get(id string) (*consoleSession, bool) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	s, ok := cs.byID[id]
	if !ok {
		return nil, false
	}
	now := cs.clock()
	if now.Sub(s.last) > consoleIdle || now.Sub(s.created) > consoleMaxAge {
		delete(cs.byID, id)
		return nil, false
	}
	s.last = now
	return s, true
}

func (cs *consoleStore) end(id string) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	delete(cs.byID, id)
}

// sessionOf returns the live session that r's cookie names: ok false when r carries no
// such cookie, logins.ErrNoLogin when the session is over. A write (any method but GET and HEAD)
// must come from the page's own origin and carry the session's CSRF token in X-CSRF-Token
// (or, from a form of the page's own, in its csrf field).
func (cs *consoleStore) sessionOf(r *http.Request, cookie string) (*consoleSession, bool, error) {
	c, cerr := r.Cookie(cookie)
	if cerr != nil || c.Value == "" {
		return nil, false, nil
	}
	s, live := cs.get(c.Value)
	if !live {
		return nil, true, logins.ErrNoLogin
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		if !sameOrigin(r) {
			return nil, true, errOrigin
		}
		token := r.Header.Get("X-CSRF-Token")
		if token == "" && r.Header.Get("Content-Type") == "application/x-www-form-urlencoded" {
			token = r.PostFormValue("csrf") // a form of the page's own (logout)
		}
		if subtle.ConstantTimeCompare([]byte(token), []byte(s.csrf)) != 1 {
			return nil, true, errCSRF
		}
	}
	return s, true, nil
}
