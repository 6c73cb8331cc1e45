package bolt_test

import (
	"maps"
	"path/filepath"
	"testing"

	"github.com/frontdoor-vdi/frontdoor/broker"
	"github.com/frontdoor-vdi/frontdoor/store/bolt"
	"github.com/frontdoor-vdi/frontdoor/store/settings"
	"github.com/frontdoor-vdi/frontdoor/store/settings/settingstest"
	"github.com/frontdoor-vdi/frontdoor/store/storetest"
)

// The bolt store keeps broker.Store's rules.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) broker.Store {
		st, err := bolt.Open(filepath.Join(t.TempDir(), "site.db"), bolt.Options{NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	})
}

// The bolt file keeps the settings' rules, and keeps the settings across a restart.
func TestSettingsConformance(t *testing.T) {
	settingstest.Run(t, func(t *testing.T) settingstest.Settings {
		st, err := bolt.Open(filepath.Join(t.TempDir(), "site.db"), bolt.Options{NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st.Settings()
	})
}

func TestSettingsOutliveARestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "site.db")
	st, err := bolt.Open(path, bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Settings().SetModes(t.Context(), map[string]bool{"desktops": false}); err != nil {
		t.Fatal(err)
	}
	if err := st.Settings().Set(t.Context(), settings.SectionOverrides, map[string]string{"gw-1": "drain", "gw-2": "down"}); err != nil {
		t.Fatal(err)
	}
	if err := st.Settings().Set(t.Context(), settings.SectionOverrides, map[string]string{"gw-2": ""}); err != nil {
		t.Fatal(err)
	}
	st.Close()

	st, err = bolt.Open(path, bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if got, want := st.Settings().Modes(), map[string]bool{"desktops": false}; !maps.Equal(got, want) {
		t.Errorf("modes after a restart %v, want %v", got, want)
	}
	if got, want := st.Settings().Get(settings.SectionOverrides), map[string]string{"gw-1": "drain"}; !maps.Equal(got, want) {
		t.Errorf("overrides after a restart %v, want %v", got, want)
	}
}
