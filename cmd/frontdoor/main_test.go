package main

import (
	"os"
	"testing"

	"github.com/frontdoor-vdi/frontdoor/internal/testkit"
)

// TestMain lets the test binary stand in for the frontdoor binary: with FRONTDOOR_TEST_MAIN=1
// it runs the command line it was given, as the node processes of a distributed lab do.
func TestMain(m *testing.M) {
	if os.Getenv("FRONTDOOR_TEST_MAIN") == "1" {
		main()
		os.Exit(0)
	}
	testkit.MainFastChecked(m)
}
