package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"github.com/frontdoor-vdi/frontdoor/api"
	"github.com/frontdoor-vdi/frontdoor/broker"
	"github.com/frontdoor-vdi/frontdoor/configs"
	"github.com/frontdoor-vdi/frontdoor/gslb"
	"github.com/frontdoor-vdi/frontdoor/pki"
	"github.com/frontdoor-vdi/frontdoor/store/bolt"
	"github.com/frontdoor-vdi/frontdoor/store/etcd"
	"github.com/frontdoor-vdi/frontdoor/store/settings"
	"github.com/frontdoor-vdi/frontdoor/ticket"
)

// site is what a node shares with the other nodes of its site beyond the broker's store:
// the operators' settings, the ticket ledger, the site identity, where certificates and
// DNSSEC keys are kept, who is present and who leads each zone. A site of several nodes
// keeps all of it in etcd (siteOfNodes); a site of one node keeps it in its own store and
// data dir, where the node is present alone and leads every zone (oneNode). openSite picks
// one from the store; nothing else in node asks which.
type site interface {
	// settings are the operators' switches that every front door follows.
	settings() (siteSettings, error)
	// outage is the site database's outage mode.
	outage() outageMode
	// ledger is the ticket ledger; revoked is told of every revocation, this node's too.
	ledger(revoked func(session string, before time.Time)) ticket.Ledger
	// identities is where the site identity is kept.
	identities(cfg *configs.Config, dataDir string, log *slog.Logger) (identities, error)
	// keySets is where the DNSSEC key sets are kept.
	keySets(dataDir string) (keySets, error)
	// acme returns where ACME certificates are kept (nil: the data dir) and sets in o what
	// answers a dns-01 challenge, given the node's own GSLB server.
	acme(o *pki.ACMEOptions, dns *gslb.Handler, log *slog.Logger) (pki.CertKV, error)
	// election is the zones' leader election and what the leaders publish.
	election() election
	// present announces this node to the site.
	present(ctx context.Context, n etcd.NodeInfo) error
	// registrations returns where the machines' agents are registered site-wide; nil when
	// the node's own heartbeats tell it (api.AdminOptions.Registrations).
	registrations() func() map[string]api.Registration
	// status describes the store for the admin status.
	status(ctx context.Context) any
	// brokerStore is the store the broker works on, telling ev of what the node changes
	// when the store has no change feed of its own (follow).
	brokerStore(ev *api.Notifier) broker.Store
	// follow tells ev of the changes other nodes make: sessions, machines, zone leaders,
	// outage mode and audit entries.
	follow(ctx context.Context, ev *api.Notifier) error
	// reach says who a health override reaches beyond this node, for its note.
	reach() string
	// close frees what the site holds of its own (not the store).
	close()
}

var (
	_ site = (*siteOfNodes)(nil)
	_ site = oneNode{}
)

// openSite returns the site of the node whose store is st; st nil is a site of one node
// seen only for its identity (LoadIdentity). A site of one node on a bolt file moves its
// older settings files from dataDir into the file first (moveOldSettings).
func openSite(ctx context.Context, st broker.Store, cfg *configs.Config, dataDir string) (site, error) {
	switch s := st.(type) {
	case *etcd.Store:
		return &siteOfNodes{st: s, secretFile: cfg.Site.Store.SecretFile}, nil
	case *bolt.Store:
		if err := moveOldSettings(ctx, dataDir, s); err != nil {
			return nil, fmt.Errorf("moving the settings into the store: %w", err)
		}
		return oneNode{st: s, bolt: s}, nil
	}
	return oneNode{st: st}, nil
}

// siteOfNodes is a site of several nodes: everything in etcd.
type siteOfNodes struct {
	st         *etcd.Store
	secretFile string // the store secret's file, which seals what etcd keeps

	mu    sync.Mutex  // guards certs
	certs *etcd.Certs // the sealed storage of certificates and keys, made at first use
}

func (s *siteOfNodes) settings() (siteSettings, error) { return s.st.Settings(), nil }
func (s *siteOfNodes) outage() outageMode              { return s.st.Outage() }

// ledger: a launch ticket opens each channel once, site-wide, and every revocation comes by
// the watch.
func (s *siteOfNodes) ledger(revoked func(string, time.Time)) ticket.Ledger {
	s.st.Ledger().OnRevoked(revoked)
	return newSiteLedger(s.st.Ledger())
}

func (s *siteOfNodes) identities(cfg *configs.Config, _ string, log *slog.Logger) (identities, error) {
	if cfg.Site.Tickets.KeyFile != "" {
		return nil, errors.New("site.tickets.key_file: on an etcd store the site key is the site's, kept sealed in etcd; remove key_file")
	}
	return siteIdentities{keys: s.st.Keys(), secretFile: s.secretFile, site: cfg.Site.Name, log: log}, nil
}

func (s *siteOfNodes) keySets(string) (keySets, error) {
	kv, err := s.sealed()
	if err != nil {
		return nil, err
	}
	return etcdKeySets{kv: kv}, nil
}

