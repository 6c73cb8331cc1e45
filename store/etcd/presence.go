package etcd

// Presence: the nodes/ family, the node's own lease and its keep-alive, and what Register
// writes on it.

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"sync/atomic"
	"time"

	"github.com/frontdoor-vdi/frontdoor/broker"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Presence is who is in the site: the nodes registered on their leases, the machines'
// registrations, and the state of etcd's members.
type Presence struct{ st *Store }

// Presence returns the store's presence.
func (st *Store) Presence() Presence { return Presence{st} }

// ownLease is the node's lease, which its presence and its agents' loads live on, and what
// Register wrote, written again on a new lease.
type ownLease struct {
	lease    atomic.Int64        // a clientv3.LeaseID, replaced when lost
	kaDone   chan struct{}       // closed when keepAlive has ended
	presence map[string]NodeInfo // guarded by Store.mu
}

// NodeInfo is the presence of a running node.
type NodeInfo struct {
	// Name is the node's name.
	Name string `json:"name"`
	// Zone is the node's zone.
	Zone string `json:"zone"`
	// Version is the node's software version.
	Version string `json:"version"`
	// Started is when the node started.
	Started time.Time `json:"started"`
	// PID is the node's process id.
	PID int `json:"pid"`
}

func (st *Store) nodeLease() clientv3.LeaseID { return clientv3.LeaseID(st.lease.Load()) }

// keepAlive keeps the node's lease alive until ctx ends. A lease that is lost (etcd was out of
// reach longer than NodeTTL) is replaced by a new one, granted as soon as etcd answers, and the
// node's presence is written again on it; the agents' load follows at their next report.
func (st *Store) keepAlive(ctx context.Context, ka <-chan *clientv3.LeaseKeepAliveResponse) {
	defer close(st.kaDone)
	for {
		for range ka { // drained until ctx ends or the lease is lost
		}
		if ctx.Err() != nil {
			return
		}
		st.log.Error("etcd: the node lease ended; the node's presence and its agents' load are gone from the site until a new lease is granted")
		for {
			gctx, cancel := context.WithTimeout(ctx, st.o.DialTimeout)
			g, err := st.cli.Grant(gctx, int64(st.o.NodeTTL/time.Second))
			cancel()
			if err == nil {
				if ka, err = st.cli.KeepAlive(ctx, g.ID); err == nil {
					st.lease.Store(int64(g.ID))
					break
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
		}
		st.mu.Lock()
		presence := maps.Clone(st.presence)
		st.mu.Unlock()
		for _, n := range presence {
			rctx, cancel := context.WithTimeout(ctx, st.o.DialTimeout)
			err := st.Presence().Register(rctx, n)
			cancel()
			if err != nil {
				st.log.Warn("etcd: registering the node again", "node", n.Name, "err", err)
			}
		}
		st.log.Info("etcd: the node has a new lease; its presence is back")
	}
}

// applyNode applies nodes/<name>.
func (st *Store) applyNode(parts []string, x kv, deleted bool) broker.Change {
	if deleted {
		delete(st.nodes, parts[1])
	} else {
		var n NodeInfo
		if json.Unmarshal(x.value, &n) == nil {
			st.nodes[parts[1]] = n
		}
	}
	return broker.Change{}
}

// Register writes the node's presence on its lease; it goes when the node stops or dies.
//
// In outage mode it is written once etcd is back (with the node's new lease).
func (h Presence) Register(ctx context.Context, n NodeInfo) error {
	st := h.st
	if st.outage.Load() {
		st.mu.Lock()
		st.presence[n.Name] = n
		st.mu.Unlock()
		return nil
	}
	ctx, cancel := st.opContext(ctx)
	defer cancel()
	b, _ := json.Marshal(n)
	if _, err := st.cli.Put(ctx, st.key("nodes", n.Name), string(b), clientv3.WithLease(st.nodeLease())); err != nil {
		return fmt.Errorf("registering node %s: %w", n.Name, err)
	}
	st.mu.Lock()
	st.presence[n.Name] = n
	st.mu.Unlock()
	return nil
}

// Nodes returns the presence of every running node, from the view.
func (h Presence) Nodes() map[string]NodeInfo {
	st := h.st
	st.mu.Lock()
	defer st.mu.Unlock()
	out := make(map[string]NodeInfo, len(st.nodes))
	for k, v := range st.nodes {
		out[k] = v
	}
	return out
}
