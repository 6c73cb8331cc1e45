// Package settings holds what operators switch at run time and every front door of a site
// follows: small maps of names to words, by section — the secure-gateway modes, the health
// overrides, the machines' revocations. A site of several nodes keeps them in etcd
// (store/etcd's Settings, followed through its watch); a site of one node keeps them in its
// bolt file, and a store in memory in memory: both a Local, over a Backend. This package is
// the one home of the sections and of how a mode is written; settingstest is the suite that
// every implementation passes.
package settings

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
)

// Sections of the settings.
const (
	// SectionModes holds the secure-gateway switches by delivery group: "on" or "off".
	SectionModes = "modes"
	// SectionOverrides holds the health overrides by gateway: "up", "down" or "drain".
	SectionOverrides = "overrides"
	// SectionRevokedMachines holds, by machine, the Unix milliseconds before which its
	// credentials are revoked.
	SectionRevokedMachines = "revoked-machines"
)

// Sections returns the names of every section.
func Sections() []string {
	return []string{SectionModes, SectionOverrides, SectionRevokedMachines}
}

// Known reports whether section is one of Sections.
func Known(section string) bool { return slices.Contains(Sections(), section) }

// ModesOf reads the modes section: every group switched, on or off (groups never switched are
// absent: their configured mode holds).
func ModesOf(m map[string]string) map[string]bool {
	out := make(map[string]bool, len(m))
	for g, v := range m {
		out[g] = v == "on"
	}
	return out
}

// ModeEntries writes modes as entries of the modes section.
func ModeEntries(modes map[string]bool) map[string]string {
	entries := make(map[string]string, len(modes))
	for g, on := range modes {
		entries[g] = "off"
		if on {
			entries[g] = "on"
		}
	}
	return entries
}

// Settings is what every keeper of the settings offers (Local, store/etcd's Settings), and
// what settingstest checks.
type Settings interface {
	// Get returns a section.
	Get(section string) map[string]string
	// Set writes entries of a section; an empty value deletes its entry.
	Set(ctx context.Context, section string, entries map[string]string) error
	// On calls fn with the whole section after each change of it, whoever made it.
	On(section string, fn func(map[string]string))
	// Modes returns the secure-gateway switches, by delivery group.
	Modes() map[string]bool
	// SetModes switches the secure gateway of the named groups.
	SetModes(ctx context.Context, modes map[string]bool) error
	// OnModes calls fn with every group's stored mode whenever one changes.
	OnModes(fn func(map[string]bool))
}

var _ Settings = (*Local)(nil)

// Backend keeps a Local's sections.
type Backend interface {
	// Load returns every section stored, by section and name.
	Load() (map[string]map[string]string, error)
	// Store writes entries of one section at once; an empty value deletes its entry.
	Store(section string, entries map[string]string) error
}

// Local is the settings of a site of one process: a view in memory, written through to a
// Backend first. A change is told to the section's followers (On) from a goroutine of its
// own, as etcd's watch tells them, so that a follower may take locks its writer holds; the
// followers of changes made one after the other are told in that order, each time with
// the section as it is then.
type Local struct {
	backend Backend // nil: memory only

	mu       sync.Mutex                           // guards sections and on
	sections map[string]map[string]string         // by section
	on       map[string][]func(map[string]string) // followers, by section

	tellMu  sync.Mutex     // one change told at a time
	telling sync.WaitGroup // changes being told
}

// NewLocal returns the settings kept in b (nil: in memory, nothing kept), with what b holds.
func NewLocal(b Backend) (*Local, error) {
	l := &Local{backend: b, sections: map[string]map[string]string{}, on: map[string][]func(map[string]string){}}
	if b == nil {
		return l, nil
	}
	stored, err := b.Load()
	if err != nil {
		return nil, fmt.Errorf("loading settings: %w", err)
	}
	for sec, m := range stored {
		if Known(sec) {
			l.sections[sec] = maps.Clone(m)
		}
	}
	return l, nil
}

// Get returns a section.
func (l *Local) Get(section string) map[string]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.sections[section])
}

// Set writes entries of a section, kept by the backend before it returns; an empty value
// deletes its entry. The section's followers are told after.
func (l *Local) Set(_ context.Context, section string, entries map[string]string) error {
	if !Known(section) {
		return fmt.Errorf("unknown settings section %q", section)
	}
	l.mu.Lock()
	if l.backend != nil {
		if err := l.backend.Store(section, entries); err != nil {
			l.mu.Unlock()
			return fmt.Errorf("storing %s: %w", section, err)
		}
	}
	m := l.sections[section]
	if m == nil {
		m = map[string]string{}
		l.sections[section] = m
	}
	for name, v := range entries {
		if v == "" {
			delete(m, name)
		} else {
			m[name] = v
		}
	}
	l.telling.Add(1)
	l.mu.Unlock()
	go l.tell(section)
	return nil
}

// tell calls the followers of section with the section as it is now.
func (l *Local) tell(section string) {
	defer l.telling.Done()
	l.tellMu.Lock()
	defer l.tellMu.Unlock()
	l.mu.Lock()
	m, fns := maps.Clone(l.sections[section]), slices.Clone(l.on[section])
	l.mu.Unlock()
	for _, fn := range fns {
		fn(m)
	}
}

// On calls fn with the whole section after each change of it. fn must not block for long.
func (l *Local) On(section string, fn func(map[string]string)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.on[section] = append(l.on[section], fn)
}

// Modes returns the secure-gateway switches, by delivery group. It implements api.ModeStore.
func (l *Local) Modes() map[string]bool { return ModesOf(l.Get(SectionModes)) }

// SetModes switches the secure gateway of the named groups.
func (l *Local) SetModes(ctx context.Context, modes map[string]bool) error {
	return l.Set(ctx, SectionModes, ModeEntries(modes))
}

// OnModes calls fn with every group's stored mode whenever one changes.
func (l *Local) OnModes(fn func(map[string]bool)) {
	l.On(SectionModes, func(m map[string]string) { fn(ModesOf(m)) })
}

// Close waits until the changes made are told.
func (l *Local) Close() { l.telling.Wait() }
