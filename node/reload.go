package node

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/frontdoor-vdi/frontdoor/configs"
	"github.com/frontdoor-vdi/frontdoor/gslb"
	"github.com/frontdoor-vdi/frontdoor/zonemap"
)

// reloads is a node's state of config reloads.
type reloads struct {
	reloadMu sync.Mutex      // serializes Reload; guards live and stopping
	live     *configs.Config // the config last applied: cfg, then what Reload applied
	stopping bool            // the node drains: Reload refuses
}

// Reload applies a new configuration to the running nodes without a restart: the proxy's
// listeners, pools, routes, limits, affinity and drain timeout (established connections
// stay on the backends they have), the GSLB domains and the answers of the GSLB names, and
// the zones' client ranges with site.default_zone. Every other part of cfg must be as it is
// now, the set of GSLB names too (the certificates cover them); Reload refuses a config that
// changes one, naming the parts that need a restart. It checks everything before it changes
// anything: on error the running configuration stays whole.
func (r *Node) Reload(cfg *configs.Config) error {
	r.reloadMu.Lock()
	defer r.reloadMu.Unlock()
	if r.stopping {
		return errors.New("reload: the node is stopping")
	}
	if changed := fixedChanges(r.live, cfg); len(changed) > 0 {
		return fmt.Errorf("reload: %s changed, which takes a restart; nothing was reloaded", strings.Join(changed, ", "))
	}
	ranges, err := zonemap.RangesFromConfig(cfg)
	if err == nil {
		_, err = zonemap.NewTable(ranges, cfg.Site.DefaultZone)
	}
	if err != nil {
		return fmt.Errorf("reload: zones: %w", err)
	}
	if err := gslb.Check(cfg); err != nil {
		return fmt.Errorf("reload: gslb: %w", err)
	}
	pc, err := r.proxyConfig(cfg)
	if err != nil {
		return fmt.Errorf("reload: %w", err)
	}
	switch {
	case r.proxy == nil && len(pc.Listeners) > 0:
		return errors.New("reload: this node had no proxy listeners when it started: adding the first takes a restart")
	case r.proxy != nil && len(pc.Listeners) == 0:
		return errors.New("reload: removing this node's last proxy listener takes a restart")
	case r.proxy != nil:
		pc.SetDefaults()
		if err := pc.Validate(); err != nil {
			return fmt.Errorf("reload: %w", err)
		}
	}
	// Blocking UDP workers hold their P each: the owner of the process keeps one P per worker
	// (Options.Procs.Add), the new ones before they start, the old ones' once they stopped.
	delta := 0
	if r.o.Procs.BlockingUDP && r.o.Procs.Add != nil {
		delta = UDPWorkers(cfg, r.spec.Name) - UDPWorkers(r.live, r.spec.Name)
	}
	if delta > 0 {
		r.o.Procs.Add(delta)
	}
	if r.proxy != nil {
		if err := r.proxy.Reload(pc); err != nil { // opening a new listener can still fail
			if delta > 0 {
				r.o.Procs.Add(-delta)
			}
			return fmt.Errorf("reload: %w", err)
		}
	}
	if delta < 0 {
		r.o.Procs.Add(delta)
	}
	// Both were checked above: neither fails now.
	if err := r.zones.Reload(ranges, cfg.Site.DefaultZone); err != nil {
		return fmt.Errorf("reload: zones: %w", err)
	}
	if err := r.dns.Reload(cfg); err != nil {
		return fmt.Errorf("reload: gslb: %w", err)
	}
	r.live = cfg
	return nil
}

// fixedChanges names the top-level parts of the config (by their YAML keys) that differ
// between a and b outside what Reload applies.
func fixedChanges(a, b *configs.Config) []string {
	fa, fb := fixedPart(a), fixedPart(b)
	va, vb := reflect.ValueOf(fa), reflect.ValueOf(fb)
	t := va.Type()
	var changed []string
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() || f.Name == "File" {
			continue
		}
		if !reflect.DeepEqual(va.Field(i).Interface(), vb.Field(i).Interface()) {
			name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			changed = append(changed, name)
		}
	}
	if !slices.Equal(gslbNames(a), gslbNames(b)) {
		changed = append(changed, "the set of gslb.names")
	}
	if a.GSLB.QueryLogSample != b.GSLB.QueryLogSample {
		changed = append(changed, "gslb.query_log_sample")
	}
	return changed
}

// gslbNames returns the GSLB names of c, sorted.
func gslbNames(c *configs.Config) []string {
	names := make([]string, len(c.GSLB.Names))
	for i, n := range c.GSLB.Names {
		names[i] = strings.ToLower(strings.TrimSuffix(n.Name, "."))
	}
	slices.Sort(names)
	return names
}

// fixedPart is c without what Reload applies.
func fixedPart(c *configs.Config) configs.Config {
	f := *c
	f.Proxy = configs.Proxy{}
	f.GSLB = configs.GSLB{}
	f.Site.DefaultZone = ""
	f.Zones = make([]configs.Zone, len(c.Zones))
	for i, z := range c.Zones {
		z.Ranges = nil
		f.Zones[i] = z
	}
	return f
}
