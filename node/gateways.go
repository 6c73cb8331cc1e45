package node

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"maps"
	"net/netip"
	"sync"
	"time"

	"github.com/frontdoor-vdi/frontdoor/api"
	"github.com/frontdoor-vdi/frontdoor/broker"
	"github.com/frontdoor-vdi/frontdoor/gateway"
	"github.com/frontdoor-vdi/frontdoor/health"
	"github.com/frontdoor-vdi/frontdoor/internal/siteid"
	"github.com/frontdoor-vdi/frontdoor/ticket"
)

// hosted is the gateways a node runs and what they need of it.
type hosted struct {
	// Gateways are the gateways run here, by name.
	gateways map[string]*gateway.Gateway
	// quic are the QUIC ends of the gateways that have a quic_port, by gateway name: opened
	// by Listen while the store's watch may already tell of ends and overrides (quics).
	quicMu     sync.Mutex // guards quic
	quic       map[string]*gateway.QUIC
	machines   map[string]netip.Addr // machine name -> address, for the gateways
	overrideMu sync.Mutex            // serializes admin overrides of gateway health
}

// gslbHealth answers gslb's Health from the checker: a gateway's verdict once it is definite
// (health.Checker.Definite); until then the GSLB name's configured initial state holds.
type gslbHealth struct{ c *health.Checker }

// GatewayUp implements gslb.Health.
func (h gslbHealth) GatewayUp(name string) (bool, bool) {
	v, known := h.c.Definite(name)
	return v == health.StateUp, known
}

// sessions adapts the broker to gateway.Sessions.
type sessions struct {
	b   *broker.Broker
	log *slog.Logger
}

// Connected implements gateway.Sessions.
func (s sessions) Connected(ctx context.Context, id, gw string) {
	if _, err := s.b.Connected(ctx, id, gw); err != nil {
		s.log.Warn("session connected", "session", id, "gateway", gw, "err", err)
	}
}

// Disconnected implements gateway.Sessions.
func (s sessions) Disconnected(ctx context.Context, id, gw string) {
	if _, err := s.b.Disconnected(ctx, id, gw); errors.Is(err, broker.ErrNotCarrier) {
		s.log.Info("a gateway's disconnect comes after the session moved on", "session", id, "gateway", gw, "err", err)
	} else if se, ok := s.b.Session(id); errors.Is(err, broker.ErrBadTransition) && ok && se.State == broker.StateDisconnected {
		s.log.Info("a gateway's disconnect of a session disconnected already (by an admin)", "session", id, "gateway", gw)
	} else if errors.Is(err, broker.ErrNoSession) {
		s.log.Info("a gateway's disconnect of a session that ended (its logoff cut the channels)", "session", id, "gateway", gw)
	} else if err != nil {
		s.log.Warn("session disconnected", "session", id, "gateway", gw, "err", err)
	}
}

// reissue signs the next reconnect ticket of a channel a gateway admitted (gateway.Options.
// Reissue): a reconnect ticket's chain keeps its expiry; a launch ticket starts one that
// expires with the launch's reconnect ticket.
func (r *Node) reissue(c ticket.Claims) (string, error) {
	expires := c.Expires
	if c.Kind == ticket.Launch {
		expires = c.Issued.Add(r.cfg.Site.Tickets.ReconnectTTL.D())
	}
	tok, _, err := r.signer.Reissue(c, expires)
	return tok, err
}

// carried reports whether session is connected in the site (gateway.Options.Carried).
func (r *Node) carried(session string) bool {
	s, ok := r.broker.Session(session)
	return ok && s.State == broker.StateConnected
}

