package drill

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/frontdoor-vdi/frontdoor/client/admin"
	"github.com/frontdoor-vdi/frontdoor/configs"
	"github.com/frontdoor-vdi/frontdoor/lab"
	"github.com/miekg/dns"
)

// frontDoor is one front door host of the drill site behind its wire: a node and the gateway
// it hosts, on one address.
type frontDoor struct {
	node, gateway string
	public        netip.Addr
	wire          *Wire
	tcp, udp      []uint16 // the gateway's ports (QUIC's with udp)
}

// gatewayPorts returns every port number of the gateway.
func (fd *frontDoor) gatewayPorts() []uint16 {
	var ps []uint16
	for _, p := range append(slices.Clone(fd.tcp), fd.udp...) {
		if !slices.Contains(ps, p) {
			ps = append(ps, p)
		}
	}
	return ps
}

// run is one scenario in one mode.
type run struct {
	o     Options
	mode  string
	cfg   *configs.Config
	lab   *lab.Lab
	doors map[string]*frontDoor // by gateway name
	dns   []string              // the DNS listeners
	admin string                // the admin listener
	api   *admin.Client         // the admin API at admin, as the lab's admin
	storm *storm
	// leaderWatch is told what the zone-leader-killed row measures.
	leaderWatch <-chan leaderTimes
	// stopped are the etcd members etcd-quorum-lost stopped.
	stopped []int
	// etcdWires stand between each zone's nodes and the site database (Scenario.etcdWires);
	// cut is the zone satellite-cut-off cut off.
	etcdWires map[string]*Wire
	cut       string
}

// inner is the address a front door really listens on, behind its wire.
func inner(a netip.Addr) netip.Addr {
	b := a.As4()
	b[3] += 100
	return netip.AddrFrom4(b)
}

// drillSource is the lab site moved to o.Base, with the drill's changes: a short drain, and
// the users of the launch storms (passwords hashed at bcrypt's lowest cost, which the drill
// site allows with site.auth.min_password_cost: a storm measures the site, not bcrypt).
func drillSource(o Options) ([]byte, error) {
	users, err := stormUsers(max(o.Launches, etcdLaunches))
	if err != nil {
		return nil, err
	}
	return lab.MovedSource(o.Base, func(s string) string {
		s = strings.Replace(s, "\nsite:\n", "\nsite:\n  auth: {min_password_cost: 4}\n", 1)
		s = strings.Replace(s, "\nusers:\n", "\nusers:\n"+users, 1)
		return s + fmt.Sprintf("\n# The drill: a node told to stop drains for %s.\nproxy:\n  drain_timeout: %s\n", drainTimeout, drainTimeout)
	})
}

