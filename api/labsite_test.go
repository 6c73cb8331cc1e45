package api

import (
	"context"
	"testing"
	"time"

	"github.com/frontdoor-vdi/frontdoor/broker"
	"github.com/frontdoor-vdi/frontdoor/configs"
	"github.com/frontdoor-vdi/frontdoor/store/memory"
)

// labSite loads the shipped lab config with extra YAML appended (users admin, operator
// and alice, all with password "lab") and a broker over a memory store.
func labSite(tb testing.TB, extra string) (*configs.Config, *broker.Broker) {
	tb.Helper()
	raw, err := configs.Shipped("lab.yaml")
	if err != nil {
		tb.Fatal(err)
	}
	cfg, err := configs.Load("lab.yaml", append(raw, extra...))
	if err != nil {
		tb.Fatal(err)
	}
	br, err := broker.New(context.Background(), cfg, memory.New(), time.Now)
	if err != nil {
		tb.Fatal(err)
	}
	return cfg, br
}
