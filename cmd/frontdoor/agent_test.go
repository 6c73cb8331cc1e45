package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/frontdoor-vdi/frontdoor/api"
	"github.com/frontdoor-vdi/frontdoor/configs"
	"github.com/frontdoor-vdi/frontdoor/internal/siteid"
	"github.com/frontdoor-vdi/frontdoor/internal/testbuf"
	"github.com/frontdoor-vdi/frontdoor/node"
	"github.com/frontdoor-vdi/frontdoor/pki"
)

const agentSite = `
site: {name: agent-test}
zones: [{name: hq, primary: true, ranges: [127.0.0.0/8]}]
nodes:
  - name: fd-1
    zone: hq
    listeners: [{kind: launch, address: "127.0.86.1:PORT1"}]
groups: [{name: desktops, kind: shared}]
machines:
  - {name: vda-1, address: 127.0.86.2, zone: hq, group: desktops, display_ports: ["PORT2/tcp"]}
`

// frontdoor agent enrols with its front door: the machine's display port then presents a
// certificate of the site CA that names the machine, over TLS.
func TestAgentEnrolsAndServesItsPortsOverTLS(t *testing.T) {
	p1, p2 := freePort(t), freePort(t)
	file := writeConfig(t, strings.NewReplacer("PORT1", p1, "PORT2", p2).Replace(agentSite))
	sv := startServe(t, file)

	// The token from the site key in the node's data dir, as `frontdoor admin agent-token` prints it.
	cfg, err := configs.LoadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	key, _, err := node.LoadIdentity(context.Background(), cfg, nil, sv.data, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	cmd := newAgentCmd()
	var out, logs testbuf.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&logs)
	cmd.SetArgs([]string{"--config", file, "--machine", "vda-1", "--ca", filepath.Join(sv.data, "ca.pem"),
		"--token", api.AgentToken(api.AgentKey(key), "vda-1")})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("agent: %v\n%s", err, logs.String())
		}
	}()
	var c *tls.Conn
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if c, err = tls.Dial("tcp", net.JoinHostPort("127.0.86.2", p2), &tls.Config{RootCAs: sv.caPool()}); err == nil {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("agent stopped: %v\n%s", err, logs.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the display port takes no TLS after 10s: %v\n%s", err, logs.String())
		}
	}
	defer c.Close()
	if leaf := c.ConnectionState().PeerCertificates[0]; !siteid.Is(leaf, siteid.RoleMachine, "vda-1") {
		t.Fatalf("the display port presents %v, want vda-1's certificate", leaf.URIs)
	}
	if !bytes.Contains([]byte(sv.log.String()), []byte("issued certificate")) {
		t.Errorf("the front door did not log the certificate it issued:\n%s", sv.log.String())
	}
}

// An agent with a wrong token gets no certificate and stops with the front door's answer.
func TestAgentWithAWrongTokenIsNotEnrolled(t *testing.T) {
	p1, p2 := freePort(t), freePort(t)
	file := writeConfig(t, strings.NewReplacer("PORT1", p1, "PORT2", p2).Replace(agentSite))
	sv := startServe(t, file)
	cmd := newAgentCmd()
	var logs testbuf.Buffer
	cmd.SetOut(io.Discard)
	cmd.SetErr(&logs)
	cmd.SetArgs([]string{"--config", file, "--machine", "vda-1", "--ca", filepath.Join(sv.data, "ca.pem"), "--token", "not-the-token"})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := cmd.ExecuteContext(ctx)
	if err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("agent with a wrong token: %v, want the enrolment refused (401)", err)
	}
}

// adminSite writes agentSite with an admin listener and an admin user (password "lab"), and
// returns it and its launch, display and admin ports.
func adminSite(t *testing.T) (file, launch, display, admin string) {
	t.Helper()
	launch, display, admin = freePort(t), freePort(t), freePort(t)
	site := strings.NewReplacer("PORT1", launch, "PORT2", display).Replace(agentSite)
	launchListener := `{kind: launch, address: "127.0.86.1:` + launch + `"}`
	site = strings.Replace(site, launchListener, launchListener+`, {kind: admin, address: "127.0.86.1:`+admin+`"}`, 1) +
		"users: [{name: admin, admin: true, password_hash: \"$2a$10$hmIm37EQl2GI6WzyFg.kUe2OoNhztKxrxmbZEcRHkzoi.ekBqG9n2\"}]\n"
	return writeConfig(t, site), launch, display, admin
}

// adminCLI runs frontdoor admin args against the admin port of sv and returns what it printed.
func adminCLI(t *testing.T, sv *served, admin string, args ...string) ([]byte, error) {
	t.Helper()
	cmd := newAdminCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(io.Discard)
	cmd.SetArgs(append(args, "--url", "https://127.0.86.1:"+admin, "--user", "admin", "--password", "lab", "--ca", filepath.Join(sv.data, "ca.pem")))
	err := cmd.ExecuteContext(context.Background())
	return out.Bytes(), err
}

