// Package lab runs a whole frontdoor site on loopback: an embedded etcd as the site database,
// every node of the configuration (DNS, launch and admin APIs, the gateways it hosts) as its
// own `frontdoor serve` process or, for fast tests, as its own node.Node in this process, and
// an agent with a desktop simulator for every machine. `frontdoor lab` runs the embedded
// configs/lab.yaml with it; the drill runner builds its sites on it. The lab acts on its
// nodes through their APIs, the site database and signals, as an operator would.
package lab

import (
	"context"
	"crypto/ed25519"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/frontdoor-vdi/frontdoor/node"
	"github.com/frontdoor-vdi/frontdoor/pki"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/frontdoor-vdi/frontdoor/agent"
	"github.com/frontdoor-vdi/frontdoor/api"
	"github.com/frontdoor-vdi/frontdoor/broker"
	"github.com/frontdoor-vdi/frontdoor/configs"
	"github.com/frontdoor-vdi/frontdoor/internal/siteid"
	"github.com/frontdoor-vdi/frontdoor/internal/xdesk"
	"github.com/frontdoor-vdi/frontdoor/store/etcd"
	"github.com/frontdoor-vdi/frontdoor/store/etcdembed"
	"github.com/frontdoor-vdi/frontdoor/ticket"
	"golang.org/x/sync/errgroup"
)

// Options configure a Lab.
type Options struct {
	// Config is the site; default: the embedded configs/lab.yaml.
	Config *configs.Config
	// Desktop is what the machines' agents front: "builtin" (each agent draws a desktop
	// itself) or "xvnc" (the lab starts a TigerVNC Xvnc with an xterm per machine, on a Unix
	// socket in the data directory). Default: "builtin".
	Desktop string
	// DataDir keeps the store, keys and certificates; default: a new temporary directory,
	// removed by Close.
	DataDir string
	// Logger receives the components' logs. Default: discard.
	Logger *slog.Logger
	// Progress, when set, is told each step while the lab starts.
	Progress func(step string)
	// HeartbeatInterval is how often agents report load. Default: 2s.
	HeartbeatInterval time.Duration
	// Rebind is passed to every node (see node.Options.Rebind); with Processes, every
	// node process gets a --rebind PUBLIC=INNER flag for each address of the config's
	// listeners and gateways that it changes. Default: nil.
	Rebind func(netip.Addr) netip.Addr
	// Procs is passed to the nodes of this process (see node.Options.Procs). Default: the
	// zero Procs.
	Procs node.Procs
	// Drain is passed to the nodes of this process (see node.Options.Drain): when Serve's
	// context ends or a node is sent SIGTERM, its proxy and gateways drain while the machines
	// carry on. Node processes always drain on SIGTERM. Default: false.
	Drain bool

	// Processes makes the lab a distributed site: an embedded etcd cluster of EtcdMembers
	// members is the site database, and every node runs as its own `frontdoor serve`
	// process of Binary; the machines' agents stay in this process. Default: false (every
	// node in this process, each its own node.Node over a one-member etcd without fsync:
	// fast, for tests).
	Processes bool
	// Source is the YAML of Config, which the node processes load (with a site.store block
	// for the lab's etcd added). Required with Processes; Config is then parsed from it.
	// Default: none (Config is used as it is, pointed at the lab's etcd).
	Source []byte
	// Binary is the frontdoor executable the node processes run. Default: this process's.
	Binary string
	// Env is added to the node processes' environment. Default: none.
	Env []string
	// EtcdMembers is the size of the etcd cluster. Default: 3 with Processes, else 1.
	EtcdMembers int
	// StartTimeout bounds waiting for the node processes to be up. Default: 30s.
	StartTimeout time.Duration
	// StoreEndpoints, when set, is asked for each node process which etcd client URLs it
	// uses instead of the lab's members' (nil: the members'); the drill puts a zone's
	// nodes behind a wire to cut them off the site database this way. Default: nil.
	StoreEndpoints func(node configs.Node, members []string) []string
}

