package lab

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/frontdoor-vdi/frontdoor/api"
	"github.com/frontdoor-vdi/frontdoor/broker"
	"github.com/frontdoor-vdi/frontdoor/client"
	"github.com/frontdoor-vdi/frontdoor/internal/siteid"
)

// TestRevokingAMachine: `admin revoke-machine` ends the machine's sessions at once (the
// client comes back through a new launch on another machine), puts it in maintenance, and
// refuses a certificate issued to it before the revocation at the agent API, while one issued
// after it (a new enrolment) is taken.
func TestRevokingAMachine(t *testing.T) {
	l, _ := startLab(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ln := &client.Launcher{Name: "desktop.vdi.lab.test", DNSServer: "127.41.0.1:5353", User: "alice", Password: "lab",
		Resource: "desktop", Endpoint: "alice-laptop", RootCAs: l.CA().Pool()}
	s, desc, _, events := openSession(ctx, t, l, ln, client.Options{})
	machine := desc.Machine
	var agentAPI string // a front door of the machine's zone, whose agent API its agent uses
	for _, n := range l.Config.Nodes {
		for _, li := range n.Listeners {
			if n.Zone == desc.Zone && li.Kind == "launch" && agentAPI == "" {
				agentAPI = "https://" + li.Address.String()
			}
		}
	}
	// inMaintenance waits until the site database holds the machine in maintenance, or not.
	inMaintenance := func(want bool) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			snap, err := l.Site().Load(ctx)
			if err != nil {
				t.Fatal(err)
			}
			i := slices.IndexFunc(snap.Machines, func(m broker.MachineState) bool { return m.Name == machine })
			if got := i >= 0 && snap.Machines[i].Maintenance != nil && *snap.Machines[i].Maintenance; got == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s in maintenance in the site database: %v, want %v", machine, !want, want)
			}
		}
	}
	heartbeat := func(cert *tls.Certificate) int {
		t.Helper()
		hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
			RootCAs: l.CA().Pool(), Certificates: []tls.Certificate{*cert}}}}
		b, _ := json.Marshal(api.Heartbeat{Machine: machine, CPU: 1, Memory: 1})
		resp, err := hc.Post(agentAPI+"/v1/agent/heartbeat", "application/json", strings.NewReader(string(b)))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	before, err := l.CA().PartyCertificate(siteid.RoleMachine, machine, nil)
	if err != nil {
		t.Fatal(err)
	}
	if code := heartbeat(before); code != http.StatusOK {
		t.Fatalf("the machine's heartbeat before the revocation: %d", code)
	}

	var rev api.MachineRevocation
	err = adminAPI(t, l).Post(ctx, "/v1/admin/machines/"+machine+"/revoke", nil, &rev)
	if err != nil || !rev.Maintenance || !slices.Contains(rev.Ended, desc.SessionID) {
		t.Fatalf("revoke: %v %+v; want alice's session %s ended and the machine in maintenance", err, rev, desc.SessionID)
	}

	// The session ended: the client is cut and comes back by a new launch, elsewhere.
	back := waitEvent(t, events, client.EventBack, 30*time.Second)
	if !back.Relaunched {
		t.Fatalf("back %+v, want a new launch", back)
	}
	if d := s.Descriptor(); d.Machine == machine || d.SessionID == desc.SessionID {
		t.Fatalf("the new launch: session %s on %s, want a new session on another machine than %s", d.SessionID, d.Machine, machine)
	}
	if st, err := l.Session(ctx, desc.SessionID); err == nil && st.State != broker.StateEnded {
		t.Fatalf("the revoked machine's session is %s", st.State)
	}

	if code := heartbeat(before); code != http.StatusUnauthorized {
		t.Fatalf("a certificate issued before the revocation: %d, want 401", code)
	}
	// Certificates tell their issue time to the second: one of the revocation's second is
	// refused too.
	time.Sleep(1100 * time.Millisecond)
	after, err := l.CA().PartyCertificate(siteid.RoleMachine, machine, nil)
	if err != nil {
		t.Fatal(err)
	}
	if code := heartbeat(after); code != http.StatusOK {
		t.Fatalf("a certificate issued after the revocation (enrolled again): %d, want 200", code)
	}

	// The operator takes it out of maintenance.
	inMaintenance(true)
	maintenance := func(body string) int {
		t.Helper()
		return statusOf(t, adminAPI(t, l).Post(ctx, "/v1/admin/machines/"+machine+"/maintenance", json.RawMessage(body), nil))
	}
	if code := maintenance(`{"on": "no"}`); code != http.StatusBadRequest {
		t.Fatalf("a bad maintenance body: %d, want 400", code)
	}
	if code := maintenance(`{"on": false}`); code != http.StatusOK {
		t.Fatalf("maintenance off: %d", code)
	}
	inMaintenance(false)
}

// A client that sends its request's headers too slowly is cut off (the listeners'
// ReadHeaderTimeout, 5s), and the listener goes on serving others.
func TestSlowHeadersAreCutOff(t *testing.T) {
	l, _ := startLab(t)
	c, err := tls.Dial("tcp", "127.41.0.1:9090", l.TLSClientConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	if _, err := c.Write([]byte("GET /v1/admin/status HTTP/1.1\r\nHost: 127.41.0.1\r\n")); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil {
		// An answer (408) is a cut too; what matters is that the connection ends.
		c.Read(make([]byte, 4096))
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("a request whose headers never end held its connection %s", took)
	}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: l.TLSClientConfig()}}
	req, _ := http.NewRequest(http.MethodGet, "https://127.41.0.1:9090/v1/admin/status", nil)
	req.SetBasicAuth("admin", "lab")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the admin API after the slow client: %s", resp.Status)
	}
}
