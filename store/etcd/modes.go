package etcd

import (
	"context"
	"fmt"
	"maps"

	"github.com/frontdoor-vdi/frontdoor/store/settings"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Settings are the site's settings in etcd, by section (package settings: the secure-gateway
// modes, the admin overrides, the machines' revocations), followed through the watch.
type Settings struct{ st *Store }

var _ settings.Settings = Settings{}

// Settings returns the store's site settings.
func (st *Store) Settings() Settings { return Settings{st} }

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
	if !settings.Known(section) {
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
	return settings.ModesOf(h.Get(settings.SectionModes))
}

// SetModes switches the secure gateway of the named groups site-wide, in one transaction.
func (h Settings) SetModes(ctx context.Context, modes map[string]bool) error {
	return h.Set(ctx, settings.SectionModes, settings.ModeEntries(modes))
}

// OnModes calls fn with every group's stored mode whenever one changes.
func (h Settings) OnModes(fn func(map[string]bool)) {
	h.On(settings.SectionModes, func(m map[string]string) { fn(settings.ModesOf(m)) })
}
