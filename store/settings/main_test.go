package settings_test

import (
	"testing"

	"github.com/frontdoor-vdi/frontdoor/internal/testkit"
)

func TestMain(m *testing.M) { testkit.Main(m) }
