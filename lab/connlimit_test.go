package lab

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/frontdoor-vdi/frontdoor/configs"
)

// Stalled connections cannot keep an honest client out of the launch listener (4,096
// connections at once): the node closes those of one source past its bound (64) at accept,
// and when sources enough to fill it hold connections that never start their TLS handshake,
// a new connection takes the place of the one that has waited longest. Either way a launch
// from another address completes within client.Launch's 3 s TLS handshake timeout, which it
// did not while the stalled connections queued honest ones for 5 s.
func TestStalledConnectionsDoNotKeepOthersOut(t *testing.T) {
	cfg, err := configs.Load("one.yaml", []byte(strings.ReplaceAll(oneNodeSite, "127.44.", "127.46.")))
	if err != nil {
		t.Fatal(err)
	}
	l, _, _ := startLabWith(t, Options{Config: cfg})
	const target = "127.46.0.11:9443"
	cases := []struct {
		name            string
		sources, perSrc int
		wantCutAtLeast  int
		sourceOf        func(i int) string
	}{
		// 4,200 from one address: all but 64 are closed at once.
		{"one source holds thousands", 1, 4200, 4200 - 64, func(int) string { return "127.46.9.1" }},
		// 70 addresses of 60 each fill the listener: the oldest are shed for newer ones.
		{"many sources fill the listener", 70, 60, 70*60 - 4096, func(i int) string { return fmt.Sprintf("127.46.10.%d", i+1) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var conns []net.Conn
			var cut atomic.Int32
			var readers sync.WaitGroup
			defer func() {
				for _, nc := range conns {
					nc.Close()
				}
				readers.Wait()
			}()
			for s := range c.sources {
				d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(c.sourceOf(s))}, Timeout: 5 * time.Second}
				for range c.perSrc {
					nc, err := d.Dial("tcp", target)
					if err != nil {
						t.Fatalf("dialing a stalled connection (%d open): %v", len(conns), err)
					}
					conns = append(conns, nc)
					readers.Add(1)
					go func() {
						defer readers.Done()
						// Nothing is ever sent: any end of the read is the node's cut, or
						// this test's own close.
						if _, err := nc.Read(make([]byte, 1)); err != nil && !strings.Contains(err.Error(), "use of closed") {
							cut.Add(1)
						}
					}()
				}
			}
			start := time.Now()
			if err := launchWithin3s(l, "127.46.0.9", "https://"+target); err != nil {
				t.Fatalf("an honest launch beside %d stalled connections: %v (after %s)", len(conns), err, time.Since(start))
			}
			t.Logf("launch beside %d stalled connections: %s", len(conns), time.Since(start).Round(time.Millisecond))
			deadline := time.Now().Add(10 * time.Second)
			for int(cut.Load()) < c.wantCutAtLeast && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			if n := int(cut.Load()); n < c.wantCutAtLeast {
				t.Fatalf("the node cut %d of %d stalled connections, want at least %d", n, len(conns), c.wantCutAtLeast)
			}
		})
	}
}

// launchWithin3s launches alice's desktop from the address from over a new connection with
// client.Launch's timeouts (connect 2 s, TLS handshake 3 s, 10 s in all).
func launchWithin3s(l *Lab, from, url string) error {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 2 * time.Second}
	tr := &http.Transport{TLSClientConfig: l.TLSClientConfig(), DialContext: d.DialContext, TLSHandshakeTimeout: 3 * time.Second}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Timeout: 10 * time.Second, Transport: tr}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/launch", bytes.NewReader([]byte(`{"resource":"desktop","endpoint":"kiosk"}`)))
	req.SetBasicAuth("alice", "lab")
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var desc descriptor
	json.NewDecoder(resp.Body).Decode(&desc)
	if resp.StatusCode != http.StatusOK || desc.Machine != "vda-1" {
		return fmt.Errorf("launch: %s %+v", resp.Status, desc)
	}
	return nil
}
