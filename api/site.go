package api

import (
	"context"
	"net/http"
	"net/netip"
	"time"
)

// SiteView is GET /v1/admin/site: the site at a glance for the console's Site page.
type SiteView struct {
	Site  string     `json:"site"`
	Zone  string     `json:"zone"` // this front door's
	Zones []ZoneView `json:"zones"`
	// Sessions counts the site's sessions by state.
	Sessions map[string]int `json:"sessions"`
	// Store is the store's status (etcd: members, nodes, zone leaders, outage mode); absent
	// on a store of one node.
	Store any `json:"store,omitempty"`
}

// ZoneView is one zone of the site.
type ZoneView struct {
	Name    string         `json:"name"`
	Primary bool           `json:"primary"`
	Ranges  []netip.Prefix `json:"ranges"`
}

// sessionCounts counts the site's sessions by state (the status and the site view).
func (a *Admin) sessionCounts() map[string]int {
	out := map[string]int{}
	for _, s := range a.o.Broker.Sessions() {
		out[string(s.State)]++
	}
	return out
}

func (a *Admin) site(w http.ResponseWriter, r *http.Request) {
	v := SiteView{Site: a.o.Config.Site.Name, Zone: a.o.Zone, Sessions: a.sessionCounts()}
	for _, z := range a.o.Config.Zones {
		v.Zones = append(v.Zones, ZoneView{Name: z.Name, Primary: z.Primary, Ranges: z.Ranges})
	}
	if a.o.Store != nil {
		ctx, cancel := context.WithTimeout(r.Context(), 3*time.Second)
		v.Store = a.o.Store(ctx)
		cancel()
	}
	writeJSON(w, http.StatusOK, v)
}
