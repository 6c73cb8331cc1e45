// Package gatewaytest runs gateways in the tests of other packages, as net/http/httptest runs
// HTTP servers: built, listening and serving, and stopped when the test ends.
package gatewaytest

import (
	"context"
	"sync"
	"testing"

	"github.com/frontdoor-vdi/frontdoor/gateway"
)

// Start builds the gateway of o (track nil: a tracker of its own), opens its sockets and
// serves it until the test ends or stop is called; stop returns once Serve has.
func Start(t testing.TB, o gateway.Options, track *gateway.Tracker) (g *gateway.Gateway, stop func()) {
	t.Helper()
	g, err := gateway.New(o, track)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Serve(ctx) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return g, stop
}

// ServeQUIC serves the QUIC gateway q (gateway.ListenQUIC, Gateway.ListenQUIC) until the test
// ends or stop is called; stop returns once Serve has, and q is closed.
func ServeQUIC(t testing.TB, q *gateway.QUIC) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- q.Serve(ctx) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done; q.Close() }) }
	t.Cleanup(stop)
	return stop
}