// An operator enrols a machine's agent with a ticket from frontdoor admin enrol: the agent
// enrols once with it, serves its ports over TLS with its certificate and reports with the
// certificate; the ticket does not enrol a second time.
func TestAgentEnrolsWithATicketFromTheAdminCLI(t *testing.T) {
	file, _, display, admin := adminSite(t)
	sv := startServe(t, file)
	out, err := adminCLI(t, sv, admin, "enrol", "vda-1")
	var et api.EnrolmentTicket
	if err != nil || json.Unmarshal(out, &et) != nil || et.Token == "" {
		t.Fatalf("admin enrol: %v %q", err, out)
	}
	keep := t.TempDir()
	run := func(ctx context.Context, extra ...string) (chan error, *testbuf.Buffer) {
		cmd := newAgentCmd()
		logs := &testbuf.Buffer{}
		cmd.SetOut(io.Discard)
		cmd.SetErr(logs)
		cmd.SetArgs(append([]string{"--config", file, "--machine", "vda-1", "--ca", filepath.Join(sv.data, "ca.pem"), "--token", et.Token, "--interval", "200ms"}, extra...))
		done := make(chan error, 1)
		go func() { done <- cmd.ExecuteContext(ctx) }()
		return done, logs
	}
	ctx, cancel := context.WithCancel(context.Background())
	done, logs := run(ctx, "--data", keep)
	var c *tls.Conn
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if c, err = tls.Dial("tcp", net.JoinHostPort("127.0.86.2", display), &tls.Config{RootCAs: sv.caPool()}); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the agent serves no TLS after 10s: %v\n%s", err, logs.String())
		}
	}
	c.Close()
	// Its heartbeats, authenticated by the certificate, reach the front door.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		out, _ := adminCLI(t, sv, admin, "status")
		if strings.Contains(string(out), `"vda-1"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no heartbeat of vda-1 in the status after 10s: %s\nagent: %s", out, logs.String())
		}
	}
	cancel()
	<-done
	// The ticket is used up: an agent that kept nothing cannot enrol with it again.
	ctx2, cancel2 := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel2()
	done2, logs2 := run(ctx2)
	if err := <-done2; err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("a second enrolment with the same ticket: %v, want it refused (401)\n%s", err, logs2.String())
	}
	// The agent that kept its identity starts again without enrolling.
	ctx3, cancel3 := context.WithCancel(context.Background())
	done3, logs3 := run(ctx3, "--data", keep)
	defer func() { cancel3(); <-done3 }()
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(logs3.String(), "machine identity kept"); time.Sleep(50 * time.Millisecond) {
		select {
		case err := <-done3:
			t.Fatalf("the restarted agent stopped: %v\n%s", err, logs3.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the restarted agent did not use its kept identity:\n%s", logs3.String())
		}
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if c, err = tls.Dial("tcp", net.JoinHostPort("127.0.86.2", display), &tls.Config{RootCAs: sv.caPool()}); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the restarted agent serves no TLS after 10s: %v\n%s", err, logs3.String())
		}
	}
}

// frontdoor admin rotate-key rolls a new ticket key in: the answer names it, when it signs
// and the key it retires, and an agent of the site reads both keys from then on.
func TestAdminRotateKeyFromTheCLI(t *testing.T) {
	file, p1, _, p3 := adminSite(t)
	sv := startServe(t, file)
	out, err := adminCLI(t, sv, p3, "rotate-key")
	if err != nil {
		t.Fatalf("rotate-key: %v\n%s", err, out)
	}
	var rot api.Rotation
	if err := json.Unmarshal(out, &rot); err != nil || rot.Key == "" || rot.Retiring == "" || rot.SignsFrom.IsZero() {
		t.Fatalf("rotate-key printed %q (%v), want the new key, when it signs and the key it retires", out, err)
	}
	// The agent API hands out both keys.
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: sv.caPool()}}}
	resp, err := hc.Get("https://127.0.86.1:" + p1 + "/v1/agent/site-key")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var keys api.SiteKeys
	if err := json.NewDecoder(resp.Body).Decode(&keys); err != nil || len(keys.Verifying) != 2 {
		t.Fatalf("site keys after the rotation: %+v, %v; want two that verify", keys, err)
	}
}

// frontdoor admin rotate-ca starts a rotation of the site CA: ca.pem then holds both CAs;
// the next step is refused until every front door and agent has had time to follow, and
// admin ca says so.
func TestAdminRotateCAFromTheCLI(t *testing.T) {
	file, _, _, admin := adminSite(t)
	sv := startServe(t, file)
	out, err := adminCLI(t, sv, admin, "rotate-ca")
	var st pki.CAStatus
	if err != nil || json.Unmarshal(out, &st) != nil || st.Phase != pki.CAStart || len(st.Trusted) != 2 {
		t.Fatalf("rotate-ca: %v %s", err, out)
	}
	b, err := os.ReadFile(filepath.Join(sv.data, "ca.pem"))
	if err != nil || strings.Count(string(b), "BEGIN CERTIFICATE") != 2 {
		t.Fatalf("ca.pem after the start holds %d certificates (%v), want 2", strings.Count(string(b), "BEGIN CERTIFICATE"), err)
	}
	if out, err := adminCLI(t, sv, admin, "rotate-ca", "--issue"); err == nil || !strings.Contains(string(out), "may follow from") {
		t.Fatalf("--issue at once: %v %s", err, out)
	}
	if out, err := adminCLI(t, sv, admin, "rotate-ca", "--retire", "--issue"); err == nil {
		t.Fatalf("--retire --issue: %s", out)
	}
	out, err = adminCLI(t, sv, admin, "ca")
	if err != nil || json.Unmarshal(out, &st) != nil || st.Phase != pki.CAStart || !strings.Contains(st.Next, "--issue") {
		t.Fatalf("admin ca: %v %s", err, out)
	}
	out, err = adminCLI(t, sv, admin, "audit")
	if err != nil || !strings.Contains(string(out), "ca.rotate.start") {
		t.Fatalf("the audit log: %v\n%s", err, out)
	}
}
