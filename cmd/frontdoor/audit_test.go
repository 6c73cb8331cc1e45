package main

import (
	"bytes"
	"context"
	"encoding/pem"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/frontdoor-vdi/frontdoor/api"
	"github.com/frontdoor-vdi/frontdoor/configs"
)

// adminServer serves an admin API with the lab's users, the audit log given and a drills
// directory, and returns the flags that reach it.
func adminServer(t *testing.T, audit api.AuditLog, drills string) []string {
	t.Helper()
	raw, err := configs.Shipped("lab.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := configs.Load("lab.yaml", raw)
	if err != nil {
		t.Fatal(err)
	}
	a, err := api.NewAdmin(api.AdminOptions{Config: cfg, Audit: audit, DrillDir: drills, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewTLSServer(a)
	t.Cleanup(srv.Close)
	ca := filepath.Join(t.TempDir(), "ca.pem")
	os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o644)
	return []string{"--url", srv.URL, "--user", "admin", "--password", "lab", "--ca", ca}
}

func runAdmin(t *testing.T, flags []string, args ...string) (string, error) {
	t.Helper()
	cmd := newAdminCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(io.Discard)
	cmd.SetArgs(append(args, flags...))
	err := cmd.ExecuteContext(context.Background())
	return out.String(), err
}

// frontdoor admin audit prints the log as a table, newest first, and how to page back.
func TestAdminAuditPrintsATable(t *testing.T) {
	audit := api.NewMemoryAudit(100)
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	for i, e := range []api.AuditEntry{
		{User: "admin", From: "192.0.2.1", Node: "fd-hq-1", Action: "secure-gateway", Target: "desktops", Detail: "off for new launches; was on"},
		{User: "admin", From: "192.0.2.1", Node: "fd-hq-1", Action: "machine.maintenance", Target: "vda-hq-1", Detail: "on"},
		{User: "admin", From: "192.0.2.9", Node: "fd-east-1", Action: "key.rotate", Target: "k2"},
	} {
		e.Time = t0.Add(time.Duration(i) * time.Minute)
		audit.Append(context.Background(), e)
	}
	flags := adminServer(t, audit, "")
	out, err := runAdmin(t, flags, "audit", "--limit", "2")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "TIME") || !strings.Contains(lines[0], "DETAIL") {
		t.Fatalf("output:\n%s", out)
	}
	for i, want := range []string{"2026-12-01T09:02:00Z  admin  192.0.2.9  fd-east-1  key.rotate", "2026-12-01T09:01:00Z  admin  192.0.2.1  fd-hq-1    machine.maintenance  vda-hq-1  on"} {
		if !strings.HasPrefix(lines[i+1], want) {
			t.Errorf("line %d: %q, want it to start %q", i+1, lines[i+1], want)
		}
	}
	if lines[3] != "older entries: --before 2026-12-01T09:01:00Z" {
		t.Errorf("last line %q", lines[3])
	}
	out, err = runAdmin(t, flags, "audit", "--before", "2026-12-01T09:01:00Z")
	if err != nil || !strings.Contains(out, "secure-gateway") || strings.Contains(out, "key.rotate") || strings.Contains(out, "older entries") {
		t.Fatalf("the next page: %v\n%s", err, out)
	}
}

// frontdoor admin drills upload gives a front door a report.json (a file or the --report
// directory); drills list shows it.
func TestAdminDrillsUpload(t *testing.T) {
	flags := adminServer(t, api.NewMemoryAudit(10), t.TempDir())
	dir := t.TempDir()
	rep := `{"started": "2026-12-01T10:00:00Z", "results": [{"scenario": "s", "mode": "gateway", "pass": true}]}`
	os.WriteFile(filepath.Join(dir, "report.json"), []byte(rep), 0o644)
	out, err := runAdmin(t, flags, "drills", "upload", dir)
	if err != nil || !strings.Contains(out, `"id": "20261201T100000Z-`) {
		t.Fatalf("upload: %v\n%s", err, out)
	}
	if out, err = runAdmin(t, flags, "drills", "list"); err != nil || !strings.Contains(out, `"rows": 1`) {
		t.Fatalf("list: %v\n%s", err, out)
	}
	if _, err := runAdmin(t, flags, "drills", "upload", filepath.Join(dir, "nope.json")); err == nil {
		t.Fatal("uploading a file that does not exist")
	}
}
