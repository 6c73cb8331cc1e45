package node

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/frontdoor-vdi/frontdoor/broker"
	"github.com/frontdoor-vdi/frontdoor/store/bolt"
	"github.com/frontdoor-vdi/frontdoor/store/etcd"
	"github.com/frontdoor-vdi/frontdoor/store/settings"
)

// siteSettings are what operators switch at run time and every front door of the site
// follows (package settings: secure-gateway modes, health overrides, machine revocations):
// etcd's on a site of several nodes, the bolt file's on a site of one, or the memory
// store's. A node reads and follows them the same way on each.
type siteSettings = settings.Settings

// settingsOf returns the settings that st keeps.
func settingsOf(st broker.Store) (siteSettings, error) {
	switch s := st.(type) {
	case *etcd.Store:
		return s.Settings(), nil
	case interface{ Settings() *settings.Local }: // bolt, memory
		return s.Settings(), nil
	}
	return nil, fmt.Errorf("the store %T keeps no settings", st)
}

// outageMode is the site database's outage mode (store/etcd's Local Host Cache): etcd's on a
// site of several nodes; a site of one node, whose store is its own file, has none.
type outageMode interface {
	Active() bool
	Status() etcd.OutageStatus
	On(fn func(bool))
}

var (
	_ outageMode = etcd.Outage{}
	_ outageMode = never{}
)

// outageOf returns the outage mode of st.
func outageOf(st broker.Store) outageMode {
	if s, ok := st.(*etcd.Store); ok {
		return s.Outage()
	}
	return never{}
}

// never is the outage mode of a store that cannot be out of reach.
type never struct{}

func (never) Active() bool              { return false }
func (never) Status() etcd.OutageStatus { return etcd.OutageStatus{} }
func (never) On(func(bool))             {}

// Files in the data dir where a one-node site kept its settings before its bolt file did.
const (
	oldModesFile   = "secure-gateway.json"   // group → on
	oldRevokedFile = "revoked-machines.json" // machine → RFC 3339 time
)

// moveOldSettings moves the settings a one-node site kept in files of dir into its bolt
// file, once: each file is removed when what it held is in the store. A file that cannot be
// read stops the start, as it did before.
func moveOldSettings(ctx context.Context, dir string, st *bolt.Store) error {
	s := st.Settings()
	var modes map[string]bool
	if ok, err := readDataJSON(dir, oldModesFile, &modes); err != nil {
		return err
	} else if ok {
		if err := s.SetModes(ctx, modes); err != nil {
			return err
		}
		if err := os.Remove(filepath.Join(dir, oldModesFile)); err != nil {
			return err
		}
	}
	var revoked map[string]time.Time
	if ok, err := readDataJSON(dir, oldRevokedFile, &revoked); err != nil {
		return err
	} else if ok {
		entries := make(map[string]string, len(revoked))
		for m, before := range revoked {
			entries[m] = strconv.FormatInt(before.UnixMilli(), 10)
		}
		if err := s.Set(ctx, settings.SectionRevokedMachines, entries); err != nil {
			return err
		}
		if err := os.Remove(filepath.Join(dir, oldRevokedFile)); err != nil {
			return err
		}
	}
	return nil
}
