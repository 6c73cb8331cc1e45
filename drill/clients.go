package drill

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/frontdoor-vdi/frontdoor/client"
)

// doorFor returns the front door a client's traffic goes through (gateway mode), or the
// first front door of its machine's zone (direct mode).
func (r *run) doorFor(h *held) *frontDoor {
	via, _ := h.s.Via()
	if fd := r.doors[via]; fd != nil {
		return fd
	}
	zone := h.s.Descriptor().Zone
	for _, g := range r.cfg.Gateways {
		if g.Zone == zone {
			return r.doors[g.Name]
		}
	}
	var names []string
	for name := range r.doors {
		names = append(names, name)
	}
	sort.Strings(names)
	return r.doors[names[0]]
}

// held is a client session kept busy with traffic.
type held struct {
	user   string
	s      *client.Session
	w      *client.Watcher // the user's viewer on the desktop
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func (h *held) stop() {
	h.cancel()
	h.w.Close()
	h.s.Close()
	h.wg.Wait()
}

// setupTimeout bounds a drill client's launch, channels and viewer handshake.
const setupTimeout = 30 * time.Second

// hold launches a desktop for user through DNS, as a client does, opens its channels and
// watches the desktop as a user does — a VNC viewer that asks for every update and types a
// key every 100ms (client.Watcher) — with a little UDP traffic beside. In gateway mode it launches again (the same session) until the
// descriptor offers every gateway of the site: each node's health sees the gateways come up
// by itself.
func (r *run) hold(ctx context.Context, user string) (*held, error) {
	pool := r.lab.CA().Pool()
	name := strings.TrimSuffix(r.cfg.GSLB.Names[0].Name, ".")
	ln := &client.Launcher{Name: name, DNSServer: r.dns[0], User: user, Password: password, Resource: "desktop",
		Endpoint: user + "-laptop", RootCAs: pool}
	// Setting up is not what a drill measures: on a loaded machine a launch, the channels
	// and the viewer's handshake may take a while, and a client gets 30 s for them.
	lctx, cancel := context.WithTimeout(ctx, setupTimeout)
	defer cancel()
	var d *client.Descriptor
	retried := false
	for {
		var err error
		d, _, err = ln.Launch(lctx)
		var denied *client.DeniedError
		if errors.As(err, &denied) && lctx.Err() == nil {
			// A site that has just come up may still be taking in its machines' first
			// health verdicts and load reports: a user tries again.
			if time.Until(deadline(lctx)) < time.Second {
				return nil, fmt.Errorf("%w; trace: %s", err, strings.Join(denied.Trace, "; "))
			}
			if !retried {
				retried = true
				fmt.Fprintf(r.o.Progress, "  client %s: %v; trying again (trace: %s)\n", user, err, strings.Join(denied.Trace, "; "))
			}
			time.Sleep(200 * time.Millisecond)
			continue
		}
		if err != nil {
			return nil, err
		}
		if d.Mode != r.mode {
			return nil, fmt.Errorf("launched in %s mode, not %s: a front door did not follow the switch", d.Mode, r.mode)
		}
		if d.Mode != "gateway" || len(d.Gateways) == len(r.cfg.Gateways) {
			break
		}
		select {
		case <-lctx.Done():
			return nil, fmt.Errorf("the descriptor offers %d of %d gateways after %s", len(d.Gateways), len(r.cfg.Gateways), setupTimeout)
		case <-time.After(200 * time.Millisecond):
		}
	}
	s, err := client.Open(ctx, client.Options{Descriptor: d, RootCAs: pool, Relaunch: ln.Relaunch, Logger: r.o.Logger})
	if err != nil {
		return nil, err
	}
	if err := s.WaitUp(lctx); err != nil {
		s.Close()
		return nil, err
	}
	w, err := s.Watch(lctx, 100*time.Millisecond)
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("watching the desktop: %w (the session's events: %s)", err, eventsLine(s.Timeline()))
	}
	hctx, hcancel := context.WithCancel(ctx)
	h := &held{user: user, s: s, w: w, cancel: hcancel}
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-hctx.Done():
				return
			case <-t.C:
			}
			if s.Up() {
				ectx, c := context.WithTimeout(hctx, 500*time.Millisecond)
				s.EchoUDP(ectx, 4172, 1, 64)
				c()
			}
		}
	}()
	return h, nil
}

// deadline returns ctx's deadline.
func deadline(ctx context.Context) time.Time {
	d, _ := ctx.Deadline()
	return d
}

