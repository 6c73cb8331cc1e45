package etcd_test

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/frontdoor-vdi/frontdoor/broker"
	"github.com/frontdoor-vdi/frontdoor/internal/testkit"
	"github.com/frontdoor-vdi/frontdoor/store/etcd"
	"github.com/frontdoor-vdi/frontdoor/store/settings/settingstest"
	"github.com/frontdoor-vdi/frontdoor/store/storetest"
)

// The etcd store keeps broker.Store's rules, each subtest of the suite on a key prefix of
// its own.
func TestConformance(t *testing.T) {
	c := cluster(t)
	n := 0
	storetest.Run(t, func(t *testing.T) broker.Store {
		n++
		st, err := etcd.Open(t.Context(), etcd.Options{Endpoints: c.Endpoints(), Prefix: fmt.Sprintf("/frontdoor/conformance-%d/", n), Node: "a"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	})
}

// The site's settings in etcd keep the settings' rules, told through the watch.
func TestSettingsConformance(t *testing.T) {
	c := cluster(t)
	n := 0
	settingstest.Run(t, func(t *testing.T) settingstest.Settings {
		n++
		st, err := etcd.Open(t.Context(), etcd.Options{Endpoints: c.Endpoints(), Prefix: fmt.Sprintf("/frontdoor/settings-%d/", n), Node: "a"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st.Settings()
	})
}

// In an outage the store brokers from its view, and keeps the same rules for the slots its
// node owns (here every slot: the node is the machines' only outage broker).
func TestConformanceInAnOutage(t *testing.T) {
	c := cluster(t)
	dir := t.TempDir()
	plan := map[string]etcd.MachinePlan{}
	for m, max := range storetest.Machines() {
		plan[m] = etcd.MachinePlan{Brokers: []string{"a"}, Max: max}
	}
	// The stores are opened while etcd answers, one for each subtest, and then etcd stops.
	stores := make([]*etcd.Store, 12)
	for i := range stores {
		st, err := etcd.Open(t.Context(), etcd.Options{Endpoints: c.Endpoints(), Prefix: fmt.Sprintf("/frontdoor/outage-%d/", i), Node: "a",
			Plan: plan, CacheFile: filepath.Join(dir, fmt.Sprint(i, ".lhc")), DialTimeout: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		stores[i] = st
	}
	if err := c.StopMember(0); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "every store in outage mode", func() bool {
		for _, st := range stores {
			if !st.Outage().Active() {
				return false
			}
		}
		return true
	})
	n := 0
	storetest.Run(t, func(t *testing.T) broker.Store {
		if n == len(stores) {
			t.Fatalf("the suite has more than the %d subtests stores were opened for", len(stores))
		}
		n++
		return stores[n-1]
	})
}
