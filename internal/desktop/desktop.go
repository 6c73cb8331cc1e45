// Package desktop is the built-in desktop: a small RFB server that a machine's agent runs when
// no real desktop server is configured, so that any VNC viewer shows a real screen. The screen
// names the machine, zone, user, session and path (the gateway that carries the session), a
// clock and the last keys typed, drawn in a fixed bitmap font on a fixed grid that ReadText
// reads back exactly.
package desktop

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/frontdoor-vdi/frontdoor/internal/rfb"
)

// Info is what the desktop shows about the session it serves.
type Info struct {
	// Machine, Zone, User and Session name the machine, its zone, the user and the session.
	Machine, Zone, User, Session string
	// Path is the name of the gateway that carries the session, or "direct".
	Path string
}

// Options configure a Desktop.
type Options struct {
	// Width and Height are the framebuffer's size in pixels; default 1024 and 768, at most
	// 8192 each.
	Width, Height int
	// Now reads the clock shown on the screen; default time.Now.
	Now func() time.Time
	// Logger receives a line as each viewer arrives and leaves; default discards.
	Logger *slog.Logger
}

// Desktop serves the built-in desktop to any number of viewers, each on its own connection.
type Desktop struct {
	width, height int
	now           func() time.Time
	log           *slog.Logger
	font          *font
	newTicker     func(time.Duration) ticker
}

// ticker is the part of time.Ticker the desktop uses, so that tests can tick by hand.
type ticker interface {
	C() <-chan time.Time
	Stop()
}

type realTicker struct{ t *time.Ticker }

func (r realTicker) C() <-chan time.Time { return r.t.C }
func (r realTicker) Stop()               { r.t.Stop() }

// handshakeTimeout bounds how long a viewer may take to finish the RFB handshake.
const handshakeTimeout = 10 * time.Second

// maxSide is the largest width or height a Desktop draws.
const maxSide = 8192

// New returns a desktop with o's options, defaults filled in.
func New(o Options) *Desktop {
	d := &Desktop{width: o.Width, height: o.Height, now: o.Now, log: o.Logger, font: newFont(),
		newTicker: func(p time.Duration) ticker { return realTicker{time.NewTicker(p)} }}
	if d.width <= 0 {
		d.width = 1024
	}
	if d.height <= 0 {
		d.height = 768
	}
	d.width, d.height = min(d.width, maxSide), min(d.height, maxSide)
	if d.now == nil {
		d.now = time.Now
	}
	if d.log == nil {
		d.log = slog.New(slog.DiscardHandler)
	}
	return d
}

// Name returns the ServerInit name for info, such as "frontdoor vda-1 session 7f3a9c".
func Name(info Info) string {
	parts := []string{"frontdoor"}
	if info.Machine != "" {
		parts = append(parts, info.Machine)
	}
	if info.Session != "" {
		parts = append(parts, "session", info.Session)
	}
	if len(parts) == 1 {
		parts = append(parts, "desktop")
	}
	return strings.Join(parts, " ")
}

// Serve speaks RFB on c until the viewer leaves, c fails or ctx ends, and closes c before it
// returns. info is called each time the screen is drawn, so the path may change while the
// viewer is connected (a session that moved to another gateway); nil shows an empty Info.
// Serve returns nil when the viewer leaves and ctx's error when ctx ends.
func (d *Desktop) Serve(ctx context.Context, c net.Conn, info func() Info) (err error) {
	if info == nil {
		info = func() Info { return Info{} }
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	remote := "unknown"
	if a := c.RemoteAddr(); a != nil {
		remote = a.String()
	}
	log := d.log.With("viewer", remote)
	defer func() {
		if p := recover(); p != nil {
			log.Error("desktop panicked", "panic", p)
			err = fmt.Errorf("desktop panicked: %v", p)
		}
		log.Debug("viewer left", "err", err)
	}()

	c.SetDeadline(time.Now().Add(handshakeTimeout))
	sc, err := rfb.ServerHandshake(c, d.width, d.height, Name(info()))
	if err != nil {
		c.Close()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("handshake with viewer %s: %w", remote, err)
	}
	c.SetDeadline(time.Time{})
	log.Debug("viewer arrived")

	events := make(chan rfb.ClientMessage)
	readErr := make(chan error, 1)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { readErr <- forward(sc, events, done, log) })
	defer func() {
		c.Close()
		close(done)
		wg.Wait()
	}()

	v := newViewer(d, sc, info)
	tick := d.newTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-readErr:
			switch {
			case ctx.Err() != nil:
				return ctx.Err()
			case errors.Is(err, io.EOF):
				return nil
			}
			return fmt.Errorf("reading from viewer: %w", err)
		case m := <-events:
			v.handle(m)
		case <-tick.C():
			v.tick = true
		}
		if err := v.flush(); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("writing to viewer: %w", err)
		}
	}
}

// forward reads client messages and hands requests and key presses to the serving loop until
// reading fails or done is closed.
func forward(sc *rfb.ServerConn, events chan<- rfb.ClientMessage, done <-chan struct{}, log *slog.Logger) (err error) {
	defer func() {
		if p := recover(); p != nil {
			log.Error("desktop reader panicked", "panic", p)
			err = fmt.Errorf("desktop reader panicked: %v", p)
		}
	}()
	for {
		m, err := sc.ReadMessage()
		if err != nil {
			return err
		}
		switch m.(type) {
		case rfb.FramebufferUpdateRequest, rfb.KeyEvent, rfb.SetDesktopSize, rfb.ClientCutText:
		default:
			continue // pixel formats and encodings are applied by sc; the pointer is ignored
		}
		select {
		case events <- m:
		case <-done:
			return nil
		}
	}
}
