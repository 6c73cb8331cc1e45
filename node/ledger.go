package node

import (
	"time"

	"github.com/frontdoor-vdi/frontdoor/store/etcd"
	"github.com/frontdoor-vdi/frontdoor/ticket"
)

// storeLedger is a ticket.Ledger over a store's ledger, which names channels as strings
// ("8443/tcp"): the site database's (etcd.Ledger) or a one-node site's bolt file
// (bolt.Ledger), so that a restart forgets no revocation, supersede mark or single use
// (finding L4 of the security review).
type storeLedger struct {
	l interface {
		Use(id [16]byte, ch string, until time.Time) (bool, error)
		Revoke(session string, before, until time.Time) error
		Revoked(session string) (time.Time, error)
		Supersede(session string, mark uint64, until time.Time) error
		Superseded(session string) (uint64, error)
	}
}

var _ ticket.Ledger = storeLedger{}

// Use implements ticket.Ledger.
func (s storeLedger) Use(id [16]byte, ch ticket.Channel, until time.Time) (bool, error) {
	return s.l.Use(id, ch.String(), until)
}

// Revoke implements ticket.Ledger.
func (s storeLedger) Revoke(session string, before, until time.Time) error {
	return s.l.Revoke(session, before, until)
}

// Revoked implements ticket.Ledger.
func (s storeLedger) Revoked(session string) (time.Time, error) { return s.l.Revoked(session) }

// Supersede implements ticket.Ledger.
func (s storeLedger) Supersede(session string, mark uint64, until time.Time) error {
	return s.l.Supersede(session, mark, until)
}

// Superseded implements ticket.Ledger.
func (s storeLedger) Superseded(session string) (uint64, error) { return s.l.Superseded(session) }

// siteLedger is the site database's ledger, which also wants the session of a launch
// ticket it records (ticket.SessionLedger).
type siteLedger struct {
	storeLedger
	site etcd.Ledger
}

var _ ticket.SessionLedger = siteLedger{}

// newSiteLedger returns the ticket.Ledger of the site database's ledger l.
func newSiteLedger(l etcd.Ledger) siteLedger { return siteLedger{storeLedger{l}, l} }

// UseFor implements ticket.SessionLedger.
func (s siteLedger) UseFor(id [16]byte, session string, ch ticket.Channel, until time.Time) (bool, error) {
	return s.site.UseFor(id, session, ch.String(), until)
}

// notifyingLedger is a ticket.Ledger of one node that tells fn of each revocation it takes,
// as the site database's watch tells a node of a shared store (etcd.Ledger.OnRevoked).
type notifyingLedger struct {
	ticket.Ledger
	fn func(session string, before time.Time)
}

// Revoke implements ticket.Ledger.
func (n notifyingLedger) Revoke(session string, before, until time.Time) error {
	if err := n.Ledger.Revoke(session, before, until); err != nil {
		return err
	}
	n.fn(session, before)
	return nil
}
