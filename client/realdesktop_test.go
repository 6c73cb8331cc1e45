package client

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/frontdoor-vdi/frontdoor/agent"
	"github.com/frontdoor-vdi/frontdoor/internal/xdesk"
)

// needDesktop skips a test whose desktop server or viewer is not installed, except in CI,
// which installs them (.ci/run): there it fails.
func needDesktop(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		return
	}
	if errors.Is(err, xdesk.ErrNotInstalled) && os.Getenv("CI") != "true" {
		t.Skip(err)
	}
	t.Fatal(err)
}

// A real TigerVNC Xvnc behind the agent, on a Unix socket: a Go RFB client reads its
// framebuffer through the gateway, and vncsnapshot, a viewer of its own, through the local
// port that connect --local serves.
func TestARealXvncThroughTheTunnel(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	x, err := xdesk.StartXvnc(ctx, xdesk.XvncOptions{Dir: t.TempDir(), Width: 800, Height: 600, Xterm: true})
	needDesktop(t, err)
	defer x.Close()
	s := newSiteWith(t, &agent.Desktop{Protocol: "vnc", Network: x.Network(), Address: x.Address()})
	s.startGateway("gw-a", gwA)
	sess := s.open(t, s.descriptor("s-xvnc", ModeGateway, "gw-a"), nil, nil)
	dc, err := sess.CheckDesktop(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// CheckDesktop reads until the frame covers the desktop; Xvnc sends it Hextile encoded.
	if dc.Width != 800 || dc.Height != 600 || dc.Bytes == 0 {
		t.Errorf("read %s, want an 800x600 desktop and a full frame", dc)
	}
	addr, err := sess.Expose("127.0.0.1:0", s.port)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "snap.jpg")
	needDesktop(t, xdesk.VNCSnapshot(ctx, addr.String(), out))
	if st, err := os.Stat(out); err != nil || st.Size() < 1000 {
		t.Fatalf("vncsnapshot through the tunnel wrote %v (%v)", st, err)
	}
}

// xrdp in front of an Xvnc, behind the agent: FreeRDP's xfreerdp authenticates through the
// tunnel, and a session whose ticket is forged gets nothing from the server.
func TestXfreerdpThroughTheTunnelToXrdp(t *testing.T) {
	if testing.Short() {
		t.Skip("xfreerdp takes seconds")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	x, err := xdesk.StartXvnc(ctx, xdesk.XvncOptions{Dir: t.TempDir(), TCPPort: xdesk.AnyPort})
	needDesktop(t, err)
	defer x.Close()
	r, err := xdesk.StartXrdp(ctx, xdesk.XrdpOptions{Dir: t.TempDir(), VNC: x.Address()})
	needDesktop(t, err)
	defer r.Close()
	s := newSiteWith(t, &agent.Desktop{Protocol: "rdp", Network: "tcp", Address: r.Address()})
	s.startGateway("gw-a", gwA)
	d := s.descriptor("s-rdp", ModeGateway, "gw-a")
	d.Desktop.Protocol = "rdp"
	sess := s.open(t, d, nil, nil)
	if dc, err := sess.CheckDesktop(ctx); err != nil {
		t.Fatalf("%s: %v", dc, err)
	}
	addr, err := sess.Expose("127.0.0.1:0", s.port)
	if err != nil {
		t.Fatal(err)
	}
	needDesktop(t, xdesk.XfreerdpAuthOnly(ctx, addr.String()))

	forged := s.descriptor("s-rdp-forged", ModeGateway, "gw-a")
	forged.LaunchTicket, forged.ReconnectTicket = "AAAA"+forged.LaunchTicket[4:], "AAAA"+forged.ReconnectTicket[4:]
	if _, err := Open(ctx, Options{Descriptor: forged, RootCAs: s.pool, Channels: s.channels(), Logger: quiet}); !errors.Is(err, ErrTicketDenied) {
		t.Fatalf("a forged ticket: %v, want ErrTicketDenied", err)
	}
}
