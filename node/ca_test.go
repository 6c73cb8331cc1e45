package node

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/frontdoor-vdi/frontdoor/agent"
	"github.com/frontdoor-vdi/frontdoor/api"
	"github.com/frontdoor-vdi/frontdoor/configs"
	"github.com/frontdoor-vdi/frontdoor/internal/siteid"
	"github.com/frontdoor-vdi/frontdoor/internal/testkit"
	"github.com/frontdoor-vdi/frontdoor/pki"
)

// pemCerts parses the PEM certificates of b.
func pemCerts(t *testing.T, b []byte) []*x509.Certificate {
	t.Helper()
	var out []*x509.Certificate
	for rest := b; ; {
		var blk *pem.Block
		if blk, rest = pem.Decode(rest); blk == nil {
			return out
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, c)
	}
}

// poolOf returns a pool of certs.
func poolOf(certs ...*x509.Certificate) *x509.CertPool {
	p := x509.NewCertPool()
	for _, c := range certs {
		p.AddCert(c)
	}
	return p
}

// listenerIssuedBy reports whether addr serves a certificate for its address that roots
// verify.
func listenerIssuedBy(addr netip.AddrPort, roots *x509.CertPool) error {
	c, err := tls.Dial("tcp", addr.String(), &tls.Config{ServerName: addr.Addr().String(), RootCAs: roots})
	if err == nil {
		c.Close()
	}
	return err
}

// The site CA rotated in its three steps, on a site of one node, with a real agent that
// enrolled before and trusts, from its --ca, the old CA alone:
//   - start: the node trusts both CAs and hands both out (ca.pem, the agents' site-key); its
//     listener still serves the old CA's certificate; the agent comes to trust both.
//   - issue: the listener serves a certificate of the new CA; the agent renews its own from
//     the new CA within moments.
//   - retire: ca.pem holds the new CA alone; the agent still reaches its front door (it
//     trusts what the site gave it), and a certificate of the old CA is refused.
func TestRotatingTheSiteCA(t *testing.T) {
	port := freeTCPPort(t)
	cfg, err := configs.Load("site.yaml", []byte(fmt.Sprintf(`
site: {name: ca-test}
zones: [{name: hq, primary: true, ranges: [127.0.0.0/8]}]
nodes: [{name: fd, zone: hq, listeners: [{kind: launch, address: "127.0.98.71:%d"}]}]
groups: [{name: desktops, kind: shared}]
machines: [{name: vda-1, address: 127.0.98.72, zone: hq, group: desktops, display_ports: ["3389/tcp"]}]
`, port)))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	r := startNode(t, cfg, Options{DataDir: dir, CAStepWait: time.Millisecond})
	serveNode(t, r)
	listener := netip.MustParseAddrPort(fmt.Sprintf("127.0.98.71:%d", port))
	ctx := context.Background()
	oldCA := r.ca.Cert()
	oldKey, err := os.ReadFile(filepath.Join(dir, "ca.key"))
	if err != nil {
		t.Fatal(err)
	}
	oldOnly, err := pki.NewCA(r.ca.CertPEM(), oldKey, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	caFile := func() []*x509.Certificate {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(dir, "ca.pem"))
		if err != nil {
			t.Fatal(err)
		}
		return pemCerts(t, b)
	}

	// The agent, as frontdoor agent runs it (enrolled, following the site), trusting the old
	// CA alone.
	rep := agent.NewReporter("vda-1", api.AgentToken(api.AgentKey(r.siteKey), "vda-1"),
		[]agent.FrontDoor{{Node: "fd", Zone: "hq", URL: "https://" + listener.String()}}, &tls.Config{RootCAs: poolOf(oldCA)}, slog.New(slog.DiscardHandler))
	id, err := rep.Enroll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	actx, stop := context.WithCancel(ctx)
	defer stop()
	go rep.FollowKeys(actx, 50*time.Millisecond, func([]ed25519.PublicKey) {})
	kept := t.TempDir()
	// saved returns the certificates of the file name where the agent keeps its identity.
	saved := func(name string) []*x509.Certificate {
		t.Helper()
		if err := id.Save(kept); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(kept, name))
		if err != nil {
			t.Fatal(err)
		}
		return pemCerts(t, b)
	}
	agentCAs := func() []*x509.Certificate { return saved("site-ca.pem") }
	agentCert := func() *x509.Certificate { return saved("machine.pem")[0] }

	if _, err := r.rotateCA(ctx, pki.CAIssue); !errors.Is(err, api.ErrRefused) {
		t.Fatalf("--issue with no rotation under way: %v", err)
	}

	// start
	st, err := r.rotateCA(ctx, pki.CAStart)
	if err != nil || st.Phase != pki.CAStart || len(st.Trusted) != 2 || st.Issuing.SHA256 != st.Trusted[0].SHA256 {
		t.Fatalf("start: %+v, %v", st, err)
	}
	trusted := caFile()
	if len(trusted) != 2 || !trusted[0].Equal(oldCA) {
		t.Fatalf("start: ca.pem holds %d certificates, want the old CA then the new", len(trusted))
	}
	newCA := trusted[1]
	if err := listenerIssuedBy(listener, poolOf(oldCA)); err != nil {
		t.Fatalf("start: the listener no longer serves the old CA's certificate: %v", err)
	}
	testkit.WaitFor(t, "the agent trusts both CAs", func() bool { return len(agentCAs()) == 2 })
	if err := agentCert().CheckSignatureFrom(oldCA); err != nil {
		t.Fatalf("start: the agent's certificate changed: %v", err)
	}
	if _, err := r.rotateCA(ctx, pki.CAStart); !errors.Is(err, api.ErrRefused) {
		t.Fatalf("a second start while one is under way: %v", err)
	}

	// issue
	if st, err = r.rotateCA(ctx, pki.CAIssue); err != nil || st.Phase != pki.CAIssue || !bytes.Equal(r.ca.Cert().Raw, newCA.Raw) {
		t.Fatalf("issue: %+v, %v", st, err)
	}
	if err := listenerIssuedBy(listener, poolOf(newCA)); err != nil {
		t.Fatalf("issue: the listener serves no certificate of the new CA: %v", err)
	}
	if err := listenerIssuedBy(listener, poolOf(oldCA)); err == nil {
		t.Fatal("issue: the listener still serves the old CA's certificate")
	}
	testkit.WaitFor(t, "the agent renews its certificate from the new CA", func() bool { return agentCert().CheckSignatureFrom(newCA) == nil })

	// retire
	if st, err = r.rotateCA(ctx, pki.CARetire); err != nil || st.Phase != "" || len(st.Trusted) != 1 {
		t.Fatalf("retire: %+v, %v", st, err)
	}
	if trusted := caFile(); len(trusted) != 1 || !trusted[0].Equal(newCA) {
		t.Fatalf("retire: ca.pem holds %d certificates, want the new CA alone", len(trusted))
	}
	if err := rep.Heartbeat(ctx, 0, 0, 0); err != nil {
		t.Fatalf("retire: the agent (whose --ca is the old CA) no longer reaches its front door: %v", err)
	}
	testkit.WaitFor(t, "the agent trusts the new CA alone", func() bool { return len(agentCAs()) == 1 })

	// A certificate of the old CA is refused now, by the listener and by a gateway's side.
	oldCert, err := oldOnly.PartyCertificate(siteid.RoleMachine, "vda-1", nil)
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: poolOf(newCA),
		ServerName: listener.Addr().String(), Certificates: []tls.Certificate{*oldCert}}}}
	if resp, err := hc.Get("https://" + listener.String() + "/v1/agent/site-key"); err == nil {
		resp.Body.Close()
		t.Fatalf("retire: a client certificate of the old CA was taken: %s", resp.Status)
	}
	if !r.ca.Trusts(newCA) || r.ca.Trusts(oldCA) {
		t.Fatal("retire: the node's CA trusts the wrong certificates")
	}
}

