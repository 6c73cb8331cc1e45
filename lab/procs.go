package lab

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/frontdoor-vdi/frontdoor/configs"
	"github.com/frontdoor-vdi/frontdoor/node"
	"github.com/frontdoor-vdi/frontdoor/store/etcd"
	"github.com/frontdoor-vdi/frontdoor/store/etcdembed"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Proc is one node of a distributed lab: a `frontdoor serve` process of its own.
type Proc struct {
	// Name is the node's name.
	Name string
	// Zone is the node's zone.
	Zone string
	// PID is the process id.
	PID int
	// Log is the file that holds the process's output.
	Log string
	// Data is the node's data dir.
	Data string

	cmd    *exec.Cmd
	done   chan struct{} // closed when the process has exited
	err    error         // its exit status, once done
	killed bool          // the lab signalled it (guarded by Lab.procMu)
}

// Done is closed when the process has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// siteBlock finds the top-level site: key of a site configuration.
var siteBlock = regexp.MustCompile(`(?m)^site:[ \t]*\n`)

// storeBlock finds a site.store key in a site configuration.
var storeBlock = regexp.MustCompile(`(?m)^  store:`)

// distributedSource returns the site configuration the node processes load: source with a
// site.store block that points at the lab's etcd.
func distributedSource(source []byte, endpoints []string, secretFile string) ([]byte, error) {
	if storeBlock.Match(source) {
		return nil, errors.New("the lab runs its own etcd: remove site.store from the configuration")
	}
	block := fmt.Sprintf("  store:\n    backend: etcd\n    endpoints: [%s]\n    secret_file: %q\n", strings.Join(endpoints, ", "), secretFile)
	loc := siteBlock.FindIndex(source)
	if loc == nil {
		return append([]byte("site:\n"+block), source...), nil
	}
	out := append([]byte{}, source[:loc[1]]...)
	out = append(out, block...)
	return append(out, source[loc[1]:]...), nil
}

// startDistributed starts the lab's etcd cluster, seals the site identity in it and starts
// one `frontdoor serve` process per node, then waits until every node is present.
func (l *Lab) startDistributed(ctx context.Context) error {
	o := l.o
	if len(o.Source) == 0 {
		return errors.New("lab: Processes needs Source, the configuration's YAML")
	}
	bin := o.Binary
	if bin == "" {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("finding the frontdoor binary: %w", err)
		}
		bin = exe
	}
	cfg, err := l.startSite(ctx, 3, false)
	if err != nil {
		return err
	}
	o.Progress(fmt.Sprintf("starting %d node processes", len(cfg.Nodes)))
	for _, n := range cfg.Nodes {
		p := &Proc{Name: n.Name, Zone: n.Zone, Data: filepath.Join(l.DataDir, "nodes", n.Name), done: make(chan struct{})}
		if err := os.MkdirAll(p.Data, 0o700); err != nil {
			return err
		}
		p.Log = p.Data + ".log"
		logf, err := os.OpenFile(p.Log, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
		if err != nil {
			return err
		}
		args := append([]string{"serve", "--config", l.ConfigFile, "--node", n.Name, "--data", p.Data}, rebindArgs(cfg, o.Rebind)...)
		if o.StoreEndpoints != nil {
			for _, e := range o.StoreEndpoints(n, l.Etcd.Endpoints()) {
				args = append(args, "--store-endpoint", e)
			}
		}
		p.cmd = exec.Command(bin, args...)
		p.cmd.Stdout, p.cmd.Stderr = logf, logf
		p.cmd.Env = append(os.Environ(), o.Env...)
		p.cmd.SysProcAttr = procAttr()
		if err := p.cmd.Start(); err != nil {
			logf.Close()
			return fmt.Errorf("starting node %s: %w", n.Name, err)
		}
		p.PID = p.cmd.Process.Pid
		go func() {
			p.err = p.cmd.Wait()
			logf.Close()
			close(p.done)
		}()
		l.Procs = append(l.Procs, p)
	}
	return l.waitPresent(ctx)
}

