package bolt

import (
	"bytes"

	"github.com/frontdoor-vdi/frontdoor/store/settings"
	bbolt "go.etcd.io/bbolt"
)

// The settings of a site of one node (package settings: the secure-gateway modes, the health
// overrides, the machines' revocations), in the bolt file: bucket "settings", key section +
// "\x00" + name, value the word. A change is in the file, fsynced, before it is answered.

var bSettings = []byte("settings")

// Settings returns the store's settings.
func (st *Store) Settings() *settings.Local { return st.settings }

// settingsFile is the bolt file as a settings.Backend.
type settingsFile struct{ db *bbolt.DB }

func (f settingsFile) Load() (map[string]map[string]string, error) {
	out := map[string]map[string]string{}
	err := f.db.View(func(tx *bbolt.Tx) error {
		return tx.Bucket(bSettings).ForEach(func(k, v []byte) error {
			sec, name, ok := bytes.Cut(k, []byte{0})
			if !ok {
				return nil // not a setting's key: left alone
			}
			if out[string(sec)] == nil {
				out[string(sec)] = map[string]string{}
			}
			out[string(sec)][string(name)] = string(v)
			return nil
		})
	})
	return out, err
}

func (f settingsFile) Store(section string, entries map[string]string) error {
	return f.db.Update(func(tx *bbolt.Tx) error {
		b := tx.Bucket(bSettings)
		for name, v := range entries {
			k := []byte(section + "\x00" + name)
			var err error
			if v == "" {
				err = b.Delete(k)
			} else {
				err = b.Put(k, []byte(v))
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
}
