package store

import (
	"fmt"
	"path/filepath"

	"github.com/frontdoor-vdi/frontdoor/broker"
	"github.com/frontdoor-vdi/frontdoor/configs"
	"github.com/frontdoor-vdi/frontdoor/store/bolt"
	"github.com/frontdoor-vdi/frontdoor/store/memory"
)

// Open returns the store the site configuration selects: memory, or bolt at site.store.path
// (default data_dir/frontdoor.db, data_dir defaulting to ./frontdoor-data). The etcd backend
// is not built yet.
func Open(cfg *configs.Config) (broker.Store, error) {
	switch b := cfg.Site.Store.Backend; b {
	case "memory":
		return memory.New(), nil
	case "", "bolt":
		path := cfg.Site.Store.Path
		if path == "" {
			dir := cfg.Site.DataDir
			if dir == "" {
				dir = "frontdoor-data"
			}
			path = filepath.Join(dir, "frontdoor.db")
		}
		return bolt.Open(path, bolt.Options{})
	default:
		return nil, fmt.Errorf("store backend %q is not available in this build", b)
	}
}