func (r *Node) buildGateways() error {
	for _, m := range r.cfg.Machines {
		r.machines[m.Name] = m.Address
	}
	tr := gateway.NewTracker(sessions{r.broker, r.log})
	for _, g := range r.cfg.Gateways {
		if g.Node != r.spec.Name {
			continue // hosted by another node, or a foreign server
		}
		o := gateway.Options{Name: g.Name, TLS: gatewayTLS(r.serverTLS()), Verifier: r.verifier, Sessions: sessions{r.broker, r.log}, Reissue: r.reissue, Carried: r.carried,
			Machine: r.machineAddr, WebOrigins: r.cfg.PortalHosts(), Logger: r.log.With("component", "gateway")}
		o.Address = g.Address
		o.MachineTLS = r.ca.Party(siteid.RoleGateway, g.Name, []netip.Addr{o.Address}).ClientTLS(r.refuseRevokedMachines)
		o.Address = r.rebind(o.Address)
		for _, p := range g.Ports {
			switch {
			case p.Protocol == "udp":
				o.UDPPorts = append(o.UDPPorts, uint16(p.Port))
			case p.Port == g.HTTPSPort(): // validation refuses http on a hosted gateway
				o.HealthPort = uint16(p.Port)
			default:
				o.TCPPorts = append(o.TCPPorts, uint16(p.Port))
			}
		}
		if o.PlainUDP = g.PlainUDP; o.PlainUDP && len(o.UDPPorts) > 0 {
			r.log.Warn("plain UDP channels are on: their tickets and datagrams cross the client's leg unencrypted (gateways[].plain_udp)", "gateway", g.Name)
		}
		gw, err := gateway.New(o, tr)
		if err != nil {
			return err
		}
		r.gateways[g.Name] = gw
	}
	return nil
}

// gatewayTLS is the server TLS of a gateway's ports: the node's, but asking for no client
// certificate. Tickets admit channels; and a browser asked for one on a WebSocket (the
// HTTPS port's channels) cannot show its user the choice, and fails the connection.
func gatewayTLS(tc *tls.Config) *tls.Config {
	tc = tc.Clone()
	tc.ClientAuth, tc.ClientCAs, tc.VerifyConnection, tc.GetConfigForClient = tls.NoClientCert, nil, nil, nil
	return tc
}

// machineAddr resolves a machine name for the gateways.
func (r *Node) machineAddr(name string) (netip.Addr, bool) {
	a, ok := r.machines[name]
	return a, ok
}

// revoked cuts, at the gateways hosted here, the channels that tickets of session issued
// before before opened (a steal: the old endpoint's; a logoff: all), and tells the agents of
// the session's machine to do the same.
func (r *Node) revoked(session string, before time.Time) {
	if !r.built.Load() {
		return // nothing is carried yet
	}
	for _, g := range r.gateways {
		g.CloseSessionBefore(session, before)
	}
	for _, q := range r.quics() {
		q.CloseSessionBefore(session, before)
	}
	if s, ok := r.broker.Session(session); ok && s.State != broker.StateEnded {
		for _, a := range r.agents {
			a.Revoked(session, s.Machine, before)
		}
	}
}

// gatewaysFor returns the usable gateways for a machine in zone: the zone's eligible
// gateways, then those of the other zones, each group by name.
//
// While the site database is out of reach only the gateways hosted here are offered: in
// outage mode a launch ticket opens a channel only at the node that booked its session (a
// node that hosts none offers the others, which refuse its launch tickets until etcd is back).
func (r *Node) gatewaysFor(zone string) []api.GatewayEndpoint {
	var same, other []api.GatewayEndpoint
	outage := r.site.outage().Active() && len(r.gateways) > 0
	for _, g := range r.cfg.Gateways {
		if !r.health.Eligible(g.Name) || (outage && r.gateways[g.Name] == nil) {
			continue
		}
		e := api.GatewayEndpoint{Name: g.Name, Zone: g.Zone, Addresses: g.PublicAddresses, QUICPort: uint16(g.QUICPort), HTTPSPort: uint16(g.HTTPSPort())}
		if g.Zone == zone {
			same = append(same, e)
		} else {
			other = append(other, e)
		}
	}
	return append(same, other...)
}

// quics returns a copy of the QUIC ends, by gateway name.
func (r *Node) quics() map[string]*gateway.QUIC {
	r.quicMu.Lock()
	defer r.quicMu.Unlock()
	return maps.Clone(r.quic)
}

// Active implements gateway.Sessions.
func (s sessions) Active(id string) bool {
	se, ok := s.b.Session(id)
	return ok && se.State != broker.StateEnded
}