// acme: the account, certificates and keys sealed in etcd; a challenge's record is served
// here and published for the site's other DNS nodes, which serve what is published.
func (s *siteOfNodes) acme(o *pki.ACMEOptions, dns *gslb.Handler, log *slog.Logger) (pki.CertKV, error) {
	kv, err := s.sealed()
	if err != nil {
		return nil, err
	}
	s.st.Keys().WatchChallenges(func(c etcd.Challenge) {
		if c.Gone {
			dns.RemoveTXT(c.Name, c.Value)
		} else if err := dns.AddTXT(c.Name, c.Value, 0); err != nil {
			log.Warn("a challenge record of the site not served", "name", c.Name, "err", err)
		}
	})
	o.DNS = siteChallenges{st: s.st, local: dns.ACME()}
	return kv, nil
}

// sealed returns the site's sealed storage in etcd, made at the first call.
func (s *siteOfNodes) sealed() (*etcd.Certs, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.certs != nil {
		return s.certs, nil
	}
	secret, err := etcd.ReadSecret(s.secretFile)
	if err != nil {
		return nil, fmt.Errorf("site.store.secret_file: %w", err)
	}
	s.certs, err = s.st.Keys().Certs(secret)
	return s.certs, err
}

func (s *siteOfNodes) election() election { return etcdElection{s.st.Election()} }

func (s *siteOfNodes) present(ctx context.Context, n etcd.NodeInfo) error {
	return s.st.Presence().Register(ctx, n)
}

func (s *siteOfNodes) registrations() func() map[string]api.Registration {
	return func() map[string]api.Registration {
		out := map[string]api.Registration{}
		for m, reg := range s.st.Presence().Registrations() {
			out[m] = api.Registration{Node: reg.Node, Zone: reg.Zone, Reported: reg.Reported.UTC()}
		}
		return out
	}
}

func (s *siteOfNodes) status(ctx context.Context) any {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	return s.st.Presence().Status(ctx)
}

// brokerStore: the store's watch tells every node of every change (follow).
func (s *siteOfNodes) brokerStore(*api.Notifier) broker.Store { return s.st }

func (s *siteOfNodes) follow(ctx context.Context, ev *api.Notifier) error {
	if _, err := s.st.Follow(ctx, func(c broker.Change) {
		if c.Machine != nil {
			ev.Notify(api.TopicMachines)
		} else {
			ev.Notify(api.TopicSessions)
			ev.Notify(api.TopicMachines) // a machine's session count
		}
	}); err != nil {
		return err
	}
	s.st.Election().OnElection(func() { ev.Notify(api.TopicSite) })
	s.st.Outage().On(func(bool) { ev.Notify(api.TopicSite) })
	s.st.Audit().OnAudit(func() { ev.Notify(api.TopicAudit) })
	return nil
}

func (s *siteOfNodes) reach() string { return "set at every front door" }

// close frees the site-wide locks this node holds.
func (s *siteOfNodes) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.certs != nil {
		s.certs.Close()
		s.certs = nil
	}
}

// oneNode is a site of one node: its settings and ledger in its own store (bolt or memory),
// its identity, certificates and keys in its data dir; the node is present alone and leads
// every zone.
type oneNode struct {
	st   broker.Store // nil when only the identity is wanted
	bolt *bolt.Store  // st when it is a bolt file; nil on a memory store
}

func (s oneNode) settings() (siteSettings, error) {
	if st, ok := s.st.(interface{ Settings() *settings.Local }); ok { // bolt, memory
		return st.Settings(), nil
	}
	return nil, fmt.Errorf("the store %T keeps no settings", s.st)
}

func (oneNode) outage() outageMode { return never{} }

// ledger: a bolt file's, so that a restart forgets no revocation, supersede mark or single
// use (finding L4 of the security review); else memory.
func (s oneNode) ledger(revoked func(string, time.Time)) ticket.Ledger {
	if s.bolt != nil {
		return notifyingLedger{storeLedger{s.bolt.Ledger(nil)}, revoked}
	}
	return notifyingLedger{ticket.NewMemoryLedger(0, nil), revoked}
}

func (oneNode) identities(cfg *configs.Config, dataDir string, log *slog.Logger) (identities, error) {
	keyFile := cfg.Site.Tickets.KeyFile
	if keyFile == "" {
		keyFile = filepath.Join(dataDir, "site.key")
	}
	return dataDirIdentities{dir: dataDir, keyFile: keyFile, site: cfg.Site.Name, log: log}, nil
}

func (oneNode) keySets(dataDir string) (keySets, error) {
	return &fileKeySets{dir: filepath.Join(dataDir, "dnssec")}, nil
}

func (oneNode) acme(o *pki.ACMEOptions, dns *gslb.Handler, _ *slog.Logger) (pki.CertKV, error) {
	o.DNS = dns.ACME()
	return nil, nil
}

func (oneNode) election() election                                { return &electionOfOne{} }
func (oneNode) present(context.Context, etcd.NodeInfo) error      { return nil }
func (oneNode) registrations() func() map[string]api.Registration { return nil }
func (s oneNode) status(context.Context) any {
	if s.bolt != nil {
		return map[string]any{"backend": "bolt"}
	}
	return map[string]any{"backend": "memory"}
}

// brokerStore: the store has no change feed; what the broker stores is all that changes.
func (s oneNode) brokerStore(ev *api.Notifier) broker.Store { return notifyingStore{s.st, ev} }

func (oneNode) follow(context.Context, *api.Notifier) error { return nil }
func (oneNode) reach() string                               { return "" }
func (oneNode) close()                                      {}
