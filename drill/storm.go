package drill

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/frontdoor-vdi/frontdoor/broker"
	"github.com/frontdoor-vdi/frontdoor/client"
	"github.com/frontdoor-vdi/frontdoor/ticket"
	clientv3 "go.etcd.io/etcd/client/v3"
	"golang.org/x/crypto/bcrypt"
)

// stormResource is what the storm's users launch: the lab's application hosts (max_sessions
// 20), then its desktops (one session each).
const stormResource = "browser"

// stormUser is the name of the storm's i-th user (from 0).
func stormUser(i int) string { return fmt.Sprintf("storm-%03d", i+1) }

// stormUsers returns the YAML entries of n storm users, each with the lab's password.
func stormUsers(n int) (string, error) {
	h, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.MinCost)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "  - {name: %s, password_hash: %q}\n", stormUser(i), h)
	}
	return b.String(), nil
}

// LaunchCounts is what a launch storm did, counted by its clients, the gateways' logs and
// the site database.
type LaunchCounts struct {
	// Launches were asked; FrontDoors took them in turn.
	Launches   int `json:"launches"`
	FrontDoors int `json:"front_doors"`
	// Killed is the node killed during the storm ("" when none); InFlight launches had
	// started and not yet ended (answer and ticket) when it was killed; Retried launches got
	// no answer at their front door and asked the next one.
	Killed   string `json:"killed,omitempty"`
	InFlight int    `json:"in_flight"`
	Retried  int    `json:"retried"`
	// Sessions launches returned a session id; Denied were refused by the broker (no
	// machine free); Failed got no answer from two front doors.
	Sessions int      `json:"sessions"`
	Denied   int      `json:"denied"`
	Failed   int      `json:"failed"`
	Failures []string `json:"failures,omitempty"`
	// Presented launch tickets were presented at two gateways at once (on two nodes);
	// AdmittedOnce, AdmittedTwice and NeverAdmitted count them by how many admitted them,
	// as the clients saw it (NeverWhy says why, for the first few); Rescued of the never
	// admitted had their session's reconnect ticket admitted then; GatewayAdmissions are the gateways' "channel admitted" log
	// lines for these launch tickets and GatewayTwice the tickets they admitted more than
	// once.
	Presented         int      `json:"presented"`
	AdmittedOnce      int      `json:"admitted_once"`
	AdmittedTwice     int      `json:"admitted_twice"`
	NeverAdmitted     int      `json:"never_admitted"`
	NeverWhy          []string `json:"never_why,omitempty"`
	Rescued           int      `json:"rescued"`
	GatewayAdmissions int      `json:"gateway_admissions"`
	GatewayTwice      int      `json:"gateway_twice"`
	// Found sessions of those returned are in the site database; Lost are not (and did not
	// expire); Expired are not, past their pending timeout; Unheard are the storm users'
	// sessions that no client was told of (a launch cut by the kill: pending, they expire).
	Found   int `json:"found"`
	Lost    int `json:"lost"`
	Expired int `json:"expired"`
	Unheard int `json:"unheard"`
	// Busiest is the machine with the most sessions (and slots), BusiestHeld and
	// BusiestMax its sessions and max_sessions; OverMax counts machines over max_sessions.
	Busiest     string `json:"busiest"`
	BusiestHeld int    `json:"busiest_held"`
	BusiestMax  int    `json:"busiest_max"`
	OverMax     int    `json:"over_max"`
}

// OK reports whether nothing the storm must not do happened: a machine over max_sessions, a
// launch ticket admitted twice, a session lost.
func (c *LaunchCounts) OK() bool {
	return c.OverMax == 0 && c.AdmittedTwice == 0 && c.GatewayTwice == 0 && c.Lost == 0 && c.Sessions > 0
}