func runScenario(ctx context.Context, o Options, s Scenario, mode string, res *Result) (err error) {
	var stopping time.Time
	defer func() {
		if !stopping.IsZero() {
			res.Stopped = time.Since(stopping)
		}
	}()
	src, err := drillSource(o)
	if err != nil {
		return err
	}
	cfg, err := configs.Load("drill site", src)
	if err != nil {
		return err
	}
	r := &run{o: o, mode: mode, cfg: cfg, doors: map[string]*frontDoor{}}
	public := map[netip.Addr]bool{}
	for _, g := range cfg.Gateways {
		public[g.Address] = true
	}
	// The wires come up first, on the public addresses; the node processes bind the inner ones.
	for _, g := range cfg.Gateways {
		a := g.Address
		fd := &frontDoor{node: g.Node, gateway: g.Name, public: a}
		if g.QUICPort != 0 {
			fd.udp = append(fd.udp, uint16(g.QUICPort))
		}
		for _, p := range g.Ports {
			if p.Protocol == "udp" {
				fd.udp = append(fd.udp, uint16(p.Port))
			} else {
				fd.tcp = append(fd.tcp, uint16(p.Port))
			}
		}
		tcp := slices.Clone(fd.tcp)
		for _, n := range cfg.Nodes {
			for _, l := range n.Listeners {
				if l.Address.Addr() == a && n.Name == g.Node {
					tcp = append(tcp, l.Address.Port())
				}
			}
		}
		w, err := NewWire(a, inner(a), tcp, fd.udp)
		if err != nil {
			r.closeWires()
			return fmt.Errorf("wire for %s: %w", g.Name, err)
		}
		fd.wire = w
		r.doors[g.Name] = fd
	}
	defer r.closeWires()
	for _, n := range cfg.Nodes {
		for _, li := range n.Listeners {
			switch li.Kind {
			case "dns":
				r.dns = append(r.dns, li.Address.String())
			case "admin":
				if r.admin == "" {
					r.admin = li.Address.String()
				}
			}
		}
	}
	if len(r.dns) == 0 || r.admin == "" {
		return errors.New("the drill site needs a DNS and an admin listener")
	}

	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	dataDir := ""
	if o.DataDir != "" {
		dataDir = filepath.Join(o.DataDir, s.Name+"-"+mode)
		if err := os.RemoveAll(dataDir); err != nil {
			return err
		}
	}
	lo := lab.Options{Processes: true, Source: src, Binary: o.Binary, Env: o.Env, Logger: o.Logger, DataDir: dataDir,
		HeartbeatInterval: 500 * time.Millisecond,
		Rebind: func(a netip.Addr) netip.Addr {
			if public[a] {
				return inner(a)
			}
			return a
		}}
	if s.etcdWires {
		lo.StoreEndpoints = r.storeEndpoints
	}
	l, err := lab.New(sctx, lo)
	if err != nil {
		return err
	}
	r.lab, r.cfg = l, l.Config
	r.api = &admin.Client{URL: "https://" + r.admin, User: adminUser, Password: password, TLS: l.TLSClientConfig(), Timeout: 5 * time.Second}
	served := make(chan error, 1)
	go func() { served <- l.Serve(sctx) }()
	defer func() { cancel(); <-served }()
	if err := r.waitGateways(ctx, 20*time.Second); err != nil {
		return err
	}
	if mode == "direct" {
		if err := r.secureGateway(ctx, false); err != nil {
			return err
		}
	}
	res.SiteUp = time.Since(res.Start)

	// Clients launch through DNS and hold their sessions, streaming.
	users := []string{"alice", "bob", "carol", "dave"}
	if o.Clients < len(users) {
		users = users[:o.Clients]
	}
	var browser *browserClient
	if s.browser {
		// The browser's user first; the native clients are the others.
		users = slices.DeleteFunc(users, func(u string) bool { return u == browserUser })
		if browser, err = r.openBrowser(sctx, browserUser); err != nil {
			return fmt.Errorf("%s's desktop in the browser: %w", browserUser, err)
		}
		defer browser.close()
	}
	var sessions []*held
	defer func() {
		stopping = time.Now()
		for _, h := range sessions {
			h.stop()
		}
	}()
	held0 := time.Now()
	for _, u := range users {
		h, err := r.hold(sctx, u)
		if err != nil {
			return fmt.Errorf("client %s: %w", u, err)
		}
		sessions = append(sessions, h)
	}
	res.ClientsUp = time.Since(held0)
	time.Sleep(500 * time.Millisecond) // let traffic flow before the failure

	// The failure hits the front door that carries the first client (in direct mode, the
	// front door of the first client's zone); in a browser row, the browser's gateway's.
	var target *frontDoor
	switch {
	case browser != nil:
		target = r.doors[browser.via]
	case len(sessions) > 0:
		target = r.doorFor(sessions[0])
	}
	if target == nil {
		return errors.New("no front door carries the first client")
	}
	quiet := s.quiet
	if s.pick != nil {
		if target, err = s.pick(sctx, r, target); err != nil {
			return fmt.Errorf("picking the front door for %s: %w", s.Name, err)
		}
		carries := false
		for _, h := range sessions {
			if via, _ := h.s.Via(); via == target.gateway || r.doorFor(h) == target {
				carries = true
			}
		}
		quiet = quiet || !carries
		res.Quiet = quiet
	}
	if s.before != nil {
		if err := s.before(sctx, r, target); err != nil {
			return fmt.Errorf("before %s: %w", s.Name, err)
		}
	}
	before := map[*held]string{}
	for _, h := range sessions {
		before[h], _ = h.s.Via()
	}
	for _, h := range sessions {
		h.w.ResetStall() // the stall the failure causes, not the viewers' start
	}
	var watched sync.WaitGroup
	wctx, stopWatching := context.WithCancel(sctx)
	defer stopWatching()
	if browser != nil {
		watched.Go(func() { browser.watch(wctx) })
		time.Sleep(time.Second) // the page's keys flow before the failure
		browser.resetStall()
	}
	res.FaultAt = time.Now()
	if res.Target, err = s.inject(sctx, r, target); err != nil {
		return fmt.Errorf("injecting %s: %w", s.Name, err)
	}
	r.observe(ctx, sessions, before, target, quiet, res)
	if browser != nil {
		// The page's row: watched the whole window, or until it is back and has stayed so
		// for two seconds.
		for end := res.FaultAt.Add(r.o.Observe); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
			if cr := browser.result(res.FaultAt, target); cr.Back && time.Since(res.FaultAt.Add(cr.BackAfter)) > 2*time.Second {
				break
			}
		}
		stopWatching()
		watched.Wait()
		res.Clients = append([]ClientResult{browser.result(res.FaultAt, target)}, res.Clients...)
	}
	judge(res, mode)
	if s.after != nil {
		if err := s.after(sctx, r, res); err != nil {
			return fmt.Errorf("after %s: %w", s.Name, err)
		}
	}
	return nil
}

// closeWires closes every wire.
func (r *run) closeWires() {
	for _, fd := range r.doors {
		if fd.wire != nil {
			fd.wire.Close()
		}
	}
	for _, w := range r.etcdWires {
		w.Close()
	}
}

