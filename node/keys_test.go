package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/frontdoor-vdi/frontdoor/api"
	"github.com/frontdoor-vdi/frontdoor/configs"
	"github.com/frontdoor-vdi/frontdoor/internal/testkit"
	"github.com/frontdoor-vdi/frontdoor/store/etcd"
	"github.com/frontdoor-vdi/frontdoor/store/etcdembed"
	"github.com/frontdoor-vdi/frontdoor/ticket"
)

// issue signs a reconnect ticket of session s-1 on vda-1 at n.
func issue(t *testing.T, n *Node) (string, ticket.Claims) {
	t.Helper()
	tok, c, err := n.signer.Issue(ticket.Claims{Kind: ticket.Reconnect, Session: "s-1", Machine: "vda-1", Mode: ticket.ModeGateway}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return tok, c
}

// A rotation on a store of one node: the new key verifies at once and signs once the overlap
// has passed, the old key's tickets check until it retires, and a restart keeps both.
func TestRotateKeyOnAStoreOfOneNode(t *testing.T) {
	data := t.TempDir()
	cfg := loadSite(t, freeTCPPort(t), "")
	n := startNode(t, cfg, Options{DataDir: data})
	oldTok, old := issue(t, n)
	// An agent's token made with the key that signs (frontdoor admin agent-token).
	oldAgent := api.AgentToken(api.AgentKey(n.siteKey), "vda-1")
	agentOK := func(n *Node, tok string) bool {
		for _, a := range n.agents {
			if !a.CheckToken("vda-1", tok) {
				return false
			}
		}
		return len(n.agents) > 0
	}
	if !agentOK(n, oldAgent) {
		t.Fatal("the agent's token is refused before any rotation")
	}
	rot, err := n.rotateKey(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	if rot.Retiring != old.Key.String() || rot.Key == rot.Retiring || time.Until(rot.SignsFrom) < 25*time.Second {
		t.Fatalf("rotation %+v: want a new key signing in 30s, retiring %s", rot, old.Key)
	}
	if _, c := issue(t, n); c.Key != old.Key {
		t.Fatalf("during the overlap the ticket names key %s, want the old %s", c.Key, old.Key)
	}
	if st, err := os.Stat(filepath.Join(data, TicketKeysFile)); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("the key file: %v, %v; want mode 0600", st, err)
	}
	ks, err := n.readKeys(context.Background())
	if err != nil || len(ks.Keys) != 2 {
		t.Fatalf("keys after the rotation: %d, %v", len(ks.Keys), err)
	}
	// The overlap over: the new key signs; the old key's ticket still checks.
	if err := n.applyKeys(ks, rot.SignsFrom.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	newTok, c := issue(t, n)
	if c.Key.String() != rot.Key {
		t.Fatalf("after the overlap the ticket names key %s, want %s", c.Key, rot.Key)
	}
	for _, tok := range []string{oldTok, newTok} {
		if _, err := n.verifier.Check(tok, "vda-1", ticket.Channel{Port: 8443, Proto: "tcp"}); err != nil {
			t.Fatalf("a ticket after the rotation: %v", err)
		}
	}
	// The agents' tokens rotate with the keys: the old key's token is taken while it
	// verifies, and the new key's too.
	newKey, err := ks.Signing(rot.SignsFrom.Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	newAgent := api.AgentToken(api.AgentKey(newKey.Private), "vda-1")
	if !agentOK(n, oldAgent) || !agentOK(n, newAgent) {
		t.Fatalf("after the rotation: the old key's agent token taken %v, the new one's %v; want both", agentOK(n, oldAgent), agentOK(n, newAgent))
	}
	// The old key retired: its tickets are refused (checked with the verifier's keys of then).
	if err := n.applyKeys(ks, rot.RetiresAt.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := n.verifier.Peek(oldTok); !errors.Is(err, ticket.ErrUnknownKey) {
		t.Fatalf("a retired key's ticket: %v, want ErrUnknownKey", err)
	}
	if agentOK(n, oldAgent) || !agentOK(n, newAgent) {
		t.Fatalf("the old key retired: its agent token taken %v (want not), the new one's %v", agentOK(n, oldAgent), agentOK(n, newAgent))
	}
	// A restart reads both keys back.
	n.Close()
	n2 := startNode(t, cfg, Options{DataDir: data})
	if _, err := n2.verifier.Peek(newTok); err != nil {
		t.Fatalf("after a restart the new key's ticket: %v", err)
	}
	if _, err := n2.verifier.Peek(oldTok); err != nil {
		t.Fatalf("after a restart, within the old key's life, its ticket: %v", err)
	}

	// A key that leaked (finding L6 of the security review: it could not be retired early):
	// with retireNow every older key retires the moment the new one signs, as soon as every
	// front door has read it.
	now, err := n2.rotateKey(context.Background(), true)
	if err != nil {
		t.Fatal(err)
	}
	if wait := time.Until(now.SignsFrom); wait > keyRefresh+2*time.Second || !now.RetiresAt.Equal(now.SignsFrom) {
		t.Fatalf("a rotation retiring now: %+v, want the new key signing within %s and the old retired then", now, keyRefresh+time.Second)
	}
	ks2, err := n2.readKeys(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := n2.applyKeys(ks2, now.SignsFrom); err != nil {
		t.Fatal(err)
	}
	if _, c := issue(t, n2); c.Key.String() != now.Key {
		t.Fatalf("after a rotation retiring now the ticket names key %s, want %s", c.Key, now.Key)
	}
	for _, tok := range []string{oldTok, newTok} {
		if _, err := n2.verifier.Peek(tok); !errors.Is(err, ticket.ErrUnknownKey) {
			t.Fatalf("a ticket of a key retired at once: %v, want ErrUnknownKey", err)
		}
	}
	// A key that leaked takes its agents' tokens with it, the moment the new one signs.
	if agentOK(n2, newAgent) {
		t.Fatal("after a rotation retiring now, the retired key's agent token is still taken")
	}
}

// On etcd a key rotated at one front door reaches the others: sealed in the site identity,
// reread by each.
func TestRotateKeyReachesEveryNodeOfTheSite(t *testing.T) {
	testkit.SecondTier(t)
	cfg, dir := etcdSite(t, "keys-test", "fd-1", "fd-2")
	secret := cfg.Site.Store.SecretFile
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	var nodes []*Node
	for _, name := range []string{"fd-1", "fd-2"} {
		n, err := New(context.Background(), Options{Config: cfg, Node: name, DataDir: filepath.Join(dir, name), Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		defer n.Close()
		nodes = append(nodes, n)
	}
	tok, _ := issue(t, nodes[0])
	if _, err := nodes[1].verifier.Peek(tok); err != nil {
		t.Fatalf("a ticket of fd-1 at fd-2 before the rotation: %v", err)
	}
	storeSecret, err := etcd.ReadSecret(secret)
	if err != nil {
		t.Fatal(err)
	}
	before, err := nodes[0].store.(*etcd.Store).Keys().Identity(context.Background(), storeSecret, nil)
	if err != nil {
		t.Fatal(err)
	}
	rot, err := nodes[0].rotateKey(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	ks, err := nodes[1].readKeys(context.Background())
	if err != nil || len(ks.Keys) != 2 || ks.Keys[1].ID().String() != rot.Key {
		t.Fatalf("fd-2 reads %d keys (%v), want the rotated one", len(ks.Keys), err)
	}
	if err := nodes[1].applyKeys(ks, rot.SignsFrom.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	newTok, cl := issue(t, nodes[1])
	if cl.Key.String() != rot.Key {
		t.Fatalf("fd-2 signs with %s after the overlap, want %s", cl.Key, rot.Key)
	}
	if err := nodes[0].applyKeys(ks, rot.SignsFrom.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	for _, tk := range []string{tok, newTok} {
		if _, err := nodes[0].verifier.Peek(tk); err != nil {
			t.Fatalf("fd-1 checking a ticket after the rotation: %v", err)
		}
	}

	// Finding L6 of the security review: a writer of etcd put the identity from before the
	// rotation back, and the nodes took its keys, undoing the rotation. A node that has seen
	// the newer one refuses it and keeps its keys.
	if _, err := nodes[0].store.(*etcd.Store).Keys().UpdateIdentity(context.Background(), storeSecret, func([]byte) ([]byte, error) { return before, nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := nodes[1].readKeys(context.Background()); !errors.Is(err, ErrIdentityRolledBack) {
		t.Fatalf("fd-2 reading the identity put back: %v, want %v", err, ErrIdentityRolledBack)
	}
}

// The site key of a store of one node is created once, mode 0600, and read back; a file that
// is not a key is named in the error.
func TestLoadOrCreateKey(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "site.key")
	k1, err := loadOrCreateKey(p)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(p); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode = %v, %v; want 0600", st.Mode(), err)
	}
	k2, err := loadOrCreateKey(p)
	if err != nil || !k1.Equal(k2) {
		t.Fatalf("reloaded key differs: %v", err)
	}
	bad := filepath.Join(dir, "bad.key")
	os.WriteFile(bad, []byte("hello"), 0o600)
	if _, err := loadOrCreateKey(bad); err == nil || !strings.Contains(err.Error(), "not a PEM PRIVATE KEY") {
		t.Errorf("bad key file: %v", err)
	}
}

// etcdSite returns the configuration of a site on a new etcd member, of nodes (in zone hq),
// and a directory for their data.
func etcdSite(t *testing.T, site string, nodes ...string) (*configs.Config, string) {
	t.Helper()
	dir := t.TempDir()
	endpoint, secret := startEtcd(t, dir)
	var ns []string
	for _, n := range nodes {
		ns = append(ns, fmt.Sprintf("{name: %s, zone: hq}", n))
	}
	cfg, err := configs.Load("site.yaml", []byte(fmt.Sprintf(`
site:
  name: %s
  store: {backend: etcd, endpoints: [%s], secret_file: %q}
zones: [{name: hq, primary: true, ranges: [127.0.0.0/8]}]
nodes: [%s]
`, site, endpoint, secret, strings.Join(ns, ", "))))
	if err != nil {
		t.Fatal(err)
	}
	return cfg, dir
}

// startEtcd starts an etcd member with its data in dir until the test ends, and writes a
// store secret there: it returns the member's endpoint and the secret's file.
func startEtcd(t *testing.T, dir string) (endpoint, secret string) {
	t.Helper()
	testkit.SecondTier(t)
	c, err := etcdembed.Start(context.Background(), etcdembed.Options{Dir: filepath.Join(dir, "etcd"), UnsafeNoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	secret = filepath.Join(dir, "store.secret")
	if err := os.WriteFile(secret, []byte(etcd.NewSecret()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return c.Endpoints()[0], secret
}