// Lab is a running site.
type Lab struct {
	Config  *configs.Config
	DataDir string
	// Etcd is the site database; nil on a site of one node, which runs on bolt.
	Etcd *etcdembed.Cluster
	// Procs are the node processes of a distributed lab, in config order.
	Procs []*Proc
	// ConfigFile is the configuration the node processes load ("" when one process).
	ConfigFile string
	Displays   map[string]*agent.Display
	Reports    map[string]*agent.Reporter
	// Desktops are the desktop servers the lab started for its machines (Options.Desktop
	// "xvnc"), by machine.
	Desktops map[string]*xdesk.Xvnc

	o        Options
	tmpDir   bool
	log      *slog.Logger
	siteKey  ed25519.PrivateKey
	agentKey []byte
	ca       *pki.CA
	site     *etcd.Store      // the lab's own view of the site database
	siteDB   *clientv3.Client // a client of the site database itself (SiteDB)
	procMu   sync.Mutex       // guards Proc.killed
	members  []*member        // the nodes run in this process; none with Options.Processes
	// verifiers check the tickets at each machine, by name: their keys follow the site's.
	verifiers map[string]*ticket.Verifier
}

// keyRefresh is how often the lab's agents reread the site's ticket keys.
const keyRefresh = 5 * time.Second

func (l *Lab) setIdentity(key ed25519.PrivateKey, ca *pki.CA) {
	l.siteKey, l.agentKey, l.ca = key, api.AgentKey(key), ca
}

// CA returns the site CA, which clients trust.
func (l *Lab) CA() *pki.CA { return l.ca }

// Site returns the lab's own view of the site database; nil on a site of one node.
func (l *Lab) Site() *etcd.Store { return l.site }

// SiteDB returns a client of the site database itself, not a node's view of it, and the
// site's key prefix there: for checks of what etcd holds (the drills). nil on a site of one
// node.
func (l *Lab) SiteDB() (*clientv3.Client, string) {
	if l.siteDB == nil {
		return nil, ""
	}
	return l.siteDB, l.Config.Site.Store.Prefix
}

// ErrNoSiteDatabase is returned by Session and Sessions on a site of one node, whose store is
// its node's own bolt file.
var ErrNoSiteDatabase = errors.New("a site of one node has no site database: its node holds its sessions")

// Session reads a session from the site database.
func (l *Lab) Session(ctx context.Context, id string) (broker.Session, error) {
	if l.site == nil {
		return broker.Session{}, ErrNoSiteDatabase
	}
	return l.site.GetSession(ctx, id)
}

// Sessions reads every live session from the site database.
func (l *Lab) Sessions(ctx context.Context) ([]broker.Session, error) {
	if l.site == nil {
		return nil, ErrNoSiteDatabase
	}
	snap, err := l.site.Load(ctx)
	return snap.Sessions, err
}

// TLSClientConfig returns a client config that trusts the site CA.
func (l *Lab) TLSClientConfig() *tls.Config { return &tls.Config{RootCAs: l.ca.Pool()} }