// adminStatus is what the drill reads of GET /v1/admin/status.
type adminStatus struct {
	SecureGateway map[string]bool   `json:"secure_gateway"`
	Gateways      map[string]string `json:"gateways"`
}

// secureGateway switches the secure gateway site-wide through the admin API, as an operator
// does, and waits until the admin status shows it.
func (r *run) secureGateway(ctx context.Context, on bool) error {
	if err := r.api.SecureGateway(ctx, "", on); err != nil {
		return fmt.Errorf("switching the secure gateway: %w", err)
	}
	for deadline := time.Now().Add(5 * time.Second); ; {
		var st adminStatus
		if err := r.api.Get(ctx, "/v1/admin/status", &st); err != nil {
			return err
		}
		done := len(st.SecureGateway) > 0
		for _, v := range st.SecureGateway {
			done = done && v == on
		}
		if done {
			// The other nodes follow the switch through their watch of the site database:
			// a round trip of it, which the clients' launches check (hold).
			time.Sleep(300 * time.Millisecond)
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the admin status shows secure gateway %v 5 s after switching it %v", st.SecureGateway, on)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitGateways waits until the site shows every gateway up where an operator and a user
// look: the admin status lists each one up, and every DNS server answers the GSLB name, for
// a client of each zone, with that zone's gateways.
func (r *run) waitGateways(ctx context.Context, d time.Duration) error {
	deadline := time.Now().Add(d)
	want := r.dnsWant()
	for {
		why := r.gatewaysUp(ctx, want)
		if why == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("gateways not up after %s: %s", d, why)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// dnsWant maps each zone's first client range to the addresses the GSLB name answers there
// when all is well: the zone's site's gateways.
func (r *run) dnsWant() map[netip.Prefix][]netip.Addr {
	addr := map[string]netip.Addr{}
	for _, g := range r.cfg.Gateways {
		addr[g.Name] = g.Address
	}
	want := map[netip.Prefix][]netip.Addr{}
	if len(r.cfg.GSLB.Names) == 0 {
		return want
	}
	for _, z := range r.cfg.Zones {
		if len(z.Ranges) == 0 {
			continue
		}
		p := z.Ranges[0]
		for _, site := range r.cfg.GSLB.Names[0].Sites {
			if site.Zone == z.Name {
				for _, g := range site.Gateways {
					want[p] = append(want[p], addr[g])
				}
			}
		}
	}
	return want
}

// gatewaysUp returns "" when every gateway shows up, else what does not.
func (r *run) gatewaysUp(ctx context.Context, want map[netip.Prefix][]netip.Addr) string {
	var st adminStatus
	if err := r.api.Get(ctx, "/v1/admin/status", &st); err != nil {
		return "admin status: " + err.Error()
	}
	for _, g := range r.cfg.Gateways {
		if v := st.Gateways[g.Name]; !strings.HasPrefix(v, "up") {
			return fmt.Sprintf("admin status: %s %q", g.Name, v)
		}
	}
	name := r.cfg.GSLB.Names[0].Name
	for _, server := range r.dns {
		for p, addrs := range want {
			got, err := resolveAs(ctx, name, server, p)
			if err != nil {
				return err.Error()
			}
			for _, a := range addrs {
				if !slices.Contains(got, a) {
					return fmt.Sprintf("%s at %s for %s: %v, want %v", name, server, p, got, addrs)
				}
			}
		}
	}
	return ""
}

// resolveAs asks server for name's A records as a client of subnet (EDNS Client Subnet).
func resolveAs(ctx context.Context, name, server string, subnet netip.Prefix) ([]netip.Addr, error) {
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), dns.TypeA)
	m.SetEdns0(1232, false)
	e := &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: 1, SourceNetmask: uint8(subnet.Bits()), Address: subnet.Addr().AsSlice()}
	m.IsEdns0().Option = append(m.IsEdns0().Option, e)
	c := &dns.Client{Timeout: time.Second}
	resp, _, err := c.ExchangeContext(ctx, m, server)
	if err != nil {
		return nil, fmt.Errorf("asking %s for %s: %w", server, name, err)
	}
	var out []netip.Addr
	for _, rr := range resp.Answer {
		if a, ok := rr.(*dns.A); ok {
			if ip, ok := netip.AddrFromSlice(a.A.To4()); ok {
				out = append(out, ip)
			}
		}
	}
	return out, nil
}

// stopEtcdLeader stops the raft leader of the lab's etcd cluster and returns its name.
func (r *run) stopEtcdLeader(ctx context.Context) (string, error) {
	sctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	st := r.lab.Site().Presence().Status(sctx)
	for _, m := range st.Members {
		if !m.Leader {
			continue
		}
		for i := range len(r.lab.Etcd.Endpoints()) {
			if r.lab.Etcd.Member(i) == m.Name {
				return m.Name, r.lab.Etcd.StopMember(i)
			}
		}
	}
	return "", fmt.Errorf("no leader among the etcd members %+v", st.Members)
}
