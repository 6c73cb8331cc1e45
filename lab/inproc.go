package lab

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/frontdoor-vdi/frontdoor/node"
	"github.com/prometheus/client_golang/prometheus"
)

// member is one node of a lab that runs every node in this process: a node.Node of its
// own, over the lab's etcd like a node process, stopped through its context or Close.
type member struct {
	name string
	n    *node.Node

	mu     sync.Mutex         // guards cancel and closed
	cancel context.CancelFunc // ends the node's Serve: its SIGTERM; nil until it serves
	closed bool               // the node was stopped: Close ran or Serve returned
	killed bool               // the lab stopped it on purpose (Signal)
	done   chan struct{}      // closed when Serve has returned
	err    error              // Serve's error, once done
}

// startInProcess starts a one-member etcd (no fsync: the lab's throwaway data) as the site
// database, seals the site identity in it and builds and opens every node of the site in
// this process, each its own node.Node with its own data dir, as `frontdoor serve` would.
func (l *Lab) startInProcess(ctx context.Context) error {
	o := l.o
	cfg, err := l.startSite(ctx, 1, true)
	if err != nil {
		return err
	}
	for _, nc := range cfg.Nodes {
		o.Progress("node " + nc.Name)
		n, err := node.New(ctx, node.Options{Config: cfg, Node: nc.Name, DataDir: filepath.Join(l.DataDir, "nodes", nc.Name),
			Logger: o.Logger.With("node", nc.Name), Registry: prometheus.NewRegistry(), Rebind: o.Rebind,
			Procs: o.Procs, Drain: o.Drain})
		if err != nil {
			return fmt.Errorf("node %s: %w", nc.Name, err)
		}
		m := &member{name: nc.Name, n: n, done: make(chan struct{})}
		l.members = append(l.members, m)
		if err := n.Listen(); err != nil {
			m.closed = true
			return fmt.Errorf("node %s: %w", nc.Name, err)
		}
	}
	o.Progress(fmt.Sprintf("%d nodes listening", len(l.members)))
	return nil
}

// WaitReady waits, while Serve runs, until every node's launch API says it takes launches
// (GET /v1/ready: its first probes have decided every gateway), bounded by StartTimeout.
func (l *Lab) WaitReady(ctx context.Context) error {
	timeout := l.o.StartTimeout
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for _, n := range l.Config.Nodes {
		for _, li := range n.Listeners {
			if li.Kind != "launch" {
				continue
			}
			ap := li.Address
			inner := ap
			if l.o.Rebind != nil {
				inner = netip.AddrPortFrom(l.o.Rebind(ap.Addr()), ap.Port())
			}
			tc := l.TLSClientConfig()
			tc.ServerName = ap.Addr().String()
			hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: tc, DisableKeepAlives: true}}
			for {
				resp, err := hc.Get("https://" + inner.String() + "/v1/ready")
				if err == nil {
					resp.Body.Close()
					if resp.StatusCode == http.StatusOK {
						break
					}
				}
				select {
				case <-ctx.Done():
					return fmt.Errorf("node %s not ready after %s: %v", n.Name, timeout, err)
				case <-time.After(50 * time.Millisecond):
				}
			}
			l.o.Progress("node " + n.Name + " ready")
		}
	}
	return nil
}

// serveMember runs m until ctx ends or the lab signals it; its error is kept in m.err.
func (l *Lab) serveMember(ctx context.Context, m *member) error {
	ctx, cancel := context.WithCancel(ctx)
	m.mu.Lock()
	if m.closed || m.killed {
		// Closed, or signalled before it served: it does not start.
		m.mu.Unlock()
		cancel()
		m.n.Close()
		close(m.done)
		return nil
	}
	m.cancel = cancel
	m.mu.Unlock()
	err := m.n.Serve(ctx)
	cancel()
	m.mu.Lock()
	m.closed, m.err = true, err
	killed := m.killed
	m.mu.Unlock()
	close(m.done)
	if killed {
		return nil // stopped on purpose: not the lab's failure
	}
	return err
}

// signalMember stops a node of this process as the signal would stop its process: SIGTERM
// ends its Serve (draining when Options.Drain is set), SIGKILL closes every socket at once.
func (l *Lab) signalMember(name string, sig syscall.Signal) error {
	for _, m := range l.members {
		if m.name != name {
			continue
		}
		m.mu.Lock()
		m.killed = true
		cancel := m.cancel
		m.mu.Unlock()
		switch sig {
		case syscall.SIGTERM, syscall.SIGINT:
			if cancel != nil {
				cancel()
			}
		case syscall.SIGKILL:
			m.n.Close()
		default:
			return fmt.Errorf("node %s runs in this process: only SIGTERM, SIGINT and SIGKILL stop it", name)
		}
		return nil
	}
	return fmt.Errorf("no node %q", name)
}

// closeMembers closes every node of this process.
func (l *Lab) closeMembers() {
	for _, m := range l.members {
		m.mu.Lock()
		m.closed = true
		m.mu.Unlock()
		m.n.Close()
	}
}
