package client

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/frontdoor-vdi/frontdoor/internal/desktop"
	"github.com/frontdoor-vdi/frontdoor/internal/rfb"
	"github.com/frontdoor-vdi/frontdoor/internal/xdesk"
)

// Desktop returns the session's desktop: its protocol and the TCP channel that carries it
// (the descriptor's, else "vnc" on the first TCP channel).
func (s *Session) Desktop() DesktopInfo {
	s.mu.Lock()
	d := s.desc.Desktop
	s.mu.Unlock()
	if d != nil {
		return *d
	}
	for _, c := range s.chans {
		if c.Proto == "tcp" {
			return DesktopInfo{Protocol: "vnc", Channel: c}
		}
	}
	return DesktopInfo{Protocol: "vnc"}
}

// DesktopCheck is what CheckDesktop saw of the desktop.
type DesktopCheck struct {
	Protocol      string
	Name          string   // the VNC server's name (ServerInit)
	Width, Height int      // the VNC desktop's size
	Lines         []string // the text the builtin desktop draws (machine, zone, user, session, path...)
	Bytes         int64    // bytes of the first full frame
}

// String sums the check up in a line.
func (c DesktopCheck) String() string {
	if c.Protocol == "rdp" {
		return "rdp: the server answered the connection request"
	}
	return fmt.Sprintf("%s: %q %dx%d, a full frame of %d bytes", c.Protocol, c.Name, c.Width, c.Height, c.Bytes)
}

// CheckDesktop opens a desktop stream as a viewer does and reads the desktop: over VNC (the
// builtin desktop too) the server's name and one full frame — and on the builtin desktop
// the lines it draws —, over RDP the server's answer to a connection request. The stream is
// closed afterwards.
func (s *Session) CheckDesktop(ctx context.Context) (DesktopCheck, error) {
	dk := s.Desktop()
	out := DesktopCheck{Protocol: dk.Protocol}
	c, err := s.Attach(ctx, dk.Channel.Port)
	if err != nil {
		return out, err
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if dk.Speaks() == "rdp" {
		return out, xdesk.AnswersRDP(c)
	}
	v, err := rfb.NewClient(c)
	if err != nil {
		return out, fmt.Errorf("the desktop's VNC handshake: %w", err)
	}
	out.Name, out.Width, out.Height = v.Name(), v.Width(), v.Height()
	if err := v.RequestAll(false); err != nil {
		return out, err
	}
	for covered := 0; covered < out.Width*out.Height; {
		m, err := v.ReadMessage()
		if err != nil {
			return out, fmt.Errorf("reading the desktop's first frame: %w", err)
		}
		for _, r := range m.Rects {
			if r.Encoding != rfb.EncodingDesktopSize {
				covered += r.Bounds.Dx() * r.Bounds.Dy()
			}
		}
		out.Bytes += m.Bytes
	}
	if dk.Protocol == "builtin" || strings.HasPrefix(out.Name, "frontdoor ") {
		out.Lines = desktop.ReadText(v.Framebuffer())
	}
	return out, nil
}