// observe watches until every affected client is back and steady, or Observe runs out.
func (r *run) observe(ctx context.Context, hs []*held, before map[*held]string, target *frontDoor, quiet bool, res *Result) {
	deadline := res.FaultAt.Add(r.o.Observe)
	settle := time.Time{}
	for time.Now().Before(deadline) && ctx.Err() == nil {
		res.Clients = res.Clients[:0]
		allBack := true
		for _, h := range hs {
			cr := summarize(h, before[h], target, r.mode, quiet, res.FaultAt)
			res.Clients = append(res.Clients, cr)
			if cr.Cut && !cr.Back {
				allBack = false
			}
		}
		// In gateway mode wait until the affected clients are back and have stayed up for a
		// second (a loop would cut again); in direct mode and when no client may see the
		// failure, watch the whole window.
		if r.mode == "gateway" && !quiet && allBack && hasCut(res.Clients) {
			if settle.IsZero() {
				settle = time.Now().Add(time.Second)
			} else if time.Now().After(settle) {
				break
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	res.Clients = res.Clients[:0]
	for _, h := range hs {
		res.Clients = append(res.Clients, summarize(h, before[h], target, r.mode, quiet, res.FaultAt))
	}
}

func hasCut(cs []ClientResult) bool {
	for _, c := range cs {
		if c.Cut {
			return true
		}
	}
	return false
}

func summarize(h *held, via string, target *frontDoor, mode string, quiet bool, fault time.Time) ClientResult {
	d := h.s.Descriptor()
	cr := ClientResult{User: h.user, Session: d.SessionID, Machine: d.Machine, ViaBefore: via}
	cr.ViaAfter, _ = h.s.Via()
	ws := h.w.Stats()
	cr.ViewerKept, cr.LongestStall, cr.KeysOutOfOrder = ws.Err == nil, ws.LongestStall, ws.KeysOutOfOrder
	cr.SameDrawn, cr.DrawnPath = ws.Line("session ") == d.SessionID, ws.Line("path ")
	cr.Affected = quiet || via == target.gateway || (mode == "direct" && d.Zone == zoneOf(target))
	var cutAt time.Time
	for _, ev := range h.s.Timeline() {
		cr.Events = append(cr.Events, ev)
		if ev.At.Before(fault) {
			continue
		}
		switch ev.Kind {
		case client.EventCut:
			cr.Cuts++
			if !cr.Cut {
				cr.Cut, cutAt, cr.CutAfter = true, ev.At, ev.At.Sub(fault)
			}
		case client.EventBack:
			if cr.Cut && !cr.Back {
				cr.Back, cr.BackAfter, cr.Gap = true, ev.At.Sub(fault), ev.At.Sub(cutAt)
				cr.SameSession, cr.Relaunched = ev.SameSession, ev.Relaunched
			}
		}
	}
	return cr
}

func zoneOf(fd *frontDoor) string {
	// Gateway names are gw-<zone>-<n> in the lab site.
	parts := strings.Split(fd.gateway, "-")
	if len(parts) >= 3 {
		return parts[1]
	}
	return ""
}

// judge fills in Actual and Pass from the clients' results.
func judge(res *Result, mode string) {
	var affected []ClientResult
	for _, c := range res.Clients {
		if c.Affected {
			affected = append(affected, c)
		}
	}
	if len(affected) == 0 {
		res.Actual, res.Pass = "no client was on the failed front door", false
		return
	}
	if mode == "direct" || res.Quiet {
		cut := 0
		for _, c := range res.Clients {
			if c.Cut {
				cut++
			}
		}
		switch {
		case cut > 0:
			res.Actual = fmt.Sprintf("%d of %d clients were cut", cut, len(res.Clients))
		case res.Quiet:
			res.Actual, res.Pass = fmt.Sprintf("Nothing seen by any client (%d clients, none cut)", len(res.Clients)), true
		default:
			res.Actual, res.Pass = fmt.Sprintf("Desktop remained connected (%d of %d clients on the failed front door's zone, none cut)", len(affected), len(res.Clients)), true
		}
		return
	}
	var worstCut, worstBack, worstGap time.Duration
	pass := true
	var notes []string
	for _, c := range affected {
		worstCut, worstBack, worstGap = max(worstCut, c.CutAfter), max(worstBack, c.BackAfter), max(worstGap, c.Gap)
		switch {
		case !c.Cut:
			notes = append(notes, c.User+" never saw a cut")
		case !c.Back:
			pass = false
			notes = append(notes, c.User+" not back")
		case !c.SameSession:
			pass = false
			notes = append(notes, c.User+" back in a NEW session")
		case c.Gap > MaxBack:
			pass = false
			notes = append(notes, fmt.Sprintf("%s back after %.2f s", c.User, c.Gap.Seconds()))
		case c.Cuts > 1:
			pass = false
			notes = append(notes, fmt.Sprintf("%s cut %d times (a loop)", c.User, c.Cuts))
		}
	}
	res.Pass = pass
	res.Actual = fmt.Sprintf("Cut seen after %.2f s, back in the same session automatically %.2f s after the failure (%.2f s after the cut; %d clients affected)",
		worstCut.Seconds(), worstBack.Seconds(), worstGap.Seconds(), len(affected))
	if len(notes) > 0 {
		res.Actual += "; " + strings.Join(notes, "; ")
	}
}

// eventsLine is a session's events on one line, for an error.
func eventsLine(evs []client.Event) string {
	lines := make([]string, len(evs))
	for i, e := range evs {
		lines[i] = e.String()
	}
	return strings.Join(lines, "; ")
}
