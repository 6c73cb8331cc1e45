package memory_test

import (
	"testing"

	"github.com/frontdoor-vdi/frontdoor/broker"
	"github.com/frontdoor-vdi/frontdoor/internal/testkit"
	"github.com/frontdoor-vdi/frontdoor/store/memory"
	"github.com/frontdoor-vdi/frontdoor/store/storetest"
)

func TestMain(m *testing.M) { testkit.Main(m) }

// The memory store keeps broker.Store's rules.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(*testing.T) broker.Store { return memory.New() })
}
