package gateway

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/frontdoor-vdi/frontdoor/internal/testbuf"
	"github.com/frontdoor-vdi/frontdoor/ticket"
)

// A ticket whose login is past its factor lifetime is answered StatusLoginExpired, not
// StatusDenied, and the log says whose login it was and why the channel was refused.
func TestATicketPastItsLoginsLifetimeIsAnsweredLoginExpired(t *testing.T) {
	signer, v, pub := keys(t)
	port, stop := machine(t, pub)
	t.Cleanup(stop)
	var logs testbuf.Buffer
	r := startWith(t, "127.0.60.1", "gw-1", "127.0.50.1", port, 0, newSessions("s-1"), signer, v, nil,
		func(o *Options) { o.Logger = slog.New(slog.NewTextHandler(&logs, nil)) })

	login := time.Now().Add(-2 * time.Hour)
	tok, _, err := signer.Issue(ticket.Claims{Kind: ticket.Reconnect, Session: "s-1", Machine: "vda-1", Mode: ticket.ModeGateway,
		User: "alice", Factors: ticket.FactorPassword, AuthTime: login, LoginExpires: login.Add(time.Hour)}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if c, st := r.dialTCP(t, tok); st != ticket.StatusLoginExpired {
		if c != nil {
			c.Close()
		}
		t.Fatalf("status %d, want StatusLoginExpired (%d)", st, ticket.StatusLoginExpired)
	}
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(logs.String(), "factor lifetime is over"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the log does not say why:\n%s", logs.String())
		}
	}
	if l := logs.String(); !strings.Contains(l, "user=alice") || !strings.Contains(l, "session=s-1") || !strings.Contains(l, "level=INFO") {
		t.Fatalf("the refusal's log line lacks the user, the session or its level:\n%s", l)
	}
}