// String is the counts in a sentence, for the report's row.
func (c *LaunchCounts) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d launches through %d front doors", c.Launches, c.FrontDoors)
	if c.Killed != "" {
		fmt.Fprintf(&b, ", %d in flight when %s was killed", c.InFlight, c.Killed)
	}
	fmt.Fprintf(&b, ", %d retried at the next front door: %d sessions, %d denied (no machine free), %d failed", c.Retried, c.Sessions, c.Denied, c.Failed)
	fmt.Fprintf(&b, "; launch tickets presented at two gateways at once: %d, admitted once %d, twice %d, never %d",
		c.Presented, c.AdmittedOnce, c.AdmittedTwice, c.NeverAdmitted)
	if c.NeverAdmitted > 0 {
		fmt.Fprintf(&b, " (%d of them then admitted with their reconnect ticket)", c.Rescued)
	}
	fmt.Fprintf(&b, "; gateway logs: %d admissions of these launch tickets, %d tickets twice", c.GatewayAdmissions, c.GatewayTwice)
	fmt.Fprintf(&b, "; site database: %d of %d sessions there, %d lost", c.Found, c.Sessions, c.Lost)
	if c.Expired > 0 {
		fmt.Fprintf(&b, ", %d expired", c.Expired)
	}
	if c.Unheard > 0 {
		fmt.Fprintf(&b, ", %d more that no client was told of (pending, they expire)", c.Unheard)
	}
	fmt.Fprintf(&b, "; busiest machine %s %d of %d, %d machines over max_sessions", c.Busiest, c.BusiestHeld, c.BusiestMax, c.OverMax)
	return b.String()
}

// launchResult is one launch of a storm.
type launchResult struct {
	user          string
	session       string
	denied        bool
	err           error
	tries         []string  // the nodes asked, in order
	started, done time.Time // asked, answered
	ended         time.Time // its ticket presented too
	presented     bool
	admitted      int
	refusals      []string // why a gateway did not admit the launch ticket
	rescued       bool     // not admitted, the session's reconnect ticket was
}

// door is one front door's launch API.
type door struct{ node, url string }

// storm is launches made at once through several front doors.
type storm struct {
	r       *run
	n       int
	doors   []door
	victim  string         // the node the storm's scenario kills
	results []launchResult // by launch index

	mu       sync.Mutex // guards answered, killAt, results' entries
	answered int
	killAt   time.Time
	changed  chan struct{} // closed and replaced at each answer
	finished chan struct{} // closed when every launch has answered
}

// startStorm starts n launches by n users, workers at a time, through the launch API of
// every node in turn; victim is the node the scenario kills ("" for none).
func (r *run) startStorm(ctx context.Context, n, workers int, victim string) *storm {
	return r.startStormIn(ctx, n, workers, victim, "")
}

// startStormIn is startStorm through the front doors of zone only ("": every zone's).
func (r *run) startStormIn(ctx context.Context, n, workers int, victim, zone string) *storm {
	st := &storm{r: r, n: n, victim: victim, results: make([]launchResult, n),
		changed: make(chan struct{}), finished: make(chan struct{})}
	for _, nd := range r.cfg.Nodes {
		if zone != "" && nd.Zone != zone {
			continue
		}
		for _, li := range nd.Listeners {
			if li.Kind == "launch" {
				st.doors = append(st.doors, door{node: nd.Name, url: "https://" + li.Address.String()})
			}
		}
	}
	next := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range next {
				st.launch(ctx, i)
			}
		})
	}
	go func() {
		for i := range n {
			next <- i
		}
		close(next)
		wg.Wait()
		close(st.finished)
	}()
	return st
}

// launch makes launch i: at its front door, else at the next one, as a client does; then
// presents its launch ticket at the descriptor's first two gateways at once.
func (st *storm) launch(ctx context.Context, i int) {
	res := launchResult{user: stormUser(i), started: time.Now()}
	pool := st.r.lab.CA().Pool()
	var d *client.Descriptor
	for try := range 2 {
		fd := st.doors[(i+try)%len(st.doors)]
		res.tries = append(res.tries, fd.node)
		lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		var err error
		d, err = client.Launch(lctx, fd.url, res.user, password, stormResource, res.user+"-pc", pool)
		cancel()
		res.err = err
		if err == nil || errors.Is(err, client.ErrDenied) || errors.Is(err, client.ErrUnauthorized) {
			res.denied = errors.Is(err, client.ErrDenied)
			break
		}
	}
	res.done = time.Now()
	if res.err == nil {
		res.session = d.SessionID
		if d.Mode == client.ModeGateway && d.LaunchTicket != "" {
			res.presented = true
			res.admitted, res.refusals = st.present(ctx, d, d.LaunchTicket)
			if res.admitted == 0 && d.ReconnectTicket != "" {
				// What a client does next: its reconnect ticket, at the gateways again.
				n, why := st.present(ctx, d, d.ReconnectTicket)
				res.rescued = n > 0
				res.refusals = append(res.refusals, why...)
			}
		}
	}
	res.ended = time.Now()
	st.mu.Lock()
	st.results[i] = res
	st.answered++
	close(st.changed)
	st.changed = make(chan struct{})
	st.mu.Unlock()
}