// On a site of several nodes a step taken at one node reaches the others (the site identity,
// reread every keyRefresh): they trust, issue and hand out what it says, and a node started
// during a rotation starts in it.
func TestARotationOfTheSiteCAReachesEveryNode(t *testing.T) {
	testkit.SecondTier(t)
	cfg, dir := etcdSite(t, "ca-test", "fd-1", "fd-2", "fd-3")
	one := startSiteNodeWith(t, cfg, dir, "fd-1", Options{CAStepWait: time.Millisecond})
	two := startSiteNodeWith(t, cfg, dir, "fd-2", Options{CAStepWait: time.Millisecond})
	ctx := context.Background()
	old := one.ca.Cert()
	if !two.ca.Cert().Equal(old) {
		t.Fatal("the nodes start with two CAs")
	}
	for _, step := range []string{pki.CAStart, pki.CAIssue, pki.CARetire} {
		if _, err := one.rotateCA(ctx, step); err != nil {
			t.Fatalf("%s at fd-1: %v", step, err)
		}
		testkit.WaitFor(t, step+" reaches fd-2, and its ca.pem", func() bool {
			b, _ := os.ReadFile(filepath.Join(dir, "fd-2", "ca.pem"))
			return bytes.Equal(two.ca.CertPEM(), one.ca.CertPEM()) && two.ca.Cert().Equal(one.ca.Cert()) && bytes.Equal(b, one.ca.CertPEM())
		})
		if step == pki.CAStart {
			three := startSiteNodeWith(t, cfg, dir, "fd-3", Options{})
			if !bytes.Equal(three.ca.CertPEM(), one.ca.CertPEM()) {
				t.Fatal("fd-3, started during the rotation, does not trust both CAs")
			}
		}
	}
	if two.ca.Cert().Equal(old) || two.ca.Trusts(old) {
		t.Fatal("fd-2 still trusts the old CA")
	}
}
