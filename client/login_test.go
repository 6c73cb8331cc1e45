package client

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/frontdoor-vdi/frontdoor/internal/testclock"
	"github.com/frontdoor-vdi/frontdoor/ticket"
)

// A reconnect after the login's factor lifetime is refused by the gateway with
// StatusLoginExpired — over TLS and over QUIC alike: the session tries no other gateway,
// makes no new launch with the credentials it holds, and ends with ErrLoginRequired, so that
// the user is asked to log in.
func TestAReconnectPastTheLoginsLifetimeEndsTheSessionForANewLogin(t *testing.T) {
	for _, transport := range []string{"tls", "quic"} {
		t.Run(transport, func(t *testing.T) {
			s := newSite(t)
			clk := testclock.New(time.Now())
			s.gwVer = ticket.NewVerifier(s.pub, ticket.NewMemoryLedger(0, clk.Now), clk.Now)
			o := Options{RootCAs: s.pool, Channels: s.channels(), Logger: quiet, KeepaliveTimeout: 5 * time.Second}
			var stopA func()
			if transport == "quic" {
				port, stops := s.startQUICGateways(gwA, gwB)
				o.QUIC, stopA = &QUICOptions{Port: port}, stops[gwA]
			} else {
				s.startGateway("gw-a", gwA)
				s.startGateway("gw-b", gwB)
				stopA = s.stops["gw-a"]
			}
			login := clk.Now()
			chans := []ticket.Channel{{Port: s.port, Proto: "tcp"}, {Port: s.port, Proto: "udp"}}
			sealed := func(kind ticket.Kind, ttl time.Duration) string {
				tok, _, err := s.signer.Issue(ticket.Claims{Kind: kind, Session: "s-login", Machine: "vda-1", Mode: ModeGateway, Channels: chans,
					User: "alice", Factors: ticket.FactorPassword | ticket.FactorTOTP, AuthTime: login, LoginExpires: login.Add(30 * time.Minute)}, ttl)
				if err != nil {
					t.Fatal(err)
				}
				return tok
			}
			o.Descriptor = s.descriptor("s-login", ModeGateway, "gw-a", "gw-b")
			o.Descriptor.LaunchTicket, o.Descriptor.ReconnectTicket = sealed(ticket.Launch, time.Minute), sealed(ticket.Reconnect, time.Hour)
			var relaunches atomic.Int32
			o.Relaunch = func(context.Context) (*Descriptor, string, error) {
				relaunches.Add(1)
				return nil, "", errors.New("no front door in this test")
			}
			ev := newEvents()
			o.OnEvent = ev.on
			sess, err := Open(ctxT(t), o)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { sess.Close() })
			ev.wait(t, EventUp)

			clk.Advance(40 * time.Minute) // the reconnect tickets live an hour; the login 30 minutes
			stopA()
			ev.wait(t, EventCut)
			lost := ev.wait(t, EventLost)
			select {
			case <-sess.Done():
			case <-time.After(20 * time.Second):
				t.Fatal("the session did not end")
			}
			if err := sess.Err(); !errors.Is(err, ErrLoginRequired) || !errors.Is(err, ErrLoginExpired) {
				t.Fatalf("Err = %v, want ErrLoginRequired for ErrLoginExpired", err)
			}
			if n := relaunches.Load(); n != 0 {
				t.Fatalf("%d new launches with the held credentials, want none", n)
			}
			attempts := 0
			for _, e := range sess.Timeline() {
				if e.Kind == EventAttempt {
					attempts++
				}
			}
			if attempts != 1 {
				t.Fatalf("%d reconnect attempts, want 1 (gw-b's refusal holds for every gateway); lost: %s", attempts, lost)
			}
		})
	}
}

// A new launch that the front door refuses for the credentials held (a one-time code used
// up) ends the session with ErrLoginRequired at once instead of trying until GiveUpAfter.
func TestARelaunchRefusedForTheCredentialsEndsTheSession(t *testing.T) {
	s := newSite(t)
	s.startGateway("gw-a", gwA)
	var relaunches atomic.Int32
	relaunch := func(context.Context) (*Descriptor, string, error) {
		relaunches.Add(1)
		return nil, "", ErrUnauthorized
	}
	ev := newEvents()
	sess := s.open(t, s.descriptor("s-otp", ModeGateway, "gw-a"), ev, relaunch)
	ev.wait(t, EventUp)
	s.stops["gw-a"]()
	ev.wait(t, EventLost)
	select { // the session ends (Err is set) just after the event
	case <-sess.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the session did not end after it was lost")
	}
	if err := sess.Err(); !errors.Is(err, ErrLoginRequired) || !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("Err = %v, want ErrLoginRequired for ErrUnauthorized", err)
	}
	if n := relaunches.Load(); n != 1 {
		t.Fatalf("%d new launches, want 1", n)
	}
}

// In direct mode the machine's agent checks the login's lifetime too, and says so: a
// session whose login is over does not open.
func TestADirectModeMachineRefusesALoginPastItsLifetime(t *testing.T) {
	s := newSite(t)
	login := time.Now().Add(-2 * time.Hour)
	chans := []ticket.Channel{{Port: s.port, Proto: "tcp"}, {Port: s.port, Proto: "udp"}}
	d := s.descriptor("s-direct", ModeDirect)
	for kind, tok := range map[ticket.Kind]*string{ticket.Launch: &d.LaunchTicket, ticket.Reconnect: &d.ReconnectTicket} {
		var err error
		*tok, _, err = s.signer.Issue(ticket.Claims{Kind: kind, Session: "s-direct", Machine: "vda-1", Mode: ModeDirect, Channels: chans,
			User: "alice", Factors: ticket.FactorPassword, AuthTime: login, LoginExpires: login.Add(time.Hour)}, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
	}
	_, err := Open(ctxT(t), Options{Descriptor: d, RootCAs: s.pool, Channels: s.channels(), Logger: quiet})
	if !errors.Is(err, ErrLoginExpired) {
		t.Fatalf("Open: %v, want %v", err, ErrLoginExpired)
	}
}
