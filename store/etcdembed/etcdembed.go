// Package etcdembed runs an embedded etcd cluster of one or more members on loopback, each
// member with its own data dir and its own client and peer ports: the site database of
// `frontdoor lab` and of the tests.
//
// The members are real etcd servers (go.etcd.io/etcd/server/v3/embed) in this process,
// speaking plain HTTP/gRPC without TLS or authentication; that is why they only bind a
// loopback address. etcd's own logs go to the given slog.Logger, errors only unless
// Options.Debug is set.
//
// Importing this package links the etcd server, which registers its etcd_* metrics in the
// Prometheus default registry at init time; every member also serves /metrics and /health
// on its client port.
package etcdembed

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

// clusterToken is the initial cluster token of every cluster this package creates. It only
// has to differ between clusters whose members could reach each other, and these bind
// loopback ports of one process.
const clusterToken = "frontdoor-etcdembed"

// Options configures Start.
type Options struct {
	// Dir is the parent data dir; member i keeps its data in Dir/member-i. Required.
	// Reopening a Dir that holds a cluster of several members needs the same PeerPorts as
	// the first start, since the members find each other by the peer URLs they stored.
	Dir string
	// Members is the number of members. Default 1.
	Members int
	// Host is the loopback IP the members bind. Default "127.0.0.1".
	Host string
	// ClientPorts are fixed client ports, one per member. Default: free ports picked at start.
	ClientPorts []int
	// PeerPorts are fixed peer ports, one per member. Default: free ports picked at start.
	PeerPorts []int
	// StartTimeout bounds Start and RestartMember. Default 15s.
	StartTimeout time.Duration
	// Logger receives this package's messages and etcd's own logs (attribute
	// component=etcd). Default slog.Default().
	Logger *slog.Logger
	// Debug passes etcd's logs of every level to Logger (which filters them further).
	// Without it only etcd's errors are passed.
	Debug bool
	// UnsafeNoFsync disables fsync in etcd: a crash loses data. For benchmarks only.
	UnsafeNoFsync bool
}

// Cluster is a running embedded etcd cluster, started by Start. Its methods may be called
// from several goroutines.
type Cluster struct {
	opts           Options // normalized
	log            *slog.Logger
	initialCluster string
	members        []*member
}

// member is one etcd member. mu guards etcd and serializes stop and restart.
type member struct {
	name      string
	dir       string
	clientURL url.URL
	peerURL   url.URL

	mu   sync.Mutex
	etcd *embed.Etcd // nil while stopped
	// stopping is set while etcd is being stopped: its serving loops then log their ends
	// as errors, which zapLogger demotes to debug.
	stopping atomic.Bool
}

// Start starts an embedded etcd cluster as o describes: all members at once, then it waits
// until every member is ready and they agree on a leader, bounded by ctx and o.StartTimeout.
// On error everything started is stopped again.
func Start(ctx context.Context, o Options) (*Cluster, error) {
	o, err := normalize(o)
	if err != nil {
		return nil, err
	}
	c := &Cluster{opts: o, log: o.Logger}
	if err := os.MkdirAll(o.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("etcdembed: create data dir: %w", err)
	}

	clientPorts, peerPorts := o.ClientPorts, o.PeerPorts
	if clientPorts == nil || peerPorts == nil {
		free, err := freePorts(o.Host, 2*o.Members)
		if err != nil {
			return nil, err
		}
		if clientPorts == nil {
			clientPorts = free[:o.Members]
		}
		if peerPorts == nil {
			peerPorts = free[o.Members:]
		}
	}

	peers := make([]string, o.Members)
	for i := range o.Members {
		m := &member{
			name:      memberName(i),
			dir:       filepath.Join(o.Dir, memberName(i)),
			clientURL: url.URL{Scheme: "http", Host: net.JoinHostPort(o.Host, strconv.Itoa(clientPorts[i]))},
			peerURL:   url.URL{Scheme: "http", Host: net.JoinHostPort(o.Host, strconv.Itoa(peerPorts[i]))},
		}
		if o.Members > 1 && o.PeerPorts == nil && hasData(m.dir) {
			return nil, fmt.Errorf("etcdembed: %s already holds member data: reopening a cluster of %d members needs its PeerPorts", m.dir, o.Members)
		}
		c.members = append(c.members, m)
		peers[i] = m.name + "=" + m.peerURL.String()
	}
	c.initialCluster = strings.Join(peers, ",")

	began := time.Now()
	ctx, cancel := context.WithTimeout(ctx, o.StartTimeout)
	defer cancel()

	// A member of several only becomes ready once a quorum runs, so start them all
	// before waiting on any.
	errs := make([]error, len(c.members))
	var wg sync.WaitGroup
	for i, m := range c.members {
		wg.Go(func() { errs[i] = c.startMember(m) })
	}
	wg.Wait()
	err = errors.Join(errs...)
	if err == nil {
		err = c.waitReady(ctx, c.members)
	}
	if err != nil {
		err = fmt.Errorf("etcdembed: start: %w", err)
		if cerr := c.Close(); cerr != nil {
			err = errors.Join(err, cerr)
		}
		return nil, err
	}
	c.log.Info("etcd cluster started", "members", o.Members, "endpoints", c.Endpoints(),
		"dir", o.Dir, "took", time.Since(began).Round(time.Millisecond))
	return c, nil
}