// present presents a ticket of d for its first TCP channel at the descriptor's first two
// gateways at once, and returns how many admitted it and why the others did not.
func (st *storm) present(ctx context.Context, d *client.Descriptor, tok string) (int, []string) {
	var port uint16
	for _, c := range d.Channels {
		if c.Proto == "tcp" {
			port = c.Port
			break
		}
	}
	type gw struct {
		name string
		addr netip.Addr
	}
	var gws []gw
	for _, g := range d.Gateways {
		if len(g.Addresses) == 0 {
			continue
		}
		gws = append(gws, gw{g.Name, g.Addresses[0]})
		if len(gws) == 2 {
			break
		}
	}
	if port == 0 || len(gws) == 0 {
		return 0, []string{"the descriptor offers no gateway or no TCP channel"}
	}
	var mu sync.Mutex
	n := 0
	var refusals []string
	var wg sync.WaitGroup
	for _, g := range gws {
		wg.Go(func() {
			ok, err := presentTicket(ctx, st.r.lab.TLSClientConfig(), g.addr, port, tok)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case ok:
				n++
			case err != nil:
				refusals = append(refusals, fmt.Sprintf("%s: %v", g.name, err))
			default:
				refusals = append(refusals, g.name+": denied")
			}
		})
	}
	wg.Wait()
	return n, refusals
}

// presentTicket opens a gateway channel with a ticket, as a client does (TLS, the ticket
// frame, the status byte), and reports whether the gateway admitted it; the channel is
// closed again at once.
func presentTicket(ctx context.Context, tc *tls.Config, addr netip.Addr, port uint16, tok string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	cfg := tc.Clone()
	cfg.ServerName = addr.String()
	d := &tls.Dialer{NetDialer: &net.Dialer{}, Config: cfg}
	c, err := d.DialContext(ctx, "tcp", netip.AddrPortFrom(addr, port).String())
	if err != nil {
		return false, err
	}
	defer c.Close()
	dl, _ := ctx.Deadline()
	c.SetDeadline(dl)
	return admitted(c, tok)
}

// admitted writes a ticket frame on c and reads the gateway's status byte.
func admitted(c net.Conn, tok string) (bool, error) {
	if err := ticket.WriteFrame(c, tok); err != nil {
		return false, err
	}
	var st [1]byte
	if _, err := c.Read(st[:]); err != nil {
		return false, err
	}
	return st[0] == ticket.StatusOK || st[0] == ticket.StatusRotated, nil
}

// waitAnswered waits until k launches have answered (or all have).
func (st *storm) waitAnswered(ctx context.Context, k int) error {
	for {
		st.mu.Lock()
		n, ch := st.answered, st.changed
		st.mu.Unlock()
		if n >= k {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-st.finished:
			return nil
		case <-ch:
		}
	}
}

// killed records that the storm's victim is being killed now.
func (st *storm) killed(node string) {
	st.mu.Lock()
	st.victim, st.killAt = node, time.Now()
	st.mu.Unlock()
}

// finishStorm waits for the scenario's storm to end, counts what it did and judges it.
func (r *run) finishStorm(ctx context.Context, res *Result) error {
	st := r.storm
	if st == nil {
		return errors.New("no launch storm ran")
	}
	if err := st.wait(ctx); err != nil {
		return err
	}
	c, err := st.count(ctx)
	if err != nil {
		return err
	}
	res.Launches = c
	res.Actual += "; " + c.String()
	if !c.OK() || (res.Quiet && c.Failed > 0) {
		res.Pass = false
	}
	return nil
}

// wait waits until every launch of the storm has ended, at most 2 minutes.
func (st *storm) wait(ctx context.Context) error {
	select {
	case <-st.finished:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(2 * time.Minute):
		return errors.New("the launch storm did not end within 2 minutes")
	}
}

