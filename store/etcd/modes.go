package etcd

import (
	"context"
	"fmt"
	"maps"
	"slices"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Settings are the site's settings in etcd, by section: the secure-gateway modes, the admin
// overrides and the others the node keeps there.
type Settings struct{ st *Store }

// Settings returns the store's site settings.
func (st *Store) Settings() Settings { return Settings{st} }

// Sections of the site's shared settings: small maps of names to words that operators set at
// any front door and every node follows.
const (
	// SectionModes holds the secure-gateway switches by delivery group: "on" or "off".
	SectionModes = "modes"
	// SectionOverrides holds the health overrides by gateway: "up", "down" or "drain".
	SectionOverrides = "overrides"
	// SectionRevokedMachines holds, by machine, the Unix milliseconds before which its
	// credentials are revoked.
	SectionRevokedMachines = "revoked-machines"
)

var settingSections = []string{SectionModes, SectionOverrides, SectionRevokedMachines}

// Get returns a section of the shared settings, from the view.
func (h Settings) Get(section string) map[string]string {
	st := h.st
	st.mu.Lock()
	defer st.mu.Unlock()
	return maps.Clone(st.settings[section])
}

// Set writes entries of a section in one transaction; an empty value deletes its
// entry. Every node's followers of the section are told through the watch.
func (h Settings) Set(ctx context.Context, section string, entries map[string]string) error {
	st := h.st
	ctx, cancel := st.opContext(ctx)
	defer cancel()
	if !slices.Contains(settingSections, section) {
		return fmt.Errorf("unknown settings section %q", section)
	}
	if st.outage.Load() {
		return fmt.Errorf("storing %s: %w; settings change once it is back", section, ErrOutage)
	}
	var ops []clientv3.Op
	for name, v := range entries {
		if v == "" {
			ops = append(ops, clientv3.OpDelete(st.key(section, name)))
		} else {
			ops = append(ops, clientv3.OpPut(st.key(section, name), v))
		}
	}
	if _, err := st.cli.Txn(ctx).Then(ops...).Commit(); err != nil {
		return fmt.Errorf("storing %s: %w", section, err)
	}
	return nil
}

// On calls fn with the whole section whenever an entry of it changes, from the
// watch. fn must not block for long.
func (h Settings) On(section string, fn func(map[string]string)) {
	st := h.st
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.onSettings == nil {
		st.onSettings = map[string][]func(map[string]string){}
	}
	st.onSettings[section] = append(st.onSettings[section], fn)
}

// Modes returns the secure-gateway switches set site-wide, by delivery group (groups never
// switched are absent: their configured mode holds). It implements api.ModeStore.
func (h Settings) Modes() map[string]bool {
	return modesOf(h.Get(SectionModes))
}

func modesOf(m map[string]string) map[string]bool {
	out := make(map[string]bool, len(m))
	for g, v := range m {
		out[g] = v == "on"
	}
	return out
}

// SetModes switches the secure gateway of the named groups site-wide, in one transaction.
func (h Settings) SetModes(ctx context.Context, modes map[string]bool) error {
	entries := map[string]string{}
	for g, on := range modes {
		entries[g] = "off"
		if on {
			entries[g] = "on"
		}
	}
	return h.Set(ctx, SectionModes, entries)
}

// OnModes calls fn with every group's stored mode whenever one changes.
func (h Settings) OnModes(fn func(map[string]bool)) {
	h.On(SectionModes, func(m map[string]string) { fn(modesOf(m)) })
}
