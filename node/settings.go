package node

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/frontdoor-vdi/frontdoor/configs"
	"github.com/frontdoor-vdi/frontdoor/health"
	"github.com/frontdoor-vdi/frontdoor/store/bolt"
	"github.com/frontdoor-vdi/frontdoor/store/etcd"
	"github.com/frontdoor-vdi/frontdoor/store/settings"
)

// siteSettings are what operators switch at run time and every front door of the site
// follows (package settings: secure-gateway modes, health overrides, machine revocations):
// etcd's on a site of several nodes, the bolt file's on a site of one, or the memory
// store's. A node reads and follows them the same way on each.
type siteSettings = settings.Settings

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

// applyModes installs the secure-gateway switches stored site-wide in the broker and the
// admin APIs. Groups the configuration does not have are ignored.
func (r *Node) applyModes(modes map[string]bool) {
	for g, on := range modes {
		r.broker.SetSecureGateway(g, on) // a group the config no longer has: nothing to switch
	}
	for _, a := range r.admins {
		a.ApplyModes(modes)
	}
}

// applyOverrides installs the health overrides stored site-wide: each gateway of the config
// follows its entry (none: the probes).
func (r *Node) applyOverrides(stored map[string]string) {
	for _, g := range r.cfg.Gateways {
		v, err := health.ParseOverride(stored[g.Name])
		if stored[g.Name] == "" || err != nil {
			v = health.OverrideNone
		}
		if st, ok := r.health.Status(g.Name); ok && st.Override == v {
			continue
		}
		if note, err := r.applyOverride(g, v); err != nil {
			r.log.Warn("applying a stored health override", "gateway", g.Name, "override", v.String(), "err", err)
		} else {
			r.log.Info("health override from the site", "gateway", g.Name, "override", v.String(), "note", note)
		}
	}
}

// applyOverride sets an override here: this front door's verdict, and the drain mode of the
// gateway when this node hosts it. The note says what else holds.
func (r *Node) applyOverride(g configs.Gateway, v health.Override) (note string, err error) {
	if err := r.health.SetOverride(g.Name, v); err != nil {
		return "", err
	}
	var notes []string
	if reach := r.site.reach(); reach != "" {
		notes = append(notes, reach)
	}
	gw := r.gateways[g.Name]
	drain := v == health.OverrideDrain || v == health.OverrideDown
	switch {
	case gw == nil && g.Node != "":
		notes = append(notes, fmt.Sprintf("node %s, which hosts %s, sets its drain mode", g.Node, g.Name))
	case gw == nil: // a foreign server: the verdicts are all there is
	case !gw.CanDrain():
		if drain {
			notes = append(notes, "the gateway has no https health port to say it drains")
		}
	default:
		gw.Drain(drain)
		if q := r.quics()[g.Name]; q != nil {
			q.Drain(drain)
		}
	}
	return strings.Join(notes, "; "), nil
}
