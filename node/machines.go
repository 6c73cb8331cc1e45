package node

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/frontdoor-vdi/frontdoor/api"
	"github.com/frontdoor-vdi/frontdoor/broker"
	"github.com/frontdoor-vdi/frontdoor/internal/atomicfile"
	"github.com/frontdoor-vdi/frontdoor/internal/siteid"
	"github.com/frontdoor-vdi/frontdoor/pki"
	"github.com/frontdoor-vdi/frontdoor/store/etcd"
)

// Machine revocation (`frontdoor admin revoke-machine NAME`): every credential issued to the
// machine until then — its certificates, its enrolment tickets, its token — is refused from
// then on, site-wide: gateways end the handshake with a machine whose certificate is revoked,
// the agent API turns its agent away, its sessions are ended and it is put in maintenance. It
// comes back by enrolling again with a new enrolment ticket (`frontdoor admin enrol NAME`),
// whose certificate is issued after the revocation (certificates tell their issue time to the
// second: one issued in the second of the revocation is refused too); an operator then takes
// it out of maintenance (`frontdoor admin maintenance NAME off`). On etcd the revocations are the site's (settings section revoked-machines);
// on a site of one node they are kept in the data directory.

// revokedMachines are the times before which machines' credentials are revoked.
type revokedMachines struct {
	mu     sync.Mutex
	before map[string]time.Time
}

func (m *revokedMachines) at(name string) time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.before[name]
}

// merge takes stored revocations in: one only widens.
func (m *revokedMachines) merge(stored map[string]time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.before == nil {
		m.before = map[string]time.Time{}
	}
	for name, t := range stored {
		if t.After(m.before[name]) {
			m.before[name] = t
		}
	}
}

func (m *revokedMachines) snapshot() map[string]time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.before)
}

// revokedFile keeps a one-node site's machine revocations.
func (r *Node) revokedFile() string { return filepath.Join(r.o.DataDir, "revoked-machines.json") }

// loadRevokedMachines reads the revocations stored, and on etcd follows them.
func (r *Node) loadRevokedMachines() error {
	if r.shared != nil {
		apply := func(m map[string]string) { r.revokedMachines.merge(parseRevokedMachines(m)) }
		r.shared.Settings().On(etcd.SectionRevokedMachines, apply)
		apply(r.shared.Settings().Get(etcd.SectionRevokedMachines))
		return nil
	}
	b, err := os.ReadFile(r.revokedFile())
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var stored map[string]time.Time
	if err := json.Unmarshal(b, &stored); err != nil {
		return fmt.Errorf("%s: %w", r.revokedFile(), err)
	}
	r.revokedMachines.merge(stored)
	return nil
}

// parseRevokedMachines reads the settings section: Unix milliseconds by machine.
func parseRevokedMachines(m map[string]string) map[string]time.Time {
	out := make(map[string]time.Time, len(m))
	for name, v := range m {
		if ms, err := strconv.ParseInt(v, 10, 64); err == nil {
			out[name] = time.UnixMilli(ms)
		}
	}
	return out
}

// RevokeMachine revokes name's credentials issued until now, ends its sessions and puts it
// in maintenance (api.AdminOptions.RevokeMachine).
func (r *Node) RevokeMachine(ctx context.Context, name string) (api.MachineRevocation, error) {
	before := time.Now().Truncate(time.Millisecond)
	out := api.MachineRevocation{Machine: name, Before: before, Ended: []string{}}
	if r.shared != nil {
		v := strconv.FormatInt(before.UnixMilli(), 10)
		if err := r.shared.Settings().Set(ctx, etcd.SectionRevokedMachines, map[string]string{name: v}); err != nil {
			return out, fmt.Errorf("%w: the site database did not take the revocation: %v", api.ErrRefused, err)
		}
	}
	r.revokedMachines.merge(map[string]time.Time{name: before})
	if r.shared == nil {
		b, _ := json.Marshal(r.revokedMachines.snapshot())
		if err := atomicfile.Write(r.revokedFile(), b, 0o600); err != nil {
			return out, fmt.Errorf("keeping the revocation: %w", err)
		}
	}
	if err := r.broker.SetMaintenance(ctx, name, true); err != nil {
		return out, fmt.Errorf("revoked, but not put in maintenance: %w", err)
	}
	out.Maintenance = true
	for _, s := range r.broker.SessionsOn(name) {
		if s.State == broker.StateEnded {
			continue
		}
		ended, err := r.broker.Logoff(ctx, s.ID)
		if err != nil {
			continue // ended meanwhile
		}
		if err := r.verifier.Revoke(s.ID, r.cfg.Site.Tickets.ReconnectTTL.D()); err != nil {
			r.log.Warn("revoking the tickets of a revoked machine's session", "session", s.ID, "err", err)
		}
		r.sessionEnded(ended)
		out.Ended = append(out.Ended, s.ID)
	}
	out.Note = fmt.Sprintf("enrol the machine again (frontdoor admin enrol %s), then take it out of maintenance", name)
	r.log.Warn("machine revoked: its credentials until now are refused, its sessions ended", "machine", name, "before", before, "sessions", len(out.Ended))
	return out, nil
}

// refuseRevokedMachines ends a gateway's handshake with a machine whose certificate was issued
// before its revocation: the VerifyConnection of its client TLS configs toward machines (the
// gateway's own check that the certificate names the ticket's machine comes after it).
func (r *Node) refuseRevokedMachines(st tls.ConnectionState) error {
	if len(st.PeerCertificates) == 0 {
		return nil
	}
	role, name, ok := siteid.Of(st.PeerCertificates[0])
	if ok && role == siteid.RoleMachine && pki.PartyIssued(st.PeerCertificates[0]).Before(r.revokedMachines.at(name)) {
		return fmt.Errorf("machine %s: its certificate was revoked", name)
	}
	return nil
}