// New builds the lab and opens every socket; Serve runs it.
func New(ctx context.Context, o Options) (*Lab, error) {
	if o.Processes && len(o.Source) == 0 && o.Config == nil {
		b, err := configs.Shipped("lab.yaml")
		if err != nil {
			return nil, err
		}
		o.Source = b
	}
	if o.Config == nil {
		c, err := configs.Lab()
		if err != nil {
			return nil, err
		}
		o.Config = c
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.Progress == nil {
		o.Progress = func(string) {}
	}
	if o.HeartbeatInterval == 0 {
		o.HeartbeatInterval = 2 * time.Second
	}
	l := &Lab{Config: o.Config, DataDir: o.DataDir, Displays: map[string]*agent.Display{}, Reports: map[string]*agent.Reporter{}, Desktops: map[string]*xdesk.Xvnc{}, o: o, log: o.Logger,
		verifiers: map[string]*ticket.Verifier{}}
	if l.DataDir == "" {
		d, err := os.MkdirTemp("", "frontdoor-lab-")
		if err != nil {
			return nil, fmt.Errorf("creating data dir: %w", err)
		}
		l.DataDir, l.tmpDir = d, true
	}
	if o.Processes {
		if err := l.startDistributed(ctx); err != nil {
			l.stop()
			return nil, err
		}
	} else if err := l.startInProcess(ctx); err != nil {
		l.stop()
		return nil, err
	}
	o.Progress(fmt.Sprintf("starting %d machine agents", len(l.Config.Machines)))
	if err := l.buildAgents(); err != nil {
		l.stop()
		return nil, err
	}
	return l, nil
}

// stop closes what New started: the nodes or the node processes, the etcd cluster.
func (l *Lab) stop() {
	l.closeMembers()
	if len(l.Procs) > 0 {
		l.stopProcs(2 * time.Second)
	}
	if l.site != nil {
		l.site.Close()
	}
	if l.siteDB != nil {
		l.siteDB.Close()
	}
	if l.Etcd != nil {
		l.Etcd.Close()
	}
	l.cleanup()
}

func (l *Lab) buildAgents() error {
	pub := l.siteKey.Public().(ed25519.PublicKey)
	groups := map[string]configs.Group{}
	for _, g := range l.Config.Groups {
		groups[g.Name] = g
	}
	for _, m := range l.Config.Machines {
		doors, err := agent.Candidates(l.Config, m.Name)
		if err != nil {
			return err
		}
		rep := agent.NewReporter(m.Name, api.AgentToken(l.agentKey, m.Name), doors, l.TLSClientConfig(), l.log.With("component", "agent"))
		o, err := agent.ForMachine(l.Config, m)
		if err != nil {
			return err
		}
		o.Verifier = ticket.NewVerifier(pub, ticket.NewMemoryLedger(0, nil), nil)
		l.verifiers[m.Name] = o.Verifier
		// The lab holds the site CA: it issues each machine the certificate an agent gets by
		// enrolling (agent.Reporter.Enroll) when it runs on a machine of its own.
		cert, err := l.ca.PartyCertificate(siteid.RoleMachine, m.Name, []netip.Addr{o.Address})
		if err != nil {
			return err
		}
		if o.Identity, err = agent.NewIdentity(m.Name, cert, l.ca.Pool()); err != nil {
			return err
		}
		rep.UseIdentity(o.Identity) // the agent API knows the machine by its certificate
		if l.o.Desktop == "xvnc" {
			x, err := xdesk.StartXvnc(context.Background(), xdesk.XvncOptions{Dir: filepath.Join(l.DataDir, "desktops", m.Name), Xterm: true, Logger: l.log})
			if err != nil {
				l.closeDesktops()
				return fmt.Errorf("machine %s: %w", m.Name, err)
			}
			l.Desktops[m.Name] = x
			o.Desktop = agent.Desktop{Protocol: configs.DesktopVNC, Network: x.Network(), Address: x.Address(), Port: o.Desktop.Port}
		}
		o.DisconnectTimeout, o.Report, o.Logger = groups[m.Group].DisconnectTimeout.D(), rep.Event, l.log.With("component", "agent")
		o.RevokeFor, o.Live = l.Config.Site.Tickets.ReconnectTTL.D(), rep.Live
		d, err := agent.NewDisplay(o)
		if err != nil {
			return err
		}
		rep.TellConnected(d.Connected) // the site learns which of its connected sessions this machine carries
		if err := d.Listen(); err != nil {
			for _, open := range l.Displays {
				open.Close()
			}
			return err
		}
		l.Displays[m.Name], l.Reports[m.Name] = d, rep
	}
	return nil
}

// Serve runs the site until ctx ends, then stops everything.
func (l *Lab) Serve(ctx context.Context) error {
	var g errgroup.Group
	// A stop goes in order. The machines' agents stop reporting first, so that none reports
	// to a front door that is gone or holds one's shutdown up with a long poll. The front
	// doors stop next, and the machines once they have: after a drain (Options.Drain), the
	// sessions it let finish ran on them. A machine that fails stops the front doors at
	// once: closed first, a drain finds nothing left to wait for.
	mctx, stopMachines := context.WithCancel(context.Background())
	actx, stopReports := context.WithCancel(context.Background())
	rctx, stopNodes := context.WithCancel(context.Background())
	defer stopNodes()
	if len(l.members) > 0 {
		var nodes errgroup.Group
		for _, m := range l.members {
			nodes.Go(func() error {
				err := l.serveMember(rctx, m)
				if err != nil {
					stopNodes() // a node failed: the site stops, as a machine failing stops it
				}
				return err
			})
		}
		g.Go(func() error {
			defer stopMachines()
			return nodes.Wait()
		})
	} else {
		l.watchProcs(rctx)
		g.Go(func() error {
			defer stopMachines()
			<-rctx.Done()
			l.stopProcs(3 * time.Second)
			return nil
		})
	}
	machine := func(err error) error {
		if err != nil {
			l.closeMembers()
			stopNodes()
		}
		return err
	}
	var reports errgroup.Group
	for name, d := range l.Displays {
		g.Go(func() error { return machine(d.Serve(mctx)) })
		rep := l.Reports[name]
		reports.Go(func() error { return machine(rep.Run(actx, l.o.HeartbeatInterval, simulatedLoad(d))) })
		reports.Go(func() error { return machine(rep.Follow(actx, d)) })
		reports.Go(func() error { return machine(rep.FollowKeys(actx, keyRefresh, l.verifiers[name].SetKeys)) })
	}
	g.Go(func() error {
		select {
		case <-ctx.Done():
		case <-rctx.Done(): // a node or a machine failed
		}
		stopReports()
		err := reports.Wait()
		stopNodes()
		return err
	})
	err := g.Wait()
	l.closeDesktops()
	l.stop()
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// Close stops a lab that is not serving.
func (l *Lab) Close() error {
	for _, d := range l.Displays {
		d.Close()
	}
	l.closeDesktops()
	l.stop()
	return nil
}

// closeDesktops stops the desktop servers the lab started.
func (l *Lab) closeDesktops() {
	for name, x := range l.Desktops {
		x.Close()
		delete(l.Desktops, name)
	}
}

func (l *Lab) cleanup() {
	if l.tmpDir {
		os.RemoveAll(l.DataDir)
		l.tmpDir = false
	}
}

// MovedSite returns the embedded lab site moved from its loopback blocks 127.1-3.x.x to
// 127.first-(first+2).x.x, so that tests and drills do not collide with a running lab; edit,
// when set, changes the moved YAML text before it is loaded (a test adds a proxy section).
func MovedSite(first int, edit func(string) string) (*configs.Config, error) {
	b, err := MovedSource(first, edit)
	if err != nil {
		return nil, err
	}
	return configs.Load(fmt.Sprintf("lab.yaml (moved to 127.%d)", first), b)
}

// MovedSource is the YAML of MovedSite, for a distributed lab's Options.Source.
func MovedSource(first int, edit func(string) string) ([]byte, error) {
	b, err := configs.Shipped("lab.yaml")
	if err != nil {
		return nil, err
	}
	s := strings.NewReplacer("127.1.", fmt.Sprintf("127.%d.", first), "127.2.", fmt.Sprintf("127.%d.", first+1),
		"127.3.", fmt.Sprintf("127.%d.", first+2)).Replace(string(b))
	if edit != nil {
		s = edit(s)
	}
	return []byte(s), nil
}

// simulatedLoad is the load a lab machine reports: its machines share one host, so the host's
// CPU would make every machine look alike; each session costs 10% CPU and 5% memory instead.
func simulatedLoad(d *agent.Display) agent.LoadFunc {
	return func() (int, int, int) {
		n := d.Count()
		return n, min(100, 5+10*n), min(100, 20+5*n)
	}
}

// CAFile is the PEM file of the site CA that clients must trust.
func (l *Lab) CAFile() string { return filepath.Join(l.DataDir, "ca.pem") }

// Describe says what runs where and gives three commands to try.
func (l *Lab) Describe() string {
	var b strings.Builder
	c := l.Config
	fmt.Fprintf(&b, "frontdoor lab: site %q is up (data in %s)\n\n", c.Site.Name, l.DataDir)
	if l.Etcd == nil && len(c.Nodes) == 1 {
		fmt.Fprintf(&b, "a site of one node: its store is bolt in %s\n\n", filepath.Join(l.DataDir, "nodes", c.Nodes[0].Name))
	}
	if l.Etcd != nil {
		fmt.Fprintf(&b, "site database: etcd, %d members: %s (data in %s)\n", len(l.Etcd.Endpoints()), strings.Join(l.Etcd.Endpoints(), ", "), filepath.Join(l.DataDir, "etcd"))
		if len(l.Procs) > 0 {
			fmt.Fprintf(&b, "node processes run `frontdoor serve --config %s --node NAME`; logs in %s\n", l.ConfigFile, filepath.Join(l.DataDir, "nodes"))
		} else {
			fmt.Fprintf(&b, "every node runs in this process\n")
		}
		b.WriteString("\n")
	}
	for _, z := range c.Zones {
		role := "satellite"
		if z.Primary {
			role = "primary"
		}
		fmt.Fprintf(&b, "zone %s (%s, clients from %s)\n", z.Name, role, joinStrings(z.Ranges, ", "))
		for _, n := range c.Nodes {
			if n.Zone != z.Name {
				continue
			}
			if p, ok := l.Proc(n.Name); ok {
				fmt.Fprintf(&b, "  %-9s pid %d\n", n.Name, p.PID)
			}
			for _, li := range n.Listeners {
				switch {
				case li.Kind == "dns":
					fmt.Fprintf(&b, "  %-9s dns    %s (udp, tcp)\n", n.Name, li.Address)
				default:
					fmt.Fprintf(&b, "  %-9s %-6s https://%s\n", n.Name, li.Kind, li.Address)
				}
			}
		}
		var gws, ms []string
		for _, g := range c.Gateways {
			if g.Zone == z.Name {
				gws = append(gws, g.Name+" "+g.Address.String())
			}
		}
		for _, m := range c.Machines {
			if m.Zone == z.Name {
				ms = append(ms, m.Name)
			}
		}
		sort.Strings(ms)
		fmt.Fprintf(&b, "  gateways: %s\n  machines: %s\n", strings.Join(gws, ", "), strings.Join(ms, ", "))
	}
	dns, name := l.firstDNS(), ""
	if len(c.GSLB.Names) > 0 {
		name = strings.TrimSuffix(c.GSLB.Names[0].Name, ".")
	}
	fmt.Fprintf(&b, "\nThe portal, for a desktop in the browser (users alice, bob, carol, dave; password \"lab\"):\n\n")
	fmt.Fprintf(&b, "  %s\n", l.PortalURL())
	fmt.Fprintf(&b, "  its pages and the gateways' WebSockets need the lab's CA trusted by the browser:\n")
	fmt.Fprintf(&b, "  import %s as an authority (Chromium: Settings, Privacy and security, Security,\n", l.CAFile())
	fmt.Fprintf(&b, "  Manage certificates; Debian: certutil -d sql:$HOME/.pki/nssdb -A -t C,, -n frontdoor-lab -i %s)\n", l.CAFile())
	fmt.Fprintf(&b, "\nTry, in another terminal:\n\n")
	fmt.Fprintf(&b, "  go run ./cmd/frontdoor resolve %s --dns %s --client-subnet 127.2.0.0/24\n", name, dns)
	fmt.Fprintf(&b, "  go run ./cmd/frontdoor connect %s --dns %s --ca %s --user alice --password lab --resource desktop --duration 10s\n", name, dns, l.CAFile())
	fmt.Fprintf(&b, "  go run ./cmd/frontdoor connect %s --dns %s --ca %s --user bob --password lab --resource desktop --open\n", name, dns, l.CAFile())
	fmt.Fprintf(&b, "  go run ./cmd/frontdoor explain --config configs/lab.yaml --user carol --resource browser --client-ip 127.3.0.9\n")
	for _, d := range c.GSLB.Domains {
		if d.DNSSEC {
			fmt.Fprintf(&b, "\n%s is signed (DNSSEC). The DS record a validating resolver trusts (README: unbound):\n\n", d.Name)
			fmt.Fprintf(&b, "  go run ./cmd/frontdoor admin dnssec --url %s --ca %s --user admin --password lab\n", l.adminURL(), l.CAFile())
			fmt.Fprintf(&b, "  go run ./cmd/frontdoor resolve %s --dns %s --dnssec\n", name, dns)
			break
		}
	}
	fmt.Fprintf(&b, "\nCtrl-C stops everything.\n")
	return b.String()
}

// PortalURL is the portal on the first launch listener ("" when there is none).
func (l *Lab) PortalURL() string {
	for _, n := range l.Config.Nodes {
		for _, li := range n.Listeners {
			if li.Kind == "launch" {
				return "https://" + li.Address.String() + "/"
			}
		}
	}
	return ""
}

// joinStrings joins the text of each of l with sep.
func joinStrings[T fmt.Stringer](l []T, sep string) string {
	s := make([]string, len(l))
	for i, v := range l {
		s[i] = v.String()
	}
	return strings.Join(s, sep)
}

// adminURL is the first admin listener's URL ("" when there is none).
func (l *Lab) adminURL() string {
	for _, n := range l.Config.Nodes {
		for _, li := range n.Listeners {
			if li.Kind == "admin" {
				return "https://" + li.Address.String()
			}
		}
	}
	return ""
}

func (l *Lab) firstDNS() string {
	for _, n := range l.Config.Nodes {
		for _, li := range n.Listeners {
			if li.Kind == "dns" {
				return li.Address.String()
			}
		}
	}
	return ""
}
