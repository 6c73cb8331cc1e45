// Package settingstest is the conformance suite of a site's settings (package settings): what
// every implementation must do, whether etcd keeps the settings for a site of several nodes,
// a bolt file for a site of one, or memory. Its waits are the settings' own: it follows a
// section (On) and waits, bounded, until it is told what it wrote.
package settingstest

import (
	"maps"
	"testing"
	"time"

	"github.com/frontdoor-vdi/frontdoor/store/settings"
)

// Settings is what the suite checks.
type Settings = settings.Settings

// wait bounds every wait of the suite for a change to be told.
const wait = 10 * time.Second

// Run runs the suite against the settings open returns: empty ones for each subtest, closed
// by open's own cleanup.
func Run(t *testing.T, open func(t *testing.T) Settings) {
	t.Run("new settings are empty", func(t *testing.T) {
		s := open(t)
		for _, sec := range settings.Sections() {
			if got := s.Get(sec); len(got) != 0 {
				t.Errorf("section %s holds %v", sec, got)
			}
		}
		if got := s.Modes(); len(got) != 0 {
			t.Errorf("modes %v", got)
		}
	})
	t.Run("entries read back and an empty value deletes one", func(t *testing.T) {
		s := open(t)
		told := follow(t, s, settings.SectionOverrides)
		set(t, s, settings.SectionOverrides, map[string]string{"gw-1": "drain", "gw-2": "down"})
		told(map[string]string{"gw-1": "drain", "gw-2": "down"})
		set(t, s, settings.SectionOverrides, map[string]string{"gw-1": ""})
		told(map[string]string{"gw-2": "down"})
	})
	t.Run("an unknown section is refused", func(t *testing.T) {
		s := open(t)
		if err := s.Set(t.Context(), "colours", map[string]string{"gw-1": "blue"}); err == nil {
			t.Fatal("a section that does not exist took an entry")
		}
		if got := s.Get("colours"); len(got) != 0 {
			t.Fatalf("the unknown section holds %v", got)
		}
	})
	t.Run("modes are written on and off and read back", func(t *testing.T) {
		s := open(t)
		told := make(chan map[string]bool, 64)
		s.OnModes(func(m map[string]bool) {
			select {
			case told <- m:
			default:
			}
		})
		if err := s.SetModes(t.Context(), map[string]bool{"desktops": true, "apps": false}); err != nil {
			t.Fatal(err)
		}
		want := map[string]bool{"desktops": true, "apps": false}
		deadline := time.After(wait)
		for got := map[string]bool(nil); !maps.Equal(got, want); {
			select {
			case got = <-told:
			case <-deadline:
				t.Fatalf("modes told %v, want %v", got, want)
			}
		}
		if got := s.Modes(); !maps.Equal(got, want) {
			t.Fatalf("Modes() = %v, want %v", got, want)
		}
		if got, want := s.Get(settings.SectionModes), map[string]string{"desktops": "on", "apps": "off"}; !maps.Equal(got, want) {
			t.Fatalf("the modes section holds %v, want %v", got, want)
		}
	})
	t.Run("each follower is told of its own section", func(t *testing.T) {
		s := open(t)
		first := follow(t, s, settings.SectionOverrides)
		second := follow(t, s, settings.SectionOverrides)
		revoked := follow(t, s, settings.SectionRevokedMachines)
		set(t, s, settings.SectionOverrides, map[string]string{"gw-1": "up"})
		first(map[string]string{"gw-1": "up"})
		second(map[string]string{"gw-1": "up"})
		// The first thing the revocations' follower hears is its own section.
		set(t, s, settings.SectionRevokedMachines, map[string]string{"vda-1": "1700000000000"})
		revoked(map[string]string{"vda-1": "1700000000000"}, strict)
	})
	t.Run("changes one after the other end in the last", func(t *testing.T) {
		s := open(t)
		told := follow(t, s, settings.SectionOverrides)
		// Words of their own, so that no earlier state equals the last.
		for _, v := range []string{"first", "second", "third", "fourth", "last"} {
			set(t, s, settings.SectionOverrides, map[string]string{"gw-1": v})
		}
		told(map[string]string{"gw-1": "last"})
	})
}

// strict makes a follower's wait fail at the first section told that is not the one wanted.
const strict = true

func set(t *testing.T, s Settings, section string, entries map[string]string) {
	t.Helper()
	if err := s.Set(t.Context(), section, entries); err != nil {
		t.Fatalf("setting %s %v: %v", section, entries, err)
	}
}

// follow follows section of s and returns a wait: until the section told is want (with
// strict, the first one told must be), and then Get returns it too.
func follow(t *testing.T, s Settings, section string) func(want map[string]string, strict ...bool) {
	told := make(chan map[string]string, 64)
	s.On(section, func(m map[string]string) {
		select {
		case told <- m:
		default: // a follower must not block: the suite waits for the last
		}
	})
	return func(want map[string]string, strict ...bool) {
		t.Helper()
		deadline := time.After(wait)
		for {
			select {
			case got := <-told:
				if maps.Equal(got, want) {
					if now := s.Get(section); !maps.Equal(now, want) {
						t.Fatalf("told %s %v, but Get returns %v", section, want, now)
					}
					return
				}
				if len(strict) > 0 && strict[0] {
					t.Fatalf("the follower of %s was told %v first, want %v", section, got, want)
				}
			case <-deadline:
				t.Fatalf("the follower of %s was not told %v within %v (now %v)", section, want, wait, s.Get(section))
			}
		}
	}
}