// startSite starts the lab's etcd cluster (members unless Options.EtcdMembers says; without
// fsync when noFsync), points the site's configuration at it and seals the site identity in
// it. The configuration comes from Options.Source, written to ConfigFile with a site.store
// block for the node processes to load, else from Options.Config. A site of one node runs
// on bolt in its node's data dir instead, as frontdoor serve runs it: no etcd.
func (l *Lab) startSite(ctx context.Context, members int, noFsync bool) (*configs.Config, error) {
	o := l.o
	if one, err := l.oneNode(ctx); one != nil || err != nil {
		return one, err
	}
	if o.EtcdMembers != 0 {
		members = o.EtcdMembers
	}
	o.Progress(fmt.Sprintf("etcd: starting %d members", members))
	c, err := etcdembed.Start(ctx, etcdembed.Options{Dir: filepath.Join(l.DataDir, "etcd"), Members: members,
		UnsafeNoFsync: noFsync, Logger: l.log.With("component", "etcd")})
	if err != nil {
		return nil, err
	}
	l.Etcd = c
	secretFile := filepath.Join(l.DataDir, "store.secret")
	if err := os.WriteFile(secretFile, []byte(etcd.NewSecret()+"\n"), 0o600); err != nil {
		return nil, fmt.Errorf("writing the store secret: %w", err)
	}
	var cfg *configs.Config
	if len(o.Source) > 0 {
		src, err := distributedSource(o.Source, c.Endpoints(), secretFile)
		if err != nil {
			return nil, err
		}
		l.ConfigFile = filepath.Join(l.DataDir, "site.yaml")
		if err := os.WriteFile(l.ConfigFile, src, 0o600); err != nil {
			return nil, fmt.Errorf("writing the site configuration: %w", err)
		}
		if cfg, err = configs.Load(l.ConfigFile, src); err != nil {
			return nil, err
		}
	} else {
		if o.Config.Site.Store.Backend == "etcd" {
			return nil, errors.New("the lab runs its own etcd: remove site.store from the configuration")
		}
		cp := *o.Config
		cp.Site.Store.Backend, cp.Site.Store.Endpoints, cp.Site.Store.SecretFile = "etcd", c.Endpoints(), secretFile
		cfg = &cp
	}
	l.Config = cfg
	st, err := etcd.Open(ctx, etcd.Options{Endpoints: c.Endpoints(), Prefix: cfg.Site.Store.Prefix, Node: "lab", Logger: l.log.With("component", "store")})
	if err != nil {
		return nil, err
	}
	l.site = st
	if l.siteDB, err = clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()}); err != nil {
		return nil, err
	}
	o.Progress("site identity: sealed in etcd")
	key, ca, err := node.LoadIdentity(ctx, cfg, st, l.DataDir, l.log)
	if err != nil {
		return nil, err
	}
	l.setIdentity(key, ca)
	return cfg, nil
}

// oneNode prepares a site of one node, which runs on bolt in the node's data dir: it writes
// ConfigFile (from Source) and creates the site identity there; nil for a site of several.
func (l *Lab) oneNode(ctx context.Context) (*configs.Config, error) {
	o := l.o
	cfg := o.Config
	if len(o.Source) > 0 {
		if storeBlock.Match(o.Source) {
			return nil, errors.New("the lab runs the site's store: remove site.store from the configuration")
		}
		c, err := configs.Load("site.yaml", o.Source)
		if err != nil {
			return nil, err
		}
		cfg = c
	}
	if len(cfg.Nodes) != 1 {
		return nil, nil
	}
	if cfg.Site.Store.Backend == "etcd" {
		return nil, errors.New("the lab runs the site's store: remove site.store from the configuration")
	}
	if len(o.Source) > 0 {
		l.ConfigFile = filepath.Join(l.DataDir, "site.yaml")
		if err := os.WriteFile(l.ConfigFile, o.Source, 0o600); err != nil {
			return nil, fmt.Errorf("writing the site configuration: %w", err)
		}
	}
	l.Config = cfg
	o.Progress("a site of one node: bolt in its data dir, no etcd")
	dir := filepath.Join(l.DataDir, "nodes", cfg.Nodes[0].Name)
	key, ca, err := node.LoadIdentity(ctx, cfg, nil, dir, l.log)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(l.CAFile(), ca.CertPEM(), 0o644); err != nil {
		return nil, fmt.Errorf("writing the CA certificate: %w", err)
	}
	l.setIdentity(key, ca)
	return cfg, nil
}

// rebindArgs returns the --rebind PUBLIC=INNER flags of a node process: one for each address
// of cfg's listeners and gateways that rebind changes.
func rebindArgs(cfg *configs.Config, rebind func(netip.Addr) netip.Addr) []string {
	if rebind == nil {
		return nil
	}
	seen := map[netip.Addr]bool{}
	var args []string
	add := func(a netip.Addr) {
		if !a.IsValid() || seen[a] {
			return
		}
		seen[a] = true
		if b := rebind(a); b != a {
			args = append(args, "--rebind", a.String()+"="+b.String())
		}
	}
	for _, n := range cfg.Nodes {
		for _, li := range n.Listeners {
			add(li.Address.Addr())
		}
	}
	for _, g := range cfg.Gateways {
		add(g.Address)
		for _, a := range g.PublicAddresses {
			add(a)
		}
	}
	for _, li := range cfg.Proxy.Listeners {
		add(li.Address.Addr())
	}
	return args
}

