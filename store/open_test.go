package store_test

import (
	"path/filepath"
	"testing"

	"github.com/frontdoor-vdi/frontdoor/configs"
	"github.com/frontdoor-vdi/frontdoor/store"
)

func TestOpenPicksTheConfiguredBackend(t *testing.T) {
	for _, tc := range []struct{ backend, path, wantErr string }{
		{"memory", "", ""},
		{"bolt", filepath.Join(t.TempDir(), "fd.db"), ""},
		{"zookeeper", "", `store backend "zookeeper" is not available in this build`},
	} {
		cfg := &configs.Config{}
		cfg.Site.Store.Backend, cfg.Site.Store.Path = tc.backend, tc.path
		st, err := store.Open(t.Context(), cfg, store.Options{})
		if tc.wantErr != "" {
			if err == nil || err.Error() != tc.wantErr {
				t.Errorf("%s: got %v, want %q", tc.backend, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.backend, err)
		}
		st.Close()
	}
}
