package node

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/frontdoor-vdi/frontdoor/api"
	"github.com/frontdoor-vdi/frontdoor/configs"
)

const oneNodeSite = `
site: {name: one}
zones: [{name: hq, primary: true}]
nodes:
  - {name: fd, zone: hq, listeners: [{kind: admin, address: "127.0.99.1:9443"}]}
groups: [{name: desktops}]
machines: [{name: vda-1, address: 127.0.99.11, zone: hq, group: desktops, max_sessions: 1}]
resources: [{name: desktop, groups: [{group: desktops}], entitled: {everyone: true}}]
users:
  - {name: admin, admin: true, password_hash: "$2a$10$hmIm37EQl2GI6WzyFg.kUe2OoNhztKxrxmbZEcRHkzoi.ekBqG9n2"}
`

// On a site of one node the audit log is the bolt file's, so it outlives the node; the
// admin API's event stream tells of a machine's change and of its audit entry.
func TestConsoleAuditAndEventsOnOneNode(t *testing.T) {
	cfg, err := configs.Load("one.yaml", []byte(oneNodeSite))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	open := func() (*Node, *httptest.Server) {
		t.Helper()
		n, err := New(context.Background(), Options{Config: cfg, DataDir: dir, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		return n, httptest.NewServer(n.admins[0])
	}
	call := func(srv *httptest.Server, method, path, body string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		req.SetBasicAuth("admin", "lab")
		res, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	n, srv := open()
	stream := call(srv, http.MethodGet, "/v1/admin/events", "")
	if stream.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/admin/events: %d", stream.StatusCode)
	}
	topics := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(stream.Body)
		for sc.Scan() {
			if topic, ok := strings.CutPrefix(sc.Text(), "event: "); ok {
				topics <- topic
			}
		}
		close(topics)
	}()
	res := call(srv, http.MethodPost, "/v1/admin/machines/vda-1/maintenance", `{"on": true}`)
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("maintenance: %d", res.StatusCode)
	}
	seen := map[string]bool{}
	for deadline := time.After(5 * time.Second); !seen[api.TopicMachines] || !seen[api.TopicAudit]; {
		select {
		case tp := <-topics:
			seen[tp] = true
		case <-deadline:
			t.Fatalf("events seen: %v, want machines and audit", seen)
		}
	}
	stream.Body.Close()
	srv.Close()
	n.Close()

	n, srv = open()
	defer func() { srv.Close(); n.Close() }()
	res = call(srv, http.MethodGet, "/v1/admin/audit", "")
	var l api.AuditList
	json.NewDecoder(res.Body).Decode(&l)
	res.Body.Close()
	if len(l.Entries) != 1 || l.Entries[0].Action != "machine.maintenance" || l.Entries[0].Node != "fd" || l.Entries[0].User != "admin" {
		t.Fatalf("the audit log after a restart: %+v", l)
	}
}