// Endpoints returns the client URLs of the members, "http://127.0.0.1:PORT", in member
// order; stopped members included.
func (c *Cluster) Endpoints() []string {
	eps := make([]string, len(c.members))
	for i, m := range c.members {
		eps[i] = m.clientURL.String()
	}
	return eps
}

// Member returns the name of member i, "member-i", or "" if there is no member i.
func (c *Cluster) Member(i int) string {
	if i < 0 || i >= len(c.members) {
		return ""
	}
	return c.members[i].name
}

// StopMember stops member i, as a drill's killed member; the others keep serving as long as
// they are a quorum. Its data dir and ports stay reserved for RestartMember. Stopping a
// stopped member is an error. The stop is etcd's graceful one: a leader hands its
// leadership over first. An error from a running member's serving loops is returned too,
// and the member is stopped even then.
func (c *Cluster) StopMember(i int) error {
	m, err := c.member(i)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.etcd == nil {
		return fmt.Errorf("etcdembed: stop %s: already stopped", m.name)
	}
	err = m.close()
	if err != nil {
		return fmt.Errorf("etcdembed: stop %s: %w", m.name, err)
	}
	c.log.Info("etcd member stopped", "member", m.name)
	return nil
}

// RestartMember starts the stopped member i again on its data dir and ports, and waits until
// it is ready and knows the leader, bounded by ctx and Options.StartTimeout. It only gets
// ready if, with it, a quorum of members runs. On error it is left stopped.
func (c *Cluster) RestartMember(ctx context.Context, i int) error {
	m, err := c.member(i)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.etcd != nil {
		return fmt.Errorf("etcdembed: restart %s: still running", m.name)
	}
	began := time.Now()
	ctx, cancel := context.WithTimeout(ctx, c.opts.StartTimeout)
	defer cancel()
	m.etcd, err = c.newEtcd(m)
	if err == nil {
		if err = waitMember(ctx, m.name, m.etcd); err != nil {
			err = errors.Join(err, m.close())
		}
	}
	if err != nil {
		m.etcd = nil
		return fmt.Errorf("etcdembed: restart %s: %w", m.name, err)
	}
	c.log.Info("etcd member restarted", "member", m.name, "took", time.Since(began).Round(time.Millisecond))
	return nil
}

// Close stops every running member and returns the errors their serving loops reported
// while running, if any. The data dirs stay; closing again does nothing.
//
// The followers stop first, all at once, then the leader: a leader stopping among
// running followers hands its leadership to one of them first, and waits up to 7s if
// that one is stopping too.
func (c *Cluster) Close() error {
	var followers, leaders []*member
	for _, m := range c.members {
		m.mu.Lock()
		if e := m.etcd; e != nil && e.Server.Leader() == e.Server.MemberID() {
			leaders = append(leaders, m)
		} else {
			followers = append(followers, m)
		}
		m.mu.Unlock()
	}
	return errors.Join(closeAll(followers), closeAll(leaders))
}

// closeAll stops the running ones of ms at once.
func closeAll(ms []*member) error {
	errs := make([]error, len(ms))
	var wg sync.WaitGroup
	for i, m := range ms {
		wg.Go(func() {
			m.mu.Lock()
			defer m.mu.Unlock()
			if m.etcd == nil {
				return
			}
			if err := m.close(); err != nil {
				errs[i] = fmt.Errorf("etcdembed: stop %s: %w", m.name, err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

func normalize(o Options) (Options, error) {
	if o.Dir == "" {
		return o, errors.New("etcdembed: no data dir")
	}
	if o.Members == 0 {
		o.Members = 1
	}
	if o.Members < 0 {
		return o, fmt.Errorf("etcdembed: %d members", o.Members)
	}
	if o.Host == "" {
		o.Host = "127.0.0.1"
	}
	if ip := net.ParseIP(o.Host); ip == nil || !ip.IsLoopback() {
		return o, fmt.Errorf("etcdembed: host %q is not a loopback IP", o.Host)
	}
	for _, ports := range []struct {
		what string
		p    []int
	}{{"client", o.ClientPorts}, {"peer", o.PeerPorts}} {
		if ports.p == nil {
			continue
		}
		if len(ports.p) != o.Members {
			return o, fmt.Errorf("etcdembed: %d %s ports for %d members", len(ports.p), ports.what, o.Members)
		}
		for _, p := range ports.p {
			if p <= 0 || p > 65535 {
				return o, fmt.Errorf("etcdembed: %s port %d out of range", ports.what, p)
			}
		}
	}
	all := append(slices.Clone(o.ClientPorts), o.PeerPorts...)
	slices.Sort(all)
	if len(slices.Compact(all)) != len(o.ClientPorts)+len(o.PeerPorts) {
		return o, errors.New("etcdembed: a port is given twice")
	}
	if o.StartTimeout == 0 {
		o.StartTimeout = 15 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o, nil
}

// freePorts returns n distinct ports that were free on host a moment ago: all are held
// open until each is picked, then released for etcd to bind.
func freePorts(host string, n int) ([]int, error) {
	ports := make([]int, 0, n)
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			return nil, fmt.Errorf("etcdembed: pick a free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func memberName(i int) string { return "member-" + strconv.Itoa(i) }

// hasData reports whether the member data dir dir holds an etcd write-ahead log.
func hasData(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, "member", "wal"))
	return err == nil
}
