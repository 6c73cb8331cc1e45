package etcd_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/frontdoor-vdi/frontdoor/store/etcd"
)

// TestUpdateIdentityAppliesEveryChange: nodes that change the identity at once each have
// their change applied in turn on the other's (none is lost), and every node reads the result.
func TestUpdateIdentityAppliesEveryChange(t *testing.T) {
	c := cluster(t)
	secret := make([]byte, etcd.SecretSize)
	secret[0] = 9
	if _, err := open(t, c, "a").Keys().Identity(t.Context(), secret, func() ([]byte, error) { return []byte("keys:"), nil }); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for _, n := range []string{"n1", "n2", "n3"} {
		st := open(t, c, n)
		wg.Go(func() {
			if _, err := st.Keys().UpdateIdentity(t.Context(), secret, func(b []byte) ([]byte, error) { return append(b, " "+n...), nil }); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	b, err := open(t, c, "b").Keys().Identity(t.Context(), secret, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"n1", "n2", "n3"} {
		if !strings.Contains(string(b), n) {
			t.Fatalf("identity %q lost %s's change", b, n)
		}
	}
}
