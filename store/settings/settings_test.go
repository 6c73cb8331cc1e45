package settings_test

import (
	"errors"
	"maps"
	"testing"

	"github.com/frontdoor-vdi/frontdoor/store/settings"
	"github.com/frontdoor-vdi/frontdoor/store/settings/settingstest"
)

// Settings in memory keep the suite's rules.
func TestLocalConformance(t *testing.T) {
	settingstest.Run(t, func(t *testing.T) settingstest.Settings {
		l, err := settings.NewLocal(nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(l.Close)
		return l
	})
}

// A change its backend refuses is refused, and the view keeps what it had.
func TestLocalChangesOnlyWhatItsBackendKept(t *testing.T) {
	b := &refusing{stored: map[string]map[string]string{settings.SectionOverrides: {"gw-1": "drain"}, "colours": {"gw-1": "blue"}}}
	l, err := settings.NewLocal(b)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if got := l.Get(settings.SectionOverrides); !maps.Equal(got, map[string]string{"gw-1": "drain"}) {
		t.Fatalf("loaded %v", got)
	}
	if got := l.Get("colours"); len(got) != 0 {
		t.Fatalf("an unknown section was loaded: %v", got)
	}
	b.err = errors.New("disk full")
	if err := l.Set(t.Context(), settings.SectionOverrides, map[string]string{"gw-1": ""}); !errors.Is(err, b.err) {
		t.Fatalf("Set = %v, want the backend's %v", err, b.err)
	}
	if got := l.Get(settings.SectionOverrides); !maps.Equal(got, map[string]string{"gw-1": "drain"}) {
		t.Fatalf("after a refused change the section holds %v", got)
	}
}

type refusing struct {
	stored map[string]map[string]string
	err    error
}

func (r *refusing) Load() (map[string]map[string]string, error) { return r.stored, nil }
func (r *refusing) Store(string, map[string]string) error       { return r.err }