// waitPresent waits until every node process has announced itself in etcd (its sockets are
// open), bounded by StartTimeout; a process that exits first fails the start with its log.
func (l *Lab) waitPresent(ctx context.Context) error {
	timeout := l.o.StartTimeout
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	reported := map[string]bool{}
	for {
		var present map[string]etcd.NodeInfo
		if l.site != nil {
			present = l.site.Presence().Nodes()
		} else {
			present = l.listening()
		}
		all := true
		for _, p := range l.Procs {
			select {
			case <-p.done:
				return fmt.Errorf("node %s exited while starting (%v):\n%s", p.Name, p.err, tail(p.Log, 20))
			default:
			}
			if n, ok := present[p.Name]; ok && n.PID == p.PID {
				if !reported[p.Name] {
					reported[p.Name] = true
					l.o.Progress(fmt.Sprintf("node %s up (pid %d)", p.Name, p.PID))
				}
			} else {
				all = false
			}
		}
		if all {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			var missing []string
			for _, p := range l.Procs {
				if !reported[p.Name] {
					missing = append(missing, p.Name+" (log "+p.Log+")")
				}
			}
			return fmt.Errorf("nodes not up after %s: %s", timeout, strings.Join(missing, ", "))
		case <-tick.C:
		}
	}
}

// listening returns the node processes whose HTTPS listeners accept connections: how a site
// of one node, which has no site database to be present in, is seen up.
func (l *Lab) listening() map[string]etcd.NodeInfo {
	out := map[string]etcd.NodeInfo{}
	for _, p := range l.Procs {
		n, err := node.Pick(l.Config, p.Name)
		if err != nil {
			continue
		}
		up := true
		for _, li := range n.Listeners {
			ap := li.Address
			if li.Kind != "launch" && li.Kind != "admin" {
				continue
			}
			if l.o.Rebind != nil {
				ap = netip.AddrPortFrom(l.o.Rebind(ap.Addr()), ap.Port())
			}
			c, err := net.DialTimeout("tcp", ap.String(), 200*time.Millisecond)
			if err != nil {
				up = false
				break
			}
			c.Close()
		}
		if up {
			out[p.Name] = etcd.NodeInfo{Name: p.Name, Zone: p.Zone, PID: p.PID}
		}
	}
	return out
}

// tail returns the last n lines of a file.
func tail(path string, n int) string {
	b, _ := os.ReadFile(path)
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// Proc returns the node process of a distributed lab by name.
func (l *Lab) Proc(name string) (*Proc, bool) {
	for _, p := range l.Procs {
		if p.Name == name {
			return p, true
		}
	}
	return nil, false
}

// Signal sends sig to a node's process: SIGKILL is its power off, SIGTERM its shutdown. The
// lab does not report the exit as a failure. A node run in this process is stopped as its
// process would be (see signalMember).
func (l *Lab) Signal(name string, sig syscall.Signal) error {
	if len(l.members) > 0 {
		return l.signalMember(name, sig)
	}
	p, ok := l.Proc(name)
	if !ok {
		return fmt.Errorf("no node process %q", name)
	}
	l.procMu.Lock()
	p.killed = true
	l.procMu.Unlock()
	return p.cmd.Process.Signal(sig)
}

// stopProcs stops every node process: SIGTERM (the node drains), a second SIGTERM after
// grace (stop at once), SIGKILL when one is still running after another 5 s.
func (l *Lab) stopProcs(grace time.Duration) {
	var wg sync.WaitGroup
	for _, p := range l.Procs {
		l.procMu.Lock()
		p.killed = true
		l.procMu.Unlock()
		wg.Go(func() {
			p.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-p.done:
				return
			case <-time.After(grace):
			}
			p.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-p.done:
				return
			case <-time.After(5 * time.Second):
			}
			p.cmd.Process.Kill()
			<-p.done
		})
	}
	wg.Wait()
}

// watchProcs reports node processes that exit by themselves until ctx ends.
func (l *Lab) watchProcs(ctx context.Context) {
	for _, p := range l.Procs {
		go func() {
			select {
			case <-ctx.Done():
			case <-p.done:
				l.procMu.Lock()
				killed := p.killed
				l.procMu.Unlock()
				if !killed {
					l.log.Error("node process exited", "node", p.Name, "pid", p.PID, "err", p.err, "log", p.Log)
					l.o.Progress(fmt.Sprintf("node %s (pid %d) exited: %v; its log: %s", p.Name, p.PID, p.err, p.Log))
				}
			}
		}()
	}
}
