package bolt_test

import (
	"path/filepath"
	"testing"

	"github.com/frontdoor-vdi/frontdoor/broker"
	"github.com/frontdoor-vdi/frontdoor/store/bolt"
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
