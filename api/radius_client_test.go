package api

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/frontdoor-vdi/frontdoor/client"
	"github.com/frontdoor-vdi/frontdoor/logins/radiustest"
)

// frontdoor connect's launcher sends the passcode as --otp does, and says why a challenge
// was refused.
func TestTheLauncherSendsARADIUSPasscode(t *testing.T) {
	srv := radiustest.Start(t, radiustest.SecretText, false)
	s := newRADIUSSite(t, "role: factor, users: [alice]", srv.Addr)
	url, _, pool := s.frontDoor()
	host, port, _ := net.SplitHostPort(strings.TrimPrefix(url, "https://"))
	p, _ := strconv.Atoi(port)
	l := &client.Launcher{Name: host, Port: uint16(p), User: "alice", Password: "lab", OTP: "123456", Resource: "desktop", RootCAs: pool}
	if _, _, err := l.Launch(context.Background()); err != nil {
		t.Fatalf("the launcher with a passcode: %v", err)
	}
	l.OTP = "999999"
	_, _, err := l.Launch(context.Background())
	if !errors.Is(err, client.ErrUnauthorized) || !strings.Contains(err.Error(), "Access-Challenge") {
		t.Fatalf("the launcher with a challenged passcode: %v; want %v saying why", err, client.ErrUnauthorized)
	}
}
