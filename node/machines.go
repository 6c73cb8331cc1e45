package node

import (
	"context"
	"crypto/tls"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/frontdoor-vdi/frontdoor/api"
	"github.com/frontdoor-vdi/frontdoor/broker"
	"github.com/frontdoor-vdi/frontdoor/internal/siteid"
	"github.com/frontdoor-vdi/frontdoor/pki"
	"github.com/frontdoor-vdi/frontdoor/store/settings"
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

// loadRevokedMachines reads the revocations stored in the site's settings and follows them.
func (r *Node) loadRevokedMachines() {
	apply := func(m map[string]string) { r.revokedMachines.merge(parseRevokedMachines(m)) }
	r.settings.On(settings.SectionRevokedMachines, apply)
	apply(r.settings.Get(settings.SectionRevokedMachines))
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
	v := strconv.FormatInt(before.UnixMilli(), 10)
	if err := r.settings.Set(ctx, settings.SectionRevokedMachines, map[string]string{name: v}); err != nil {
		return out, fmt.Errorf("%w: the site database did not take the revocation: %v", api.ErrRefused, err)
	}
	r.revokedMachines.merge(map[string]time.Time{name: before})
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
