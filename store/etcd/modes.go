package etcd

import (
	"context"
	"fmt"
	"maps"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Modes returns the secure-gateway switches set site-wide, by delivery group (groups never
// switched are absent: their configured mode holds).
func (st *Store) Modes() map[string]bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.modesLocked()
}

func (st *Store) modesLocked() map[string]bool { return maps.Clone(st.modes) }

// SetModes switches the secure gateway of the named groups site-wide, in one transaction;
// every node's followers of modes are told.
func (st *Store) SetModes(ctx context.Context, modes map[string]bool) error {
	var ops []clientv3.Op
	for g, on := range modes {
		v := "off"
		if on {
			v = "on"
		}
		ops = append(ops, clientv3.OpPut(st.key("modes", g), v))
	}
	if _, err := st.cli.Txn(ctx).Then(ops...).Commit(); err != nil {
		return fmt.Errorf("storing secure-gateway modes: %w", err)
	}
	return nil
}

// OnModes calls fn with every group's stored mode whenever one changes, from the watch. fn
// must not block or call the store.
func (st *Store) OnModes(fn func(map[string]bool)) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.onModes = append(st.onModes, fn)
}