// count counts the storm's launches, the gateways' admissions of their tickets (from the
// node processes' logs) and their sessions in the site database (read from etcd).
func (st *storm) count(ctx context.Context) (*LaunchCounts, error) {
	st.mu.Lock()
	killAt := st.killAt
	st.mu.Unlock()
	c := &LaunchCounts{Launches: st.n, FrontDoors: len(st.doors)}
	if !killAt.IsZero() {
		c.Killed = st.victim
	}
	returned := map[string]launchResult{}
	for _, x := range st.results {
		if !killAt.IsZero() && x.started.Before(killAt) && x.ended.After(killAt) {
			c.InFlight++
		}
		if len(x.tries) > 1 {
			c.Retried++
		}
		switch {
		case x.err == nil:
			c.Sessions++
			returned[x.session] = x
		case x.denied:
			c.Denied++
		default:
			c.Failed++
			if len(c.Failures) < 5 {
				c.Failures = append(c.Failures, x.user+": "+x.err.Error())
			}
		}
		if x.presented {
			c.Presented++
			switch x.admitted {
			case 0:
				c.NeverAdmitted++
				if x.rescued {
					c.Rescued++
				}
				if len(c.NeverWhy) < 5 {
					c.NeverWhy = append(c.NeverWhy, x.user+": "+strings.Join(x.refusals, ", "))
				}
			case 1:
				c.AdmittedOnce++
			default:
				c.AdmittedTwice++
			}
		}
	}

	// The gateways' own word: one "channel admitted" line per launch-ticket channel.
	perTicket := map[string]int{}
	for _, p := range st.r.lab.Procs {
		if err := gatewayAdmissions(p.Log, returned, perTicket); err != nil {
			return nil, err
		}
	}
	for _, n := range perTicket {
		c.GatewayAdmissions += n
		if n > 1 {
			c.GatewayTwice++
		}
	}

	// The site database, read from etcd itself (not a node's view).
	cli, prefix := st.r.lab.SiteDB()
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	sr, err := cli.Get(rctx, prefix+"sessions/", clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("reading the sessions from etcd: %w", err)
	}
	held := map[string]int{}
	inStore := map[string]bool{}
	for _, kv := range sr.Kvs {
		var rec struct {
			Session broker.Session `json:"session"`
		}
		if err := json.Unmarshal(kv.Value, &rec); err != nil {
			return nil, fmt.Errorf("session %s in etcd: %w", kv.Key, err)
		}
		s := rec.Session
		if s.State == broker.StateEnded {
			continue
		}
		held[s.Machine]++
		inStore[s.ID] = true
		if strings.HasPrefix(s.User, "storm-") {
			if _, ok := returned[s.ID]; !ok {
				c.Unheard++
			}
		}
	}
	slots, err := cli.Get(rctx, prefix+"slots/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return nil, fmt.Errorf("reading the slots from etcd: %w", err)
	}
	slotsOf := map[string]int{}
	for _, kv := range slots.Kvs {
		rest := strings.TrimPrefix(string(kv.Key), prefix+"slots/")
		if m, _, ok := strings.Cut(rest, "/"); ok {
			slotsOf[m]++
		}
	}
	pending := st.r.cfg.Site.Sessions.PendingTimeout.D()
	for id, x := range returned {
		switch {
		case inStore[id]:
			c.Found++
		case pending > 0 && time.Since(x.done) > pending:
			c.Expired++
		default:
			c.Lost++
		}
	}
	var names []string
	for _, m := range st.r.cfg.Machines {
		names = append(names, m.Name)
	}
	sort.Strings(names)
	for _, name := range names {
		var maxSessions int
		for _, m := range st.r.cfg.Machines {
			if m.Name == name {
				maxSessions = m.MaxSessions
			}
		}
		n := max(held[name], slotsOf[name])
		if n > maxSessions {
			c.OverMax++
		}
		if c.Busiest == "" || n > c.BusiestHeld {
			c.Busiest, c.BusiestHeld, c.BusiestMax = name, n, maxSessions
		}
	}
	return c, nil
}

// gatewayAdmissions adds to perTicket, for each launch-ticket channel of a returned session
// that a gateway logged as admitted in the node log at path, one per log line.
func gatewayAdmissions(path string, returned map[string]launchResult, perTicket map[string]int) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("reading a node's log: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.Contains(line, `msg="channel admitted"`) {
			continue
		}
		attrs := logAttrs(line)
		if attrs["kind"] != "launch" {
			continue
		}
		if _, ok := returned[attrs["session"]]; ok {
			perTicket[attrs["session"]+" "+attrs["channel"]]++
		}
	}
	return sc.Err()
}

// logAttrs returns the unquoted key=value attributes of a log line of slog's text handler.
func logAttrs(line string) map[string]string {
	out := map[string]string{}
	for _, f := range strings.Fields(line) {
		if k, v, ok := strings.Cut(f, "="); ok {
			out[k] = v
		}
	}
	return out
}
