package main

// The RFB viewer the benchmarks drive (internal/rfb's client), and the statistics they report.

import (
	"errors"
	"fmt"
	"math"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/frontdoor-vdi/frontdoor/internal/desktop"
	"github.com/frontdoor-vdi/frontdoor/internal/rfb"
)

// viewer is one RFB connection.
type viewer struct {
	conn net.Conn
	rfb  *rfb.Client
}

// newViewer speaks the viewer's handshake on c and reads the whole screen once, within 10s.
func newViewer(c net.Conn) (*viewer, error) { return newViewerWith(c, rfb.ClientOptions{}) }

// newViewerWith is newViewer asking the server for o.
func newViewerWith(c net.Conn, o rfb.ClientOptions) (*viewer, error) {
	c.SetDeadline(time.Now().Add(10 * time.Second))
	cl, err := rfb.NewClientWith(c, o)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("rfb handshake: %w", err)
	}
	v := &viewer{conn: c, rfb: cl}
	if err := v.rfb.RequestAll(false); err != nil {
		c.Close()
		return nil, err
	}
	if _, err := v.update(); err != nil {
		c.Close()
		return nil, fmt.Errorf("first update: %w", err)
	}
	c.SetDeadline(time.Time{})
	return v, nil
}

func (v *viewer) Close() error { return v.conn.Close() }

// update reads messages until a FramebufferUpdate and returns it.
func (v *viewer) update() (rfb.Message, error) {
	for range 1000 {
		m, err := v.rfb.ReadMessage()
		if err != nil {
			return m, err
		}
		if m.Type == rfb.MsgFramebufferUpdate {
			return m, nil
		}
	}
	return rfb.Message{}, errors.New("1000 messages without a framebuffer update")
}

// keyLine is the keys row of the builtin desktop as a viewer's framebuffer shows it.
func keyLine(v *viewer) string {
	for _, l := range desktop.ReadText(v.rfb.Framebuffer()) {
		if strings.HasPrefix(l, "keys:") {
			return l
		}
	}
	return ""
}

// roundTrip presses and releases key with an incremental request waiting, and returns the
// time until the update that shows it: on the builtin desktop (builtin) the first whose keys
// row reads want, on another desktop the first update at all (an xterm's echo). It leaves an
// incremental request waiting. Bounded by 5s.
func (v *viewer) roundTrip(key uint32, builtin bool, want string) (time.Duration, error) {
	v.conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	defer v.conn.SetReadDeadline(time.Time{})
	t0 := time.Now()
	if err := v.rfb.Key(key, true); err != nil {
		return 0, err
	}
	if err := v.rfb.Key(key, false); err != nil {
		return 0, err
	}
	for range 100 {
		if _, err := v.update(); err != nil {
			return 0, err
		}
		d := time.Since(t0)
		if err := v.rfb.RequestAll(true); err != nil {
			return 0, err
		}
		if !builtin || keyLine(v) == want {
			return d, nil
		}
	}
	return 0, errors.New("100 updates without the key")
}

// quantile returns the q-quantile (nearest rank) of sorted xs.
func quantile(xs []time.Duration, q float64) time.Duration {
	if len(xs) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(xs)))) - 1
	return xs[min(max(i, 0), len(xs)-1)]
}

// dist is a sample's p50, p99 and max.
type dist struct {
	n             int
	p50, p99, max time.Duration
}

func distOf(xs []time.Duration) dist {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		return dist{}
	}
	return dist{n: len(s), p50: quantile(s, 0.5), p99: quantile(s, 0.99), max: s[len(s)-1]}
}

// ms formats a duration in milliseconds with 3 decimals.
func ms(d time.Duration) string { return fmt.Sprintf("%.3f", float64(d)/1e6) }
