package agent_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/frontdoor-vdi/frontdoor/agent"
	"github.com/frontdoor-vdi/frontdoor/ticket"
)

// A machine's agent that restarted has forgotten which sessions the site ended; a direct-mode
// reconnect ticket lives for hours. So a direct-mode channel of a session the agent does not
// hold is admitted only if the site lists it live, and refused when no front door answers.
func TestADirectChannelOfASessionTheAgentDoesNotHoldNeedsTheSitesWord(t *testing.T) {
	const ip = "127.0.74.2"
	id, ca := machineIdentity(t, ip)
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	signer := ticket.NewSigner(key, nil)
	var mu sync.Mutex
	var live agent.SiteSessions
	var liveErr error
	var calls, lateAt int // from the lateAt-th call on, the site lists s-late too
	port := freePort(t, ip)
	d, err := agent.NewDisplay(agent.DisplayOptions{Machine: "vda-1", Address: netip.MustParseAddr(ip), TCPPorts: []uint16{port},
		Verifier: ticket.NewVerifier(key.Public().(ed25519.PublicKey), ticket.NewMemoryLedger(0, nil), nil), Identity: id,
		Logger: slog.New(slog.DiscardHandler),
		Live: func(context.Context) (agent.SiteSessions, error) {
			mu.Lock()
			defer mu.Unlock()
			calls++
			if lateAt > 0 && calls >= lateAt {
				l := live
				l.Sessions = append(slices.Clone(l.Sessions), "s-late")
				return l, liveErr
			}
			return live, liveErr
		}})
	if err != nil {
		t.Fatal(err)
	}
	serve(t, d)
	issue := func(session string) string {
		t.Helper()
		tok, _, err := signer.Issue(ticket.Claims{Kind: ticket.Reconnect, Session: session, Machine: "vda-1", Mode: ticket.ModeDirect}, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	statusOf := func(tok string) byte {
		t.Helper()
		c, err := tls.Dial("tcp", net.JoinHostPort(ip, strconv.Itoa(int(port))), &tls.Config{RootCAs: ca.Pool(), ServerName: ip})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		ticket.WriteFrame(c, tok)
		st := []byte{ticket.StatusDenied}
		io.ReadFull(c, st)
		return st[0]
	}
	status := func(session string) byte { t.Helper(); return statusOf(issue(session)) }
	set := func(l []string, revoked map[string]time.Time, err error) {
		mu.Lock()
		live, liveErr = agent.SiteSessions{Sessions: l, RevokedBefore: revoked}, err
		mu.Unlock()
	}
	set([]string{"s-live"}, nil, nil)
	if st := status("s-ended"); st == ticket.StatusOK {
		t.Error("a session the site does not list was admitted")
	}
	if st := status("s-live"); st != ticket.StatusOK {
		t.Errorf("a session the site lists live: status %d, want OK", st)
	}
	// A session another endpoint took: the old endpoint's ticket is refused, the new one's
	// taken.
	old := issue("s-taken")
	time.Sleep(5 * time.Millisecond)
	set([]string{"s-taken"}, map[string]time.Time{"s-taken": time.Now()}, nil)
	time.Sleep(5 * time.Millisecond)
	if st := statusOf(old); st == ticket.StatusOK {
		t.Error("the old endpoint's ticket of a session taken by another was admitted")
	}
	if st := status("s-taken"); st != ticket.StatusOK {
		t.Errorf("the new endpoint's ticket: status %d, want OK", st)
	}
	// A session launched a moment ago at another front door, not in the view of the one
	// that answers until its watch catches up: asked again, and admitted.
	mu.Lock()
	lateAt = calls + 3
	mu.Unlock()
	if st := status("s-late"); st != ticket.StatusOK {
		t.Errorf("a session the site lists on the third asking: status %d, want OK", st)
	}
	set(nil, nil, errors.New("no front door"))
	if st := status("s-other"); st == ticket.StatusOK {
		t.Error("a session nobody vouched for was admitted while no front door answered")
	}
}
